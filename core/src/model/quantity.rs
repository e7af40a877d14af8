//! Kubernetes resource quantities (`100m`, `1Gi`, `2`, `1e3`, `500M`) as integers.
//!
//! The cache keeps every amount as an `i64`: CPU in millicores, everything else (memory and
//! storage bytes, pods, GPUs and other extended resources) in whole units. Like the API
//! machinery's `MilliValue()`/`Value()`, a fraction that does not fit the unit is rounded up
//! (towards positive infinity): `0.5m` CPU is 1 millicore, `1.5` GPUs are 2. Amounts beyond
//! `i64` saturate at `±i64::MAX`, as Kubernetes caps quantities. As in Kubernetes, a sign or
//! suffix without digits (`+`, `Gi`) is zero. `tests/quantity_fuzz.rs` checks all this against
//! Kubernetes' own parser for non-negative amounts; a negative one (which no request holds)
//! Kubernetes first rounds away from zero to whole nanos, so below a nano the two may differ.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `<sign><digits>[.<digits>]<suffix>` where suffix is a binary SI suffix (`Ki` … `Ei`), a
//! decimal SI suffix (`n`, `u`, `m`, ``, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent
//! (`e3`, `E-2`).

/// The unit an amount is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Thousandths of a unit (CPU).
    Milli,
    /// Whole units (bytes, pods, devices).
    Units,
}

impl Scale {
    /// The scale the cache uses for a resource name: milli for `cpu`, units for the rest.
    pub fn for_resource(resource: &str) -> Scale {
        if resource == "cpu" {
            Scale::Milli
        } else {
            Scale::Units
        }
    }

    fn exponent(self) -> i32 {
        match self {
            Scale::Milli => 3,
            Scale::Units => 0,
        }
    }
}

/// Why a quantity string is not a valid quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("failed to parse quantity {0:?}: it is empty")]
    Empty(String),
    #[error("failed to parse quantity {0:?}: expected a number")]
    NoDigits(String),
    #[error("failed to parse quantity {input:?}: unknown suffix {suffix:?}")]
    Suffix { input: String, suffix: String },
}

/// Parses a quantity and returns it in `scale`, rounded up.
pub fn parse(input: &str, scale: Scale) -> Result<i64, QuantityError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(QuantityError::Empty(input.to_owned()));
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };

    // The number: integer digits, optionally a point and fraction digits.
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac_part.contains('.') {
        return Err(QuantityError::NoDigits(input.to_owned()));
    }

    let (suffix_exp10, exp1024) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        _ => match parse_exponent(suffix) {
            Some(e) => (e, 0),
            None => {
                return Err(QuantityError::Suffix {
                    input: input.to_owned(),
                    suffix: suffix.to_owned(),
                });
            }
        },
    };
    // value = digits * 10^exp10 * 1024^exp1024, the digits read as one integer.
    let digits: smallvec::SmallVec<[u8; 32]> = (int_part.bytes().chain(frac_part.bytes()))
        .map(|b| b - b'0')
        .collect();
    let exp10 = i64::from(suffix_exp10) + i64::from(scale.exponent()) - frac_part.len() as i64;
    let magnitude = scaled_ceil(&digits, exp10, 1024i128.pow(exp1024));
    let signed = if negative {
        // Rounding up a negative amount moves towards zero: ceil(-x) = -floor(x).
        let floor = if magnitude.exact {
            magnitude.value
        } else {
            magnitude.value - 1
        };
        -floor
    } else {
        magnitude.value
    };
    Ok(signed.clamp(-i128::from(i64::MAX), i128::from(i64::MAX)) as i64)
}

/// `e3`, `E-2`, `e+6`: a decimal exponent suffix.
fn parse_exponent(suffix: &str) -> Option<i32> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Exponents beyond any i64 amount saturate; keep them in i32 range.
    let value: i64 = digits.parse().unwrap_or(i64::MAX).min(1_000);
    let value = value as i32;
    Some(if rest.starts_with('-') { -value } else { value })
}

struct Magnitude {
    /// The amount rounded up, capped a little above `i64::MAX`.
    value: i128,
    /// Whether `value` is exact (no rounding happened).
    exact: bool,
}

/// Anything above this saturates anyway.
const CAP: i128 = i64::MAX as i128 + 1;

/// `digits` (most significant first) as an integer, saturated at `CAP`.
fn integer(digits: &[u8]) -> i128 {
    digits
        .iter()
        .fold(0, |n: i128, d| (n * 10 + i128::from(*d)).min(CAP))
}

