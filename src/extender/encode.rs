//! Hand-written JSON for the two answers that grow with the candidate list: the filter answer
//! ([`FilterAnswer`]) and the prioritize answer (a `HostPriorityList` of [`HostScore`]s).
//!
//! At 5,000 candidates serde's derived encoders spent most of a gang call writing: every
//! `{"Host","Score"}` went through the generic struct machinery, and a reason was escaped
//! once per node failing for it (a refused gang's long wait message, 5,000 times). Here the
//! output is sized before it is written, each distinct reason is escaped once and its bytes
//! copied for every node that shares it, and a pod in no group is scored in one pass over the
//! request's names with no allocation per host.
//!
//! Decision: a string with nothing to escape (no `"`, `\` or control character: every
//! Kubernetes node name) is copied as it is; any other string, and every integer, goes through
//! serde_json's own writers, so the bytes are exactly serde's for any input. The derived
//! `Serialize` of the wire types stays the reference: the tests below compare both encoders
//! byte for byte on names and reasons with quotes, backslashes, control characters and
//! non-ASCII text.

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use serde_json::value::RawValue;

use super::json_scan::needs_escape;
use super::wire::{FilterAnswer, HostScore};

/// `{"Host":`, `,"Score":`, `}`, the separator and two digits: what one score adds to its name.
const SCORE_OVERHEAD: usize = 23;

/// The prioritize answer for `scores`, in their order, as `[HostScore]` serialises.
pub fn host_scores<'s, I>(scores: I) -> Vec<u8>
where
    I: Iterator<Item = (&'s str, i64)> + Clone,
{
    let size = scores
        .clone()
        .map(|(host, _)| host.len() + SCORE_OVERHEAD)
        .sum::<usize>();
    let mut out = Vec::with_capacity(size + 2);
    out.push(b'[');
    for (i, (host, score)) in scores.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"Host\":");
        string(&mut out, host);
        out.extend_from_slice(b",\"Score\":");
        CompactFormatter
            .write_i64(&mut out, score)
            .expect("writing to a Vec cannot fail");
        out.push(b'}');
    }
    out.push(b']');
    out
}

/// [`host_scores`] of a list built by a decision.
pub fn host_score_list(scores: &[HostScore<'_>]) -> Vec<u8> {
    host_scores(scores.iter().map(|s| (s.host, s.score)))
}

/// The `NodeNames` of a filter answer: names to write, or a request's array to copy as it came.
#[derive(Debug, Clone, Copy)]
pub enum Names<'a, T> {
    List(&'a [T]),
    /// A JSON array's text, written as it is.
    Raw(&'a str),
}

impl<T: AsRef<str>> Serialize for Names<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Names::List(names) => s.collect_seq(names.iter().map(AsRef::as_ref)),
            Names::Raw(raw) => serde_json::from_str::<&RawValue>(raw)
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
        }
    }
}

/// The filter answer, as its derived `Serialize` writes it. Fails only if `Nodes` cannot be
/// serialised.
pub fn filter_answer<N, T, W>(
    answer: &FilterAnswer<'_, N, Names<'_, T>, W>,
) -> serde_json::Result<Vec<u8>>
where
    N: Serialize,
    T: AsRef<str>,
    W: Deref<Target = str>,
{
    let names: usize = match answer.node_names {
        Names::List(names) => names.iter().map(|n| n.as_ref().len() + 3).sum(),
        Names::Raw(raw) => raw.len(),
    };
    let mut out = Vec::with_capacity(
        128 + answer.error.len()
            + names
            + reasons_size(answer.failed_nodes)
            + reasons_size(answer.failed_and_unresolvable_nodes),
    );
    out.extend_from_slice(b"{\"Nodes\":");
    match &answer.nodes {
        Some(nodes) => serde_json::to_writer(&mut out, nodes)?,
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"NodeNames\":");
    match answer.node_names {
        Names::List(names) => {
            out.push(b'[');
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(&mut out, name.as_ref());
            }
            out.push(b']');
        }
        Names::Raw(raw) => out.extend_from_slice(raw.as_bytes()),
    }
    let mut escaped = Escaped::default();
    out.extend_from_slice(b",\"FailedNodes\":");
    reasons(&mut out, answer.failed_nodes, &mut escaped);
    out.extend_from_slice(b",\"FailedAndUnresolvableNodes\":");
    reasons(&mut out, answer.failed_and_unresolvable_nodes, &mut escaped);
    out.extend_from_slice(b",\"Error\":");
    string(&mut out, answer.error);
    out.push(b'}');
    Ok(out)
}

/// Bytes a reason map takes unescaped: quotes, colon and separator around each entry.
fn reasons_size<W: Deref<Target = str>>(map: &BTreeMap<&str, W>) -> usize {
    map.iter()
        .map(|(node, why)| node.len() + why.len() + 6)
        .sum()
}

fn reasons<W: Deref<Target = str>>(
    out: &mut Vec<u8>,
    map: &BTreeMap<&str, W>,
    escaped: &mut Escaped,
) {
    out.push(b'{');
    for (i, (node, why)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, node);
        out.push(b':');
        escaped.write(out, why);
    }
    out.push(b'}');
}

