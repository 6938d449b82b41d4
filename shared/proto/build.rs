//! Compiles every contract under `proto/` with protox (pure Rust, so no system `protoc` is needed), generates the
//! prost messages and tonic clients and servers, and keeps the encoded file descriptor set for gRPC reflection and
//! for the proto3 JSON mapping (`json.rs`), which finds a message's descriptor by the full name each message is
//! given here (`prost::Name`).

use std::path::{Path, PathBuf};

use prost::Message;

fn proto_files(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            proto_files(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            found.push(path);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    proto_files(&root, &mut files)?;
    files.sort();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    let descriptors = protox::compile(&files, [&root])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("berth_descriptor.bin"), descriptors.encode_to_vec())?;
    let mut config = tonic_prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        .codec_path("crate::codec::LeanCodec")
        .compile_fds_with_config(descriptors, config)?;
    Ok(())
}
