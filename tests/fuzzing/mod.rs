//! Mutations of well-formed requests, for the decoder fuzz tests of `tests/extender_wire.rs`
//! and `tests/webhook_wire/main.rs`: each case is a golden request changed at random, at the JSON
//! level (a value replaced by one of another type or an extreme one, a key dropped, a value
//! nested deep) or at the byte level (bytes flipped, inserted or cut off). Deterministic for a
//! seed; `GANGPLANK_FUZZ_SEED` replays a run and `GANGPLANK_FUZZ_CASES` sets its budget
//! ([`budget`], which `tests/quantity_fuzz.rs` uses too).

use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*): the tests need reproducible noise, not
/// statistical quality.
pub struct Noise(u64);

impl Noise {
    pub fn new(seed: u64) -> Self {
        Noise(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The run's seed (printed) and number of cases.
pub fn budget(default_cases: usize) -> (u64, usize) {
    let seed = std::env::var("GANGPLANK_FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("GANGPLANK_FUZZ_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let cases = std::env::var("GANGPLANK_FUZZ_CASES")
        .ok()
        .map(|s| s.parse().expect("GANGPLANK_FUZZ_CASES is a number"))
        .unwrap_or(default_cases);
    println!("fuzz: seed {seed}, {cases} cases (GANGPLANK_FUZZ_SEED replays it)");
    (seed, cases)
}

/// A JSON value unlike what a field holds.
fn odd_value(noise: &mut Noise) -> Value {
    match noise.below(12) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(-1),
        3 => json!(i64::MAX),
        4 => json!(1e308),
        5 => json!(""),
        6 => json!("\u{0000}\u{ffff}é\"\\"),
        7 => json!("x".repeat(10_000)),
        8 => json!([]),
        9 => json!({}),
        10 => json!([null, 1, "a", {}]),
        _ => json!({"": null, "apiVersion": 7}),
    }
}

/// Every path (keys and indices) in `value`.
fn paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                prefix.push(k.clone());
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                prefix.push(i.to_string());
                paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, key| match v {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// One mutated request body made from `request`.
pub fn mutate(request: &Value, noise: &mut Noise) -> Vec<u8> {
    let mut doc = request.clone();
    let mut all = Vec::new();
    paths(&doc, &mut Vec::new(), &mut all);
    for _ in 0..=noise.below(3) {
        let path = &all[noise.below(all.len())];
        match noise.below(4) {
            0 | 1 => {
                if let Some(v) = at(&mut doc, path) {
                    *v = odd_value(noise);
                }
            }
            2 => {
                if let Some((key, parent)) = path.split_last()
                    && let Some(Value::Object(map)) = at(&mut doc, parent)
                {
                    map.remove(key);
                }
            }
            _ => {
                if let Some(v) = at(&mut doc, path) {
                    let mut deep = v.take();
                    for _ in 0..noise.below(200) {
                        deep = json!([deep]);
                    }
                    *v = deep;
                }
            }
        }
    }
    let mut bytes = serde_json::to_vec(&doc).unwrap();
    match noise.below(4) {
        0 => {
            for _ in 0..=noise.below(4) {
                let i = noise.below(bytes.len());
                bytes[i] = noise.next() as u8;
            }
        }
        1 => bytes.truncate(noise.below(bytes.len())),
        2 => {
            let i = noise.below(bytes.len());
            bytes.insert(i, b"{}[]\",:0\\"[noise.below(9)]);
        }
        _ => {}
    }
    bytes
}
