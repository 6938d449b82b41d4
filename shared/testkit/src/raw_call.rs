//! A unary gRPC call made over plain HTTP/2 that sends the caller's deadline (`grpc-timeout`) but keeps no timer of
//! its own. tonic's client answers itself CANCELLED "Timeout expired" the moment its deadline passes, which hides
//! what the server answered at that moment; this shows the server's answer, as a client in another language that
//! received it first would see it.

use std::time::Duration;

use bytes::Bytes;
use tonic::Status;

/// Calls `path` (`/package.Service/Method`) on `endpoint` (`http://host:port`) with `request`, a bearer `token` and
/// the deadline `timeout`; answers the status the server sent (OK included), however long it took.
pub async fn unary_without_timer(
    endpoint: &str,
    path: &str,
    token: &str,
    request: &impl prost::Message,
    timeout: Duration,
) -> Status {
    let address = endpoint.trim_start_matches("http://");
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .expect("the service listens");
    let (client, connection) = h2::client::handshake(tcp).await.expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("the connection takes a stream");
    // A gRPC message: uncompressed (0), its length, then its encoding.
    let mut frame = vec![0u8];
    frame.extend(
        u32::try_from(request.encoded_len())
            .expect("a small request")
            .to_be_bytes(),
    );
    request.encode(&mut frame).expect("a Vec grows");
    let head = http::Request::post(format!("{endpoint}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", format!("{}m", timeout.as_millis()))
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .expect("a well-formed request");
    let (response, mut body) = client.send_request(head, false).expect("a stream");
    body.send_data(Bytes::from(frame), true).expect("the request is sent");
    let (parts, mut received) = response.await.expect("an answer").into_parts();
    // A refusal comes trailers-only, in the headers; an answer with a message has its status in the trailers.
    if let Some(status) = Status::from_header_map(&parts.headers) {
        return status;
    }
    while let Some(data) = received.data().await {
        let data = data.expect("the body arrives");
        let _ = received.flow_control().release_capacity(data.len());
    }
    let trailers = received
        .trailers()
        .await
        .expect("trailers arrive")
        .expect("a gRPC status in the trailers");
    Status::from_header_map(&trailers).expect("a gRPC status in the trailers")
}
