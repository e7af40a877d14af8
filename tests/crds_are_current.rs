//! The checked-in CRDs must be exactly what `gangplank crdgen` prints from the Rust types, so
//! that what an operator installs is what the binary reads and writes.
//!
//! With `GANGPLANK_UPDATE_CRDS=1` the test rewrites the file instead of failing, for when the
//! binary cannot be run (`GANGPLANK_UPDATE_CRDS=1 cargo test --test crds_are_current`).

mod checked_in;

const CHECKED_IN: &str = "manifests/crds/gangplank-crds.yaml";

#[test]
fn checked_in_crds_match_the_rust_types() {
    let rendered = gangplank::crdgen::render().expect("CRDs render");
    checked_in::assert_current(
        CHECKED_IN,
        &rendered,
        "GANGPLANK_UPDATE_CRDS",
        &format!("cargo run -- crdgen > {CHECKED_IN}"),
    );
}
