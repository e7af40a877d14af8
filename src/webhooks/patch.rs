//! Building the RFC 6902 JSON patch of a mutating webhook.
//!
//! A JSON patch `add` fails when the parent of its path does not exist (`/metadata/labels/x`
//! on a pod without labels), and paths must escape `/` as `~1` (every Gangplank key has a
//! slash: `/metadata/labels/scheduling.gangplank.dev~1pod-group`). [`Patcher`] takes care of
//! both: it keeps the object as JSON, applies each operation to it as it is added (so the
//! second label sees the `labels` map the first one created), and creates a missing parent
//! with one `add` of the whole nested value.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

/// Accumulates a patch against a copy of the object.
#[derive(Debug, Clone)]
pub struct Patcher {
    doc: Value,
    ops: Vec<PatchOperation>,
}

impl Patcher {
    /// Starts from the object as the API server sent it.
    pub fn new(object: &impl serde::Serialize) -> Self {
        Self {
            doc: serde_json::to_value(object).expect("API objects always serialize"),
            ops: Vec::new(),
        }
    }

    /// The object with every operation so far applied.
    pub fn doc(&self) -> &Value {
        &self.doc
    }

    /// Sets the member at `path` (object keys, unescaped) to `value`, creating missing parent
    /// objects. Does nothing when it already holds `value`.
    pub fn set(&mut self, path: &[&str], value: Value) {
        if self.get(path) == Some(&value) {
            return;
        }
        // The longest prefix of `path` that exists as an object or array; everything below it
        // is added as one nested value.
        let mut existing = 0;
        for depth in 1..path.len() {
            match self.get(&path[..depth]) {
                Some(Value::Object(_) | Value::Array(_)) => existing = depth,
                _ => break,
            }
        }
        let nested = path[existing + 1..].iter().rev().fold(value, |inner, key| {
            let mut map = Map::new();
            map.insert((*key).to_owned(), inner);
            Value::Object(map)
        });
        self.add(
            PointerBuf::from_tokens(path[..=existing].iter().copied()),
            nested,
        );
    }

    /// Appends `value` to the array at `path`, creating the array (and missing parents) when
    /// absent.
    pub fn push(&mut self, path: &[&str], value: Value) {
        match self.get(path) {
            Some(Value::Array(_)) => {
                let mut pointer = PointerBuf::from_tokens(path.iter().copied());
                pointer.push_back("-");
                self.add(pointer, value);
            }
            _ => self.set(path, Value::Array(vec![value])),
        }
    }

    /// Removes the member at `path`, if there is one.
    pub fn remove(&mut self, path: &[&str]) {
        if self.get(path).is_none() {
            return;
        }
        let op = PatchOperation::Remove(RemoveOperation {
            path: PointerBuf::from_tokens(path.iter().copied()),
        });
        json_patch::patch(&mut self.doc, std::slice::from_ref(&op))
            .expect("a remove of an existing member always applies");
        self.ops.push(op);
    }

    /// The value at `path`, if any.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(&self.doc, |value, key| match value {
            Value::Object(map) => map.get(*key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
    }

    /// The patch so far.
    pub fn into_patch(self) -> Patch {
        Patch(self.ops)
    }

    fn add(&mut self, path: PointerBuf, value: Value) {
        let op = PatchOperation::Add(AddOperation { path, value });
        json_patch::patch(&mut self.doc, std::slice::from_ref(&op))
            .expect("an add below an existing object always applies");
        self.ops.push(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(patcher: Patcher) -> Value {
        serde_json::to_value(patcher.into_patch()).unwrap()
    }

    #[test]
    fn a_label_on_an_object_without_labels_adds_the_whole_map() {
        let mut p = Patcher::new(&json!({"metadata": {"name": "p"}}));
        p.set(&["metadata", "labels", "a.io/b"], json!("x"));
        p.set(&["metadata", "labels", "c"], json!("y"));
        assert_eq!(
            ops(p),
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"a.io/b": "x"}},
                {"op": "add", "path": "/metadata/labels/c", "value": "y"}
            ])
        );
    }

    #[test]
    fn slashes_and_tildes_in_keys_are_escaped() {
        let mut p = Patcher::new(&json!({"metadata": {"labels": {}}}));
        p.set(
            &["metadata", "labels", "scheduling.gangplank.dev/pod-group"],
            json!("g"),
        );
        p.set(&["metadata", "labels", "odd~key"], json!("v"));
        assert_eq!(
            ops(p),
            json!([
                {"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "g"},
                {"op": "add", "path": "/metadata/labels/odd~0key", "value": "v"}
            ])
        );
    }

    #[test]
    fn remove_takes_out_a_member_that_is_there_and_nothing_else() {
        let mut p = Patcher::new(&json!({"metadata": {"annotations": {"a/b": "1"}}}));
        p.remove(&["metadata", "annotations", "missing"]);
        p.remove(&["metadata", "annotations", "a/b"]);
        assert_eq!(
            ops(p),
            json!([{"op": "remove", "path": "/metadata/annotations/a~1b"}])
        );
    }

    #[test]
    fn setting_a_value_already_there_adds_nothing() {
        let mut p = Patcher::new(&json!({"spec": {"queue": "default"}}));
        p.set(&["spec", "queue"], json!("default"));
        assert_eq!(ops(p), json!([]));
    }

    #[test]
    fn push_creates_the_array_then_appends() {
        let mut p = Patcher::new(&json!({"spec": {}}));
        p.push(&["spec", "schedulingGates"], json!({"name": "a"}));
        p.push(&["spec", "schedulingGates"], json!({"name": "b"}));
        assert_eq!(
            ops(p.clone()),
            json!([
                {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "a"}]},
                {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "b"}}
            ])
        );
        assert_eq!(
            p.doc(),
            &json!({"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}]}})
        );
    }

    #[test]
    fn paths_through_array_elements_are_followed() {
        let mut p = Patcher::new(&json!({"spec": {"containers": [{"name": "main"}]}}));
        p.set(
            &["spec", "containers", "0", "resources", "limits", "x.io/y"],
            json!("1"),
        );
        assert_eq!(
            ops(p),
            json!([{"op": "add", "path": "/spec/containers/0/resources",
                "value": {"limits": {"x.io/y": "1"}}}])
        );
    }

    #[test]
    fn a_null_parent_is_replaced_by_an_object() {
        let mut p = Patcher::new(&json!({"metadata": {"labels": null}}));
        p.set(&["metadata", "labels", "k"], json!("v"));
        assert_eq!(
            ops(p),
            json!([{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}])
        );
    }
}
