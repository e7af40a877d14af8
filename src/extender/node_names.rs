//! A filter or prioritize request's `NodeNames`: the names borrowed from the body and the array
//! as it came, split by a plain scan of its text (shared by [`super::split`], before serde
//! sees the body, and by serde's own decoding of the array, [`super::wire`]), and the small
//! JSON scanning steps both use.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::json_scan::special;

/// `NodeNames` as the handlers read it: the names, borrowed from the body, and the array as
/// it came, which a pod in no group gets back byte for byte.
///
/// Decision: an array of strings without escapes (node names are DNS subdomains: every real
/// request) is split by a plain scan of its text, in [`super::split`] before serde sees the body,
/// or in its `Deserialize` after serde has checked it to be JSON (when the split gave up on something else);
/// anything else goes through serde, with serde's error. At 5,000 names serde's per-string
/// machinery (escape scan, UTF-8 check, visitor) cost more than the whole scan.
#[derive(Debug)]
pub struct NodeNames<'a> {
    /// The array's JSON text.
    pub raw: &'a str,
    pub names: Vec<Name<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for NodeNames<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        if let Some((names, _)) = node_names(raw.get(), 0) {
            return Ok(names);
        }
        let names = serde_json::from_str(raw.get()).map_err(|e| {
            // The deserializer adds the position in the whole body.
            let at = format!(" at line {} column {}", e.line(), e.column());
            let why = e.to_string();
            serde::de::Error::custom(why.strip_suffix(&at).unwrap_or(&why))
        })?;
        Ok(NodeNames {
            raw: raw.get(),
            names,
        })
    }
}

/// A node name, borrowed from the body unless JSON escapes forced a copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Name<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl AsRef<str> for Name<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The array of plain strings starting at `at`, and where it ends (also for serde, which
/// splits a `NodeNames` array here when it decodes the body).
pub(super) fn node_names(text: &str, at: usize) -> Option<(NodeNames<'_>, usize)> {
    let b = text.as_bytes();
    expect(b, at, b'[')?;
    let mut names = Vec::with_capacity((b.len() - at) / 16);
    let mut i = space(b, at + 1);
    if b.get(i) != Some(&b']') {
        loop {
            let end = string(b, i)?;
            names.push(Name((&text[i + 1..end]).into()));
            i = space(b, end + 1);
            match b.get(i)? {
                b',' => i = space(b, i + 1),
                b']' => break,
                _ => return None,
            }
        }
    }
    let raw = &text[at..=i];
    Some((NodeNames { raw, names }, i + 1))
}

/// JSON's whitespace (not form feeds, which `u8::is_ascii_whitespace` allows).
pub(super) fn space(b: &[u8], mut at: usize) -> usize {
    while matches!(b.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        at += 1;
    }
    at
}

pub(super) fn expect(b: &[u8], at: usize, byte: u8) -> Option<()> {
    (b.get(at) == Some(&byte)).then_some(())
}

/// The index of the closing quote of the string starting at `at`, if it has no escape and no
/// control character.
pub(super) fn string(b: &[u8], at: usize) -> Option<usize> {
    expect(b, at, b'"')?;
    let end = at + 1 + special(&b[at + 1..])?;
    (b[end] == b'"').then_some(end)
}
