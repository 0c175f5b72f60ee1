//! Sets `VLLM_CORRECTOR_GIT_COMMIT` for `COMMIT` (crates/service/src/lib.rs): `--version`, the landing page
//! and the build-info self-metric name the commit the binary was built from.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    git_commit();
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
