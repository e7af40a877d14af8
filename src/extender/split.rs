//! Splits a filter or prioritize request into its three parts without serde walking
//! `NodeNames`.
//!
//! Why: at 5,000 candidate names (a scheduler with `percentageOfNodesToScore: 100`), serde
//! skipping the array's strings to find the object's end, and then splitting the names out of
//! it, was nine tenths of a pass-through call. Here the object's keys are read by a plain scan,
//! `NodeNames` is checked and split in one pass (strings without escapes or control
//! characters, the only kind a node name can be), and every other value is handed to serde as
//! one raw value.
//!
//! Decision: the scan only accepts; it never words an error. Anything it does not know for sure
//! (an escape in a key or a name, a duplicate key, a missing `Pod`, a syntax error anywhere)
//! makes it give up, and serde then decodes the whole body as before, with serde's error. What
//! it accepts, serde accepts with the same result (`tests` check both on the same bodies).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::node_names::{NodeNames, expect, node_names, space, string};
use super::wire::ExtenderArgsRef;

/// `body` split like serde would, or `None` to let serde decode it.
pub fn args(body: &[u8]) -> Option<ExtenderArgsRef<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let b = text.as_bytes();
    let mut at = space(b, 0);
    expect(b, at, b'{')?;
    at = space(b, at + 1);
    let mut pod: Option<&RawValue> = None;
    let mut nodes: Option<Option<&RawValue>> = None;
    let mut names: Option<Option<NodeNames>> = None;
    loop {
        let key_end = string(b, at)?;
        let key = &text[at + 1..key_end];
        at = space(b, key_end + 1);
        expect(b, at, b':')?;
        at = space(b, at + 1);
        match key {
            "Pod" | "pod" => {
                let (raw, end) = value(text, at)?;
                once(&mut pod, raw)?;
                at = end;
            }
            "Nodes" | "nodes" => {
                let (raw, end) = value(text, at)?;
                once(&mut nodes, (raw.get() != "null").then_some(raw))?;
                at = end;
            }
            "NodeNames" | "nodenames" | "nodeNames" => {
                let (list, end) = if b[at..].starts_with(b"null") {
                    (None, at + 4)
                } else {
                    let (list, end) = node_names(text, at)?;
                    (Some(list), end)
                };
                once(&mut names, list)?;
                at = end;
            }
            _ => at = value(text, at)?.1,
        }
        at = space(b, at);
        match b.get(at)? {
            b',' => at = space(b, at + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if space(b, at + 1) != b.len() {
        return None;
    }
    Some(ExtenderArgsRef {
        pod: pod?,
        nodes: nodes.flatten(),
        node_names: names.flatten(),
    })
}

/// Sets `slot` to `value` unless it was set already (serde refuses a duplicate field).
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// One JSON value starting at `at`, by serde, and where it ends.
fn value(text: &str, at: usize) -> Option<(&RawValue, usize)> {
    let rest = &text[at..];
    let mut de = serde_json::Deserializer::from_str(rest);
    let raw = <&RawValue>::deserialize(&mut de).ok()?;
    let end = at + (raw.get().as_ptr() as usize - rest.as_ptr() as usize) + raw.get().len();
    Some((raw, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What serde makes of `body`, in comparable form.
    type Parts = (String, Option<String>, Option<(String, Vec<String>)>);

    fn parts(args: &ExtenderArgsRef) -> Parts {
        (
            args.pod.get().to_owned(),
            args.nodes.map(|n| n.get().to_owned()),
            args.node_names.as_ref().map(|n| {
                let list = n.names.iter().map(|n| n.0.to_string()).collect();
                (n.raw.to_owned(), list)
            }),
        )
    }

    fn by_serde(body: &str) -> Option<Parts> {
        serde_json::from_str::<ExtenderArgsRef>(body)
            .ok()
            .map(|a| parts(&a))
    }

    /// The scan's answer, which must be serde's whenever the scan gives one.
    fn by_scan(body: &str) -> Option<Parts> {
        let ours = args(body.as_bytes()).map(|a| parts(&a));
        if let Some(ours) = &ours {
            assert_eq!(Some(ours), by_serde(body).as_ref(), "{body}");
        }
        ours
    }

    #[test]
    fn splits_what_the_scheduler_sends_as_serde_does() {
        for body in [
            r#"{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1","n2"]}"#,
            " {\n\t\"Pod\" : {} ,\r\n \"NodeNames\" : [ \"a\" , \"ü-b\" ] } \n",
            r#"{"pod":{},"nodenames":[]}"#,
            r#"{"Pod":{},"nodeNames":null,"Other":[1,{"x":"\""}]}"#,
            r#"{"Pod":null,"Nodes":{"items":[]}}"#,
            r#"{"Pod":{}}"#,
        ] {
            assert!(by_scan(body).is_some(), "{body}");
        }
        let (_, nodes, names) = by_scan(r#"{"Pod":{},"Nodes":null,"NodeNames":["a"]}"#).unwrap();
        assert_eq!((nodes, names.unwrap().1), (None, vec!["a".to_owned()]));
    }

    #[test]
    fn leaves_to_serde_what_it_is_not_sure_of() {
        for body in [
            r#"{"Pod":{},"NodeNames":["a\"b"]}"#,
            "{\"Pod\":{},\"NodeNames\":[\"a\u{1}\"]}",
            r#"{"P\u006fd":{},"NodeNames":["a"]}"#,
            r#"{"Pod":{},"Pod":{}}"#,
            r#"{"Pod":{},"NodeNames":[],"nodeNames":[]}"#,
            r#"{"NodeNames":["a"]}"#,
            r#"{"Pod":{},"NodeNames":["a",]}"#,
            r#"{"Pod":{},"NodeNames":["a"] "x"}"#,
            r#"{"Pod":{},}"#,
            r#"{"Pod":{}} x"#,
            "{\"Pod\":{}}\u{c}",
            r#"{"Pod":{},"NodeNames":[1]}"#,
            r#"{"Pod":{},"NodeNames":"a"}"#,
            r#"{"Pod":{},"NodeNames":nul}"#,
            r#"{"Pod":{"#,
            "",
        ] {
            assert_eq!(by_scan(body), None, "{body}");
        }
    }

    proptest! {
        /// A valid request with one byte changed, inserted or removed anywhere: whatever the
        /// scan accepts, serde accepts alike (`by_scan` checks).
        #[test]
        fn never_accepts_what_serde_would_not_or_differently(
            at in 0usize..120,
            byte in prop::sample::select(b" \t\n\x0c\",:[]{}\\nulx0".to_vec()),
            edit in 0u8..3,
        ) {
            let mut body =
                br#"{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1", "n-2"]}"#
                    .to_vec();
            let at = at % body.len();
            match edit {
                0 => body[at] = byte,
                1 => body.insert(at, byte),
                _ => { body.remove(at); }
            }
            if let Ok(text) = std::str::from_utf8(&body) {
                by_scan(text);
            }
        }
    }
}