/// Reasons already escaped, by where their text lives. Nodes failing for one reason share
/// its text ([`gangplank_core::claims::FailReason`] is reference-counted), and the answer borrows every
/// reason while it is written, so an address and length name one text for the whole answer.
#[derive(Default)]
struct Escaped {
    last: Option<((usize, usize), usize)>,
    index: HashMap<(usize, usize), usize>,
    texts: Vec<Vec<u8>>,
}

impl Escaped {
    fn write(&mut self, out: &mut Vec<u8>, why: &str) {
        let key = (why.as_ptr() as usize, why.len());
        let at = match self.last {
            Some((last, at)) if last == key => at,
            _ => {
                let texts = &mut self.texts;
                let at = *self.index.entry(key).or_insert_with(|| {
                    let mut text = Vec::with_capacity(why.len() + 2);
                    string(&mut text, why);
                    texts.push(text);
                    texts.len() - 1
                });
                self.last = Some((key, at));
                at
            }
        };
        out.extend_from_slice(&self.texts[at]);
    }
}

/// `s` as a JSON string, escaped exactly as serde_json escapes it: it escapes `"`, `\\` and
/// the control characters below U+0020, nothing else.
fn string(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, s).expect("a string always serialises");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extender::wire::{MIN_EXTENDER_PRIORITY, NodeList};
    use gangplank_core::claims::FailReason;
    use serde_json::Value;

    /// Names no node should have but the encoders must still write right.
    const TRICKY: [&str; 9] = [
        "node-1.example.com",
        "",
        "quote\"d",
        "back\\slash",
        "tab\tnew\nline\u{1}\u{1f}\u{7f}",
        "ünïcödé-ノード",
        "emoji-🚀",
        "</script>&'",
        "\\\"\\u0000",
    ];

    fn same_as_serde<T: Serialize>(hand: &[u8], reference: &T) {
        let serde = serde_json::to_vec(reference).unwrap();
        assert_eq!(
            String::from_utf8_lossy(hand),
            String::from_utf8_lossy(&serde)
        );
        let parsed: Value = serde_json::from_slice(hand).unwrap();
        assert_eq!(parsed, serde_json::to_value(reference).unwrap());
    }

    #[test]
    fn host_scores_are_serdes_bytes_for_tricky_names() {
        let scores: Vec<HostScore> = TRICKY
            .iter()
            .zip([0, 10, 7, -3, i64::MAX, i64::MIN, 1, 99, 5])
            .map(|(&host, score)| HostScore { host, score })
            .collect();
        same_as_serde(&host_score_list(&scores), &scores);
        same_as_serde(&host_score_list(&[]), &Vec::<HostScore>::new());
        let neutral = host_scores(TRICKY.iter().map(|&h| (h, MIN_EXTENDER_PRIORITY)));
        let parsed: Value = serde_json::from_slice(&neutral).unwrap();
        assert_eq!(
            parsed[2],
            serde_json::json!({"Host": "quote\"d", "Score": 0})
        );
    }

    #[test]
    fn filter_answers_are_serdes_bytes_for_tricky_names_and_reasons() {
        let shared = FailReason::from("gang \"g\" waits:\n\tneeds 8 \\ 4 GPUs, ünïcödé");
        let other = FailReason::from("room is claimed by other gangs");
        let failed: BTreeMap<&str, FailReason> = TRICKY[..5]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                (
                    n,
                    if i % 2 == 0 {
                        shared.clone()
                    } else {
                        other.clone()
                    },
                )
            })
            .collect();
        // Equal text at another address: escaped again, written the same.
        let unresolvable: BTreeMap<&str, FailReason> = TRICKY[5..]
            .iter()
            .map(|&n| (n, FailReason::from(&*shared)))
            .collect();
        let passed: Vec<&str> = TRICKY.to_vec();
        let raw =
            RawValue::from_string(r#"{"items":[{"metadata":{"name":"a\"b"}}]}"#.into()).unwrap();
        let list: NodeList = serde_json::from_str(raw.get()).unwrap();

        let with_raw = FilterAnswer {
            nodes: Some(&*raw),
            node_names: Names::List(passed.as_slice()),
            failed_nodes: &failed,
            failed_and_unresolvable_nodes: &unresolvable,
            error: "",
        };
        same_as_serde(&filter_answer(&with_raw).unwrap(), &with_raw);

        let with_list = FilterAnswer {
            nodes: Some(&list),
            node_names: Names::List(&passed[..0]),
            failed_nodes: &failed,
            failed_and_unresolvable_nodes: &BTreeMap::new(),
            error: "why \"not\"\n",
        };
        same_as_serde(&filter_answer(&with_list).unwrap(), &with_list);

        let none: BTreeMap<&str, &str> = BTreeMap::new();
        let empty = FilterAnswer {
            nodes: None::<&RawValue>,
            node_names: Names::List(&passed[..0]),
            failed_nodes: &none,
            failed_and_unresolvable_nodes: &none,
            error: "",
        };
        same_as_serde(&filter_answer(&empty).unwrap(), &empty);

        let echoed = FilterAnswer {
            nodes: None::<&RawValue>,
            node_names: Names::<&str>::Raw(r#"["a","b\u0041"]"#),
            failed_nodes: &none,
            failed_and_unresolvable_nodes: &none,
            error: "",
        };
        same_as_serde(&filter_answer(&echoed).unwrap(), &echoed);
    }
}
