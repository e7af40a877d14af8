//! Helpers shared by the integration tests that check checked-in YAML against the Rust types.

use serde_json::Value;

/// Paths present (or different) in `written` but not in `parsed`: fields a manifest sets that
/// its type does not know (misspelt or misplaced), found by a round trip through the type.
pub fn lost_fields(path: &str, written: &Value, parsed: &Value, out: &mut Vec<String>) {
    match (written, parsed) {
        (Value::Object(w), Value::Object(p)) => {
            for (key, value) in w {
                let path = format!("{path}.{key}");
                match p.get(key) {
                    Some(parsed) => lost_fields(&path, value, parsed, out),
                    None => out.push(path),
                }
            }
        }
        (Value::Array(w), Value::Array(p)) if w.len() == p.len() => {
            for (i, (w, p)) in w.iter().zip(p).enumerate() {
                lost_fields(&format!("{path}[{i}]"), w, p, out);
            }
        }
        (w, p) if w != p => out.push(format!("{path} ({w} became {p})")),
        _ => {}
    }
}
