//! Berth's v1 contracts as Rust: the messages, clients and servers generated from `proto/`, and the encoded
//! file descriptor set that the services hand to gRPC reflection so that any client can discover them, and through
//! which `json` maps the messages to proto3 JSON for contracts spoken over plain HTTP.

// Generated oneofs hold whole messages inline; boxing them would make every caller's code worse to spare a few
// hundred bytes on messages that live briefly.
#![allow(clippy::large_enum_variant)]

pub mod codec;
pub mod json;

/// Encoded `FileDescriptorSet` of every Berth contract, for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/berth_descriptor.bin"));

/// Types that more than one service speaks in.
pub mod common {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("berth.common.v1");
    }
}

/// Queues, placements and direct claims.
pub mod placement {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("berth.placement.v1");
    }
}

/// Game sessions, player sessions and search.
pub mod session {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("berth.session.v1");
    }
}

/// Fleets, capacity and scaling.
pub mod fleet {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("berth.fleet.v1");
    }
}

/// Game-server registration, the SDK stream and health.
pub mod health {
    /// Version 1.
    pub mod v1 {
        tonic::include_proto!("berth.health.v1");
    }
}

/// Agones' contracts: the SDK, which berth-agent serves so that game servers built on Agones' SDKs run on Berth
/// unchanged, and the allocation API, which the placement service serves to matchmakers built on Agones' allocator.
pub mod agones {
    /// The allocation API (package `allocation`).
    pub mod allocation {
        tonic::include_proto!("allocation");
    }

    /// The game-server SDK (package `agones.dev.sdk`).
    pub mod sdk {
        tonic::include_proto!("agones.dev.sdk");

        /// Its alpha surface: player tracking (package `agones.dev.sdk.alpha`).
        pub mod alpha {
            tonic::include_proto!("agones.dev.sdk.alpha");
        }

        /// Its beta surface: counters and lists (package `agones.dev.sdk.beta`).
        pub mod beta {
            tonic::include_proto!("agones.dev.sdk.beta");
        }
    }
}
