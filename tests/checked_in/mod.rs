//! The check shared by the tests of generated files (CRDs, the Grafana dashboard): the file in
//! the repository must be exactly what the code renders, so what an operator installs is what
//! the binary means.

use std::path::PathBuf;

/// Fails, naming the first differing line and the command that regenerates it, unless the
/// checked-in file at `relative` (from the crate root) equals `rendered`. With the environment
/// variable `update` set to `1` it rewrites the file instead, for when the binary cannot be run.
pub fn assert_current(relative: &str, rendered: &str, update: &str, regenerate: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os(update).is_some_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap_or_else(|e| panic!("write {relative}: {e}"));
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in == rendered {
        return;
    }
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
        "{relative} is stale: run `{regenerate}` (or set {update}=1 and rerun this test)\n\
         {first_difference}"
    );
}
