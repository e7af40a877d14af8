//! Byte scans of JSON strings, eight bytes at a time: a request over thousands of nodes has
//! each name split out of the body (`super::split`) and checked before it is
//! written into the answer ([`super::encode`]), and a byte at a time that cost more than
//! everything else the call did per node.
//!
//! The word tricks are the classic ones: `w - 0x0101…01 * n` borrows into the high bit of a
//! byte below `n` that had it clear, and a byte equal to `c` is a zero byte of `w ^ c…c`. Borrows
//! may flag bytes above a match, never below it, so the lowest flagged byte is exact.

const ONES: u64 = u64::from_le_bytes([0x01; 8]);
const HIGH: u64 = u64::from_le_bytes([0x80; 8]);

/// Flags (high bit) the bytes of `w` below `n` (`n <= 0x80`); exact for the lowest.
#[inline]
fn below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

/// Flags the bytes of `w` equal to `c`; exact for the lowest.
#[inline]
fn equal(w: u64, c: u8) -> u64 {
    below(w ^ (ONES * u64::from(c)), 1)
}

/// Where the first byte of `s` is that `flag` flags in a word and `is` says of a byte.
#[inline]
fn first(s: &[u8], flag: impl Fn(u64) -> u64, is: impl Fn(u8) -> bool) -> Option<usize> {
    let word = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    if s.len() < 8 {
        return s.iter().position(|&b| is(b));
    }
    let mut at = 0;
    while at + 8 < s.len() {
        let found = flag(word(at));
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    // The last word overlaps bytes already known not to match.
    let last = s.len() - 8;
    let found = flag(word(last));
    (found != 0).then(|| last + found.trailing_zeros() as usize / 8)
}

/// Where the first byte of `s` is that JSON must escape: `"`, `\` or a control character below
/// U+0020. In a JSON string's text, the end of a string that has no escape is such a byte and a
/// `"`.
pub fn special(s: &[u8]) -> Option<usize> {
    first(
        s,
        |w| below(w, 0x20) | equal(w, b'"') | equal(w, b'\\'),
        |b| b < 0x20 || b == b'"' || b == b'\\',
    )
}

/// Whether `s` has a byte JSON must escape.
pub fn needs_escape(s: &[u8]) -> bool {
    special(s).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_agree_with_a_byte_by_byte_check_for_every_byte_anywhere() {
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    // A second match later must not hide the first.
                    let mut s = vec![b'x'; len];
                    s[at] = b;
                    if at + 2 < len {
                        s[at + 2] = b'"';
                    }
                    let escape = s.iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\');
                    assert_eq!(special(&s), escape, "byte {b:#x} at {at} of {len}");
                    assert_eq!(needs_escape(&s), escape.is_some());
                    s.iter_mut().skip(at + 1).for_each(|b| *b = b'x');
                    let escape = b < 0x20 || b == b'"' || b == b'\\';
                    assert_eq!(needs_escape(&s), escape, "byte {b:#x} at {at} of {len}");
                }
            }
        }
        assert_eq!(special(b""), None);
        assert!(!needs_escape(b""));
    }
}
