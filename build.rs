//! Generates the prost types of `proto/remote.proto` (RW 1.0) and `proto/remote_v2.proto` (RW 2.0).
//!
//! No `protoc` is needed: `protox` parses the `.proto` files into a file descriptor set in pure Rust
//! and `prost-build` generates code from it into `OUT_DIR` (`prometheus.rs`, `io.prometheus.write.v2.rs`),
//! which `src/protocol/prompb.rs` includes.

const PROTOS: [&str; 2] = ["remote.proto", "remote_v2.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed=proto/{proto}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    git_commit();
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}

/// Sets `VLLM_CORRECTOR_GIT_COMMIT` to `git rev-parse --short HEAD`, or `unknown` outside a git
/// checkout (a source tarball, the Docker build context) or without `git`. Re-run when HEAD moves.
fn git_commit() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=VLLM_CORRECTOR_GIT_COMMIT={commit}");
    if let Some(git_dir) = std::process::Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
    {
        let git_dir = std::path::PathBuf::from(git_dir.trim());
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        println!(
            "cargo:rerun-if-changed={}",
            git_dir.join("logs/HEAD").display()
        );
    }
}
