//! Generates the prost types of `proto/remote.proto` (RW 1.0) and `proto/remote_v2.proto` (RW 2.0).
//!
//! No `protoc` is needed: `protox` parses the `.proto` files into a file descriptor set in pure Rust
//! and `prost-build` generates code from it into `OUT_DIR` (`prometheus.rs`, `io.prometheus.write.v2.rs`),
//! which `src/prompb.rs` includes.

const PROTOS: [&str; 2] = ["remote.proto", "remote_v2.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed=proto/{proto}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
