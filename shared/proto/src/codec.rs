//! The protobuf codec of every Berth service and client: prost's, with small initial buffers. tonic starts each
//! call with 8 KiB buffers each way; Berth's messages are mostly a few hundred bytes, and a health replica holds a
//! stream per game server, so at 20,000 servers the default would spend 320 MiB on buffers that stay empty.
//! Buffers still grow on demand for large messages.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Initial size of each call's encode and decode buffer.
const BUFFER_BYTES: usize = 1024;
/// Encoded bytes after which a stream yields to let them be sent (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// prost encoding with [`BUFFER_BYTES`] buffers.
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U> {
    _messages: PhantomData<(T, U)>,
}

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec { _messages: PhantomData }
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_BYTES, YIELD_THRESHOLD)
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
