//! Kubernetes resource quantities (`100m`, `1Gi`, `2`, `1e3`, `500M`) as integers.
//!
//! The cache keeps every amount as an `i64`: CPU in millicores, everything else (memory and
//! storage bytes, pods, GPUs and other extended resources) in whole units. Like the API
//! machinery's `MilliValue()`/`Value()`, a fraction that does not fit the unit is rounded up
//! (towards positive infinity): `0.5m` CPU is 1 millicore, `1.5` GPUs are 2. Amounts beyond
//! `i64` saturate.
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
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(QuantityError::NoDigits(input.to_owned()));
    }

    // value = mantissa * 10^exp10 * 1024^exp1024. The mantissa keeps 20 significant digits,
    // more than an i64 has; later digits can only make the result round up.
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    let mut dropped_nonzero = false;
    for (i, c) in int_part.chars().chain(frac_part.chars()).enumerate() {
        let d = i128::from(c as u8 - b'0');
        let is_frac = i >= int_part.len();
        match mantissa.checked_mul(10).and_then(|m| m.checked_add(d)) {
            Some(m) if m < MANTISSA_LIMIT => {
                mantissa = m;
                if is_frac {
                    exp10 -= 1;
                }
            }
            _ => {
                // Too many digits: keep the magnitude, remember we lost precision.
                dropped_nonzero |= d != 0;
                if !is_frac {
                    exp10 += 1;
                }
            }
        }
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
    exp10 = exp10
        .saturating_add(suffix_exp10)
        .saturating_add(scale.exponent());

    let magnitude = scaled_ceil(mantissa, exp10, exp1024, dropped_nonzero);
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
    Ok(signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
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
    /// ceil(mantissa * 10^exp10 * 1024^exp1024), capped a little above `i64::MAX`.
    value: i128,
    /// Whether `value` is exact (no rounding happened).
    exact: bool,
}

/// Largest mantissa kept: 20 significant digits, so `mantissa * 1024^6` still fits an i128.
const MANTISSA_LIMIT: i128 = 10i128.pow(20);
/// Anything above this saturates to `i64::MAX` anyway.
const CAP: i128 = i64::MAX as i128 + 1;

fn scaled_ceil(mantissa: i128, exp10: i32, exp1024: u32, dropped_nonzero: bool) -> Magnitude {
    if mantissa == 0 {
        return Magnitude {
            value: i128::from(dropped_nonzero),
            exact: !dropped_nonzero,
        };
    }
    // mantissa < 10^20 and 1024^6 < 1.2 * 10^18: no overflow.
    let mut value = mantissa * 1024i128.pow(exp1024);
    if exp10 >= 0 {
        for _ in 0..exp10 {
            value *= 10;
            if value > CAP {
                // Saturated: rounding no longer means anything.
                return Magnitude {
                    value: CAP,
                    exact: true,
                };
            }
        }
        Magnitude {
            value: value.min(CAP),
            exact: !dropped_nonzero,
        }
    } else {
        let shift = exp10.unsigned_abs();
        if shift > 38 {
            // Smaller than one unit, but not zero.
            return Magnitude {
                value: 1,
                exact: false,
            };
        }
        let divisor = 10i128.pow(shift);
        let exact = value % divisor == 0 && !dropped_nonzero;
        let quotient = value / divisor;
        Magnitude {
            value: (if exact { quotient } else { quotient + 1 }).min(CAP),
            exact,
        }
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
        assert_eq!(units("-1e30"), i64::MIN);
        assert_eq!(milli("1e-40"), 1);
    }

    #[test]
    fn malformed_quantities_are_rejected_with_the_reason() {
        assert_eq!(
            parse("", Scale::Units),
            Err(QuantityError::Empty(String::new()))
        );
        assert_eq!(
            parse("Gi", Scale::Units),
            Err(QuantityError::NoDigits("Gi".into()))
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
