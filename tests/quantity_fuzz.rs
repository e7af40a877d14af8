//! Differential fuzzing of Gangplank's quantity parser (`gangplank_core::model::quantity`)
//! against Kubernetes' own (`resource.ParseQuantity` of k8s.io/apimachinery, the version of the
//! local control plane), built from Go modules by `scripts/fuzz` as the oracle
//! `e2e/oracles/quantity`.
//!
//! Each run sends a batch of generated strings (mostly of the quantity grammar, with noise) to
//! the oracle and checks, for every string Kubernetes accepts as a non-negative amount
//! (requests and PodGroups hold no other), that Gangplank accepts it too and reads the same
//! amount: Kubernetes' exact amount rounded up to whole thousandths (CPU) and to whole units
//! (everything else), saturated to `±i64::MAX` as Gangplank documents. Strings Kubernetes
//! refuses never reach Gangplank (the API server validates quantities), so Gangplank may read
//! them or refuse them; on no string may it panic. The seed is printed; `GANGPLANK_FUZZ_SEED` replays
//! one, `GANGPLANK_FUZZ_CASES` sets the budget.

use std::io::Write;
use std::process::{Command, Stdio};

use gangplank_core::model::quantity::{Scale, parse};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

// Only its budget (seed and cases) is used here; the request mutations serve the wire tests.
#[allow(dead_code)]
mod fuzzing;

/// A quantity-like string: sign, digits, a point and digits, a suffix or an exponent, and at
/// times a character that has no place in a quantity.
fn quantity_like() -> impl Strategy<Value = String> {
    let sign = proptest::sample::select(vec!["", "", "", "+", "-"]);
    let digits = "[0-9]{0,22}";
    let fraction = proptest::option::of("\\.[0-9]{0,22}");
    let suffix = proptest::sample::select(vec![
        "", "", "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi",
        "Ei", "e3", "E3", "e-3", "E+2", "e0", "e18", "e-9", "K", "mi", "i", "e", "E-", "b",
    ]);
    let noise = proptest::option::weighted(0.05, "[ .+\\-eEa-zA-Z0-9\u{00e9}\u{0660}]{1,3}");
    (sign, digits, fraction, suffix, noise).prop_map(|(sign, digits, fraction, suffix, noise)| {
        let mut s = format!("{sign}{digits}{}{suffix}", fraction.unwrap_or_default());
        if let Some(noise) = noise {
            let at = s.char_indices().count() / 2;
            let at = s.char_indices().nth(at).map_or(s.len(), |(i, _)| i);
            s.insert_str(at, &noise);
        }
        s
    })
}

/// Whether `s` has a decimal exponent of more than three digits. Kubernetes' parser takes
/// time that grows with the exponent's value (`1e-99999999` does not finish), so those are
/// left out; Gangplank caps exponents at 1,000.
fn long_exponent(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        let rest = &bytes[i + 1..];
        let rest = rest
            .strip_prefix(b"+")
            .or(rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        matches!(b, b'e' | b'E') && rest.iter().take_while(|d| d.is_ascii_digit()).count() > 3
    })
}

/// What the oracle says of one string.
#[derive(Debug, PartialEq)]
enum Kubernetes {
    Refused,
    /// The amount rounded up to thousandths and to units, saturated to `±i64::MAX`.
    Read {
        milli: i64,
        value: i64,
    },
}

/// A decimal integer of any size, saturated to `±i64::MAX`.
fn saturated(decimal: &str) -> i64 {
    match decimal.parse::<i128>() {
        Ok(n) => n.clamp(-i128::from(i64::MAX), i64::MAX.into()) as i64,
        Err(_) if decimal.starts_with('-') => -i64::MAX,
        Err(_) => i64::MAX,
    }
}

fn oracle(inputs: &[String]) -> Vec<Kubernetes> {
    let path = std::env::var("GANGPLANK_QUANTITY_ORACLE")
        .expect("GANGPLANK_QUANTITY_ORACLE names the oracle binary: run scripts/fuzz");
    let mut child = Command::new(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to run the oracle {path}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let text: String = inputs.iter().map(|s| format!("{s}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "the oracle failed");
    let answers: Vec<Kubernetes> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
            ["err"] => Kubernetes::Refused,
            ["ok", milli, value] => Kubernetes::Read {
                milli: saturated(milli),
                value: saturated(value),
            },
            _ => panic!("the oracle said {line:?}"),
        })
        .collect();
    assert_eq!(answers.len(), inputs.len(), "one answer per string");
    answers
}

#[test]
#[ignore = "needs the Go oracle: run scripts/fuzz (test.sh does)"]
fn gangplank_reads_every_quantity_kubernetes_accepts_as_kubernetes_does() {
    let (seed, cases) = fuzzing::budget(100_000);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = quantity_like();
    let inputs: Vec<String> = (0..cases)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .filter(|s| !long_exponent(s))
        .collect();

    let answers = oracle(&inputs);
    let mut wrong = Vec::new();
    let mut accepted = 0;
    for (input, answer) in inputs.iter().zip(&answers) {
        let ours = (parse(input, Scale::Milli), parse(input, Scale::Units));
        let Kubernetes::Read { milli, value } = answer else {
            continue;
        };
        accepted += 1;
        // Kubernetes first rounds a negative amount away from zero to whole nanos, then this
        // ceiling; Gangplank takes the ceiling only. No request or PodGroup may hold a negative
        // amount, so only those are left out.
        if input.trim_start().starts_with('-') {
            continue;
        }
        let agrees = matches!(&ours, (Ok(m), Ok(v)) if m == milli && v == value);
        if !agrees {
            wrong.push(format!(
                "{input:?}: Kubernetes reads {milli}m and {value}, Gangplank {ours:?}"
            ));
        }
    }
    println!(
        "quantity fuzz: Kubernetes accepted {accepted} of {} strings",
        inputs.len()
    );
    assert!(
        accepted > inputs.len() / 4,
        "too few valid strings to test much"
    );
    assert!(
        wrong.is_empty(),
        "seed {seed}: {} of {accepted} disagree, such as:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}