/// ceil(digits * 10^exp10 * factor), exactly, for any number of digits; `factor` is at most
/// 1024^6. A negative `exp10` splits the digits into a whole part and a fraction; the fraction
/// times `factor` is computed by long multiplication from its last digit, so no digit is lost.
fn scaled_ceil(digits: &[u8], exp10: i64, factor: i128) -> Magnitude {
    let saturated = Magnitude {
        value: CAP,
        exact: true,
    };
    if exp10 >= 0 {
        let mut value = integer(digits) * factor;
        for _ in 0..exp10 {
            if value == 0 || value >= CAP {
                break;
            }
            value *= 10;
        }
        return if value >= CAP {
            saturated
        } else {
            Magnitude { value, exact: true }
        };
    }
    let shift = usize::try_from(exp10.unsigned_abs()).unwrap_or(usize::MAX);
    let (whole, fraction) = digits.split_at(digits.len().saturating_sub(shift));
    // fraction * factor = carry + 0.(out digits), where the fraction is 0.(zeros)(fraction)
    // with `shift - fraction.len()` leading zeros.
    let mut carry: i128 = 0;
    let mut exact = true;
    for d in fraction.iter().rev() {
        let t = i128::from(*d) * factor + carry;
        exact &= t % 10 == 0;
        carry = t / 10;
    }
    for _ in fraction.len()..shift {
        if carry == 0 {
            break;
        }
        exact &= carry % 10 == 0;
        carry /= 10;
    }
    let value = integer(whole) * factor + carry;
    if value >= CAP {
        return saturated;
    }
    Magnitude {
        value: if exact { value } else { value + 1 },
        exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> i64 {
        parse(s, Scale::Milli).unwrap()
    }

    fn units(s: &str) -> i64 {
        parse(s, Scale::Units).unwrap()
    }

    #[test]
    fn cpu_quantities_become_millicores() {
        assert_eq!(milli("100m"), 100);
        assert_eq!(milli("2"), 2_000);
        assert_eq!(milli("0.5"), 500);
        assert_eq!(milli("1.25"), 1_250);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("1e3"), 1_000_000);
        assert_eq!(milli("1k"), 1_000_000);
        assert_eq!(milli("250000u"), 250);
    }

    #[test]
    fn fractions_of_a_millicore_round_up() {
        assert_eq!(milli("0.5m"), 1);
        assert_eq!(milli("1n"), 1);
        assert_eq!(milli("1001u"), 2);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("0m"), 0);
    }

    #[test]
    fn binary_suffixes_are_powers_of_1024() {
        assert_eq!(units("1Ki"), 1_024);
        assert_eq!(units("1Gi"), 1_073_741_824);
        assert_eq!(units("1.5Gi"), 1_610_612_736);
        assert_eq!(units("64Mi"), 67_108_864);
        assert_eq!(units("1Ei"), 1_152_921_504_606_846_976);
    }

    #[test]
    fn decimal_suffixes_are_powers_of_1000() {
        assert_eq!(units("500M"), 500_000_000);
        assert_eq!(units("1G"), 1_000_000_000);
        assert_eq!(units("129e6"), 129_000_000);
        assert_eq!(units("12E-1"), 2);
        assert_eq!(units("1e+3"), 1_000);
        assert_eq!(units("1E"), 1_000_000_000_000_000_000);
        assert_eq!(units("110"), 110);
    }

    #[test]
    fn fractional_units_round_up() {
        assert_eq!(units("1.5"), 2);
        assert_eq!(units("100m"), 1);
        assert_eq!(units("1000m"), 1);
    }

    #[test]
    fn signs_are_honoured_and_negative_amounts_round_towards_zero() {
        assert_eq!(units("+3"), 3);
        assert_eq!(units("-3"), -3);
        assert_eq!(units("-1.5"), -1);
        assert_eq!(milli("-100m"), -100);
    }

    #[test]
    fn amounts_beyond_i64_saturate() {
        assert_eq!(units("100Ei"), i64::MAX);
        assert_eq!(units("1e30"), i64::MAX);
        assert_eq!(units("99999999999999999999999999999999999999999"), i64::MAX);
        assert_eq!(units("-1e30"), -i64::MAX);
        assert_eq!(milli("1e-40"), 1);
    }

    #[test]
    fn a_sign_or_suffix_without_digits_is_zero_as_in_kubernetes() {
        assert_eq!(units("Gi"), 0);
        assert_eq!(milli("+"), 0);
    }

    #[test]
    fn malformed_quantities_are_rejected_with_the_reason() {
        assert_eq!(
            parse("", Scale::Units),
            Err(QuantityError::Empty(String::new()))
        );
        assert_eq!(
            parse("1.2.3", Scale::Units),
            Err(QuantityError::NoDigits("1.2.3".into()))
        );
        assert_eq!(
            parse("5GB", Scale::Units),
            Err(QuantityError::Suffix {
                input: "5GB".into(),
                suffix: "GB".into()
            })
        );
        assert_eq!(
            parse("1e", Scale::Units).unwrap_err().to_string(),
            "failed to parse quantity \"1e\": unknown suffix \"e\""
        );
    }
}
