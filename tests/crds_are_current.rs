//! The checked-in CRDs must be exactly what `gangplank crdgen` prints from the Rust types, so
//! that what an operator installs is what the binary reads and writes, by kubectl or by the
//! Helm chart (which holds a copy, as Helm reads only files inside a chart); and the chart's
//! third-party CRDs are those of `manifests/crds/third-party/`.
//!
//! With `GANGPLANK_UPDATE_CRDS=1` the test rewrites the file instead of failing, for when the
//! binary cannot be run (`GANGPLANK_UPDATE_CRDS=1 cargo test --test crds_are_current`).

mod checked_in;

const CHECKED_IN: &str = "manifests/crds/gangplank-crds.yaml";
const IN_THE_CHART: &str = "charts/gangplank/crds/gangplank-crds.yaml";

#[test]
fn checked_in_crds_match_the_rust_types() {
    let rendered = gangplank::crdgen::render().expect("CRDs render");
    checked_in::assert_current(
        CHECKED_IN,
        &rendered,
        "GANGPLANK_UPDATE_CRDS",
        &format!("cargo run -- crdgen > {CHECKED_IN}"),
    );
    checked_in::assert_current(
        IN_THE_CHART,
        &rendered,
        "GANGPLANK_UPDATE_CRDS",
        &format!("cargo run -- crdgen > {IN_THE_CHART}"),
    );
}

#[test]
fn the_charts_third_party_crds_are_the_manifests_ones() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let names = |dir: &str| {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("read {dir}: {e}"))
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let manifests = "manifests/crds/third-party";
    let chart = "charts/gangplank/files/third-party-crds";
    assert_eq!(names(manifests), names(chart));
    for name in names(manifests) {
        let read = |dir: &str| std::fs::read_to_string(root.join(dir).join(&name)).unwrap();
        assert!(
            read(manifests) == read(chart),
            "{chart}/{name} differs from {manifests}/{name}: copy it"
        );
    }
}
