//! The bench's own timing: each case called alone many times, and its percentiles printed.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// One benchmark case: each call runs one untimed reset (if any) and one timed call, and
/// returns the time of the call alone.
pub struct Case<'a> {
    pub name: String,
    pub call: Box<dyn FnMut() -> Duration + 'a>,
}

pub fn case<'a>(name: impl Into<String>, call: impl FnMut() -> Duration + 'a) -> Case<'a> {
    Case {
        name: name.into(),
        call: Box::new(call),
    }
}

pub fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let started = Instant::now();
    black_box(f());
    started.elapsed()
}

/// The criterion filter given on the command line (`cargo bench --bench extender -- FILTER`),
/// so the table shows the same cases criterion runs.
pub fn filter_arg() -> Option<String> {
    const WITH_VALUE: [&str; 16] = [
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--output-format",
        "--profile-time",
        "--color",
        "--format",
        "--plotting-backend",
    ];
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filter = Some(arg);
        }
    }
    filter
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Runs every selected case `samples` times, one call timed at a time, and prints p50/p99.
pub fn print_percentiles(cases: &mut [Case<'_>], samples: usize, filter: Option<&str>) {
    println!(
        "\nper-call latency, {samples} calls per case after {} warm-up calls, each timed alone with Instant",
        samples / 10
    );
    println!(
        "{:<52} {:>11} {:>11} {:>11} {:>11}",
        "case", "p50", "p99", "mean", "max"
    );
    for c in cases.iter_mut() {
        if filter.is_some_and(|f| !c.name.contains(f)) {
            continue;
        }
        for _ in 0..samples / 10 {
            (c.call)();
        }
        let mut times: Vec<Duration> = (0..samples).map(|_| (c.call)()).collect();
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "{:<52} {:>11} {:>11} {:>11} {:>11}",
            c.name,
            micros(percentile(&times, 50.0)),
            micros(percentile(&times, 99.0)),
            micros(mean),
            micros(*times.last().unwrap()),
        );
    }
    println!();
}
