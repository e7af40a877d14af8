//! The checked-in CRDs must be exactly what `gangplank crdgen` prints from the Rust types, so
//! that what an operator installs is what the binary reads and writes.
//!
//! With `GANGPLANK_UPDATE_CRDS=1` the test rewrites the file instead of failing, for when the
//! binary cannot be run (`GANGPLANK_UPDATE_CRDS=1 cargo test --test crds_are_current`).

use std::path::PathBuf;

const CHECKED_IN: &str = "manifests/crds/gangplank-crds.yaml";

#[test]
fn checked_in_crds_match_the_rust_types() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(CHECKED_IN);
    let rendered = gangplank::crdgen::render().expect("CRDs render");

    if std::env::var_os("GANGPLANK_UPDATE_CRDS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &rendered).expect("write the CRD file");
        return;
    }

    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != rendered {
        let first_difference = checked_in
            .lines()
            .zip(rendered.lines())
            .enumerate()
            .find(|(_, (old, new))| old != new)
            .map(|(i, (old, new))| {
                format!(
                    "first difference at line {}:\n  checked in: {old}\n  generated:  {new}",
                    i + 1
                )
            })
            .unwrap_or_else(|| {
                format!(
                    "checked in has {} lines, generated has {}",
                    checked_in.lines().count(),
                    rendered.lines().count()
                )
            });
        panic!(
            "{CHECKED_IN} is stale: run `cargo run -- crdgen > {CHECKED_IN}`\n{first_difference}"
        );
    }
}
