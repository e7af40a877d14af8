//! Records the commit the binary is built from, for `gangplank --version`, `/version` and the
//! `gangplank_build_info` metric: `GANGPLANK_COMMIT` when set (an image build from a tree
//! without `.git`), else `git rev-parse HEAD` of the checkout, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GANGPLANK_COMMIT");
    let git = Path::new(".git");
    // A commit moves HEAD's branch: its ref file, or packed-refs once git packs it.
    let branch = std::fs::read_to_string(git.join("HEAD"))
        .ok()
        .and_then(|head| head.strip_prefix("ref: ").map(|r| r.trim().to_string()));
    let watched = ["HEAD", "packed-refs"]
        .into_iter()
        .map(|file| git.join(file))
        .chain(branch.map(|b| git.join(b)));
    // Cargo reruns a build script on every build while a watched path is missing.
    for path in watched.filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let commit = std::env::var("GANGPLANK_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(head_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=GANGPLANK_COMMIT={}", commit.trim());
}

fn head_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
}
