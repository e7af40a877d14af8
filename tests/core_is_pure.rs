//! The core crate stays free of Kubernetes, HTTP and async-runtime crates, directly or through
//! any dependency: `cargo tree` of its normal dependencies names none of them.

use std::process::Command;

const FORBIDDEN: [&str; 6] = ["kube", "k8s-openapi", "axum", "hyper", "tokio", "tower"];

#[test]
fn the_core_crate_depends_on_no_kubernetes_http_or_async_runtime_crate() {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "gangplank-core", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    let crates: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    assert!(crates.contains(&"gangplank-core"), "{tree}");
    let found: Vec<&&str> = crates
        .iter()
        .filter(|c| {
            FORBIDDEN
                .iter()
                .any(|f| c == &f || c.starts_with(&format!("{f}-")))
        })
        .collect();
    assert!(found.is_empty(), "the core depends on {found:?}");
}
