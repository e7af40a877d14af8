//! Filter and prioritize while the admission loop works: the extender's latency for one gang
//! member over 5,000 candidate nodes, measured alone and then while another thread runs
//! admission passes over 10,000 waiting groups, each followed by reclaim's plan, on snapshots
//! of the same cache with the loop's pause between passes, as the admission loop does
//! (`gangplank::admission_loop`);
//! and, for comparison, while the passes run under the cache's read lock, as the loop did
//! before snapshots. The design's target (docs/DESIGN.md): filter and prioritize under 1 ms
//! at p99 while passes run.
//!
//! The cluster is deterministic (an LCG): 5,000 nodes of 32 CPU and 128 GiB, 100 queues of
//! weights 1 to 4, 3,000 running groups of 1 to 8 pods and 10,000 waiting ones, and one gang
//! of 8 whose member is filtered (it holds a claim after the first call, so every timed filter
//! refreshes it, the common case) and prioritized.
//!
//! Run: `cargo bench --bench concurrent` (`GP_BENCH_SAMPLES`, default 2,000 calls per case and
//! column, more until the other thread made 40 passes). It prints p50, p99 and p99.9 per case and column, the ratio of each busy column's
//! p99 to the quiet one's, and how long a pass plus plan took on the other thread.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gangplank::admission_loop::MIN_PASS_INTERVAL;
use gangplank::cache::{Cache, LedgerWriter};
use gangplank::clock::unix_now;
use gangplank::extender;
use gangplank_core::admit::groups::Unshown;
use gangplank_core::admit::{self, Evicting};
use gangplank_core::claims::Settings;
use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Queue, Resources, State};
use gangplank_core::policy::constraints::Constraints;
use gangplank_core::policy::placement::Strategy;

mod common;
use common::Lcg;

const NODES: usize = 5_000;
const QUEUES: usize = 100;
const RUNNING: usize = 3_000;
const WAITING: usize = 10_000;
const GIB: i64 = 1 << 30;
/// The fewest passes a column with passes lasts.
const MIN_PASSES: usize = 40;

const SETTINGS: Settings = Settings {
    strategy: Strategy::Binpack,
    max_hold: Duration::from_secs(3600),
    bind_unmarked: false,
    hold_scheduler_gangs: false,
    gated_admission: false,
};

fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

/// The cluster, built through the cache's write path, and the filtered member.
fn build() -> (Cache, Pod) {
    let (cache, mut mirror) = Cache::new();
    let mut rng = Lcg(17);
    for n in 0..NODES {
        mirror.apply_node(Node {
            name: node_name(n),
            allocatable: Resources::from([("cpu", 32_000), ("memory", 128 * GIB), ("pods", 110)]),
            ..Default::default()
        });
    }
    for i in 0..QUEUES {
        let mut q = Queue::new(format!("queue-{i:03}"));
        q.weight = 1 + rng.below(4) as u32;
        mirror.apply_queue(q);
    }
    let mut uid = 0usize;
    let mut group = |rng: &mut Lcg, g: usize, running: bool| {
        let queue = rng.below(QUEUES as u64);
        let namespace = format!("team-{:02}", rng.below(10));
        let size = 1 + rng.below(8) as u32;
        let key = GroupKey::new(namespace.clone(), format!("job-{g:05}"));
        mirror.apply_pod_group(PodGroup::new(
            key.clone(),
            size,
            format!("queue-{queue:03}"),
        ));
        let cpu = 1_000 * (1 + rng.below(4) as i64);
        for m in 0..size {
            uid += 1;
            mirror.apply_pod(Pod {
                created: 1_700_000_000 + rng.below(86_400) as i64,
                ..common::member(uid, &key, m, running.then(|| node_name(uid % NODES)), cpu)
            });
        }
    };
    for g in 0..RUNNING {
        group(&mut rng, g, true);
    }
    for g in 0..WAITING {
        group(&mut rng, RUNNING + g, false);
    }
    let probe = GroupKey::new("probe", "train");
    mirror.apply_pod_group(PodGroup::new(probe.clone(), 8, "queue-000"));
    let member = Pod {
        uid: "probe-0".into(),
        namespace: "probe".into(),
        name: "train-0".into(),
        pod_group: Some("train".into()),
        requests: Resources::from([("cpu", 4_000), ("memory", 16 * GIB), ("pods", 1)]),
        marked: true,
        ..Pod::default()
    };
    mirror.apply_pod(member.clone());
    (cache, member)
}

fn filter(ledger: &LedgerWriter, pod: &Pod, names: &[String]) -> usize {
    ledger
        .claim(
            pod,
            &Constraints::default(),
            names,
            &SETTINGS,
            std::time::Instant::now(),
        )
        .unwrap()
        .passed
        .len()
}

/// The prioritize decision as `extender::handlers::prioritize` makes it, under the read lock.
fn prioritize(cache: &Cache, pod: &Pod, names: &[String]) -> usize {
    cache.read(|s| extender::handlers::gang_scores(s, pod, names, SETTINGS.strategy).len())
}

/// How the other thread runs its passes.
#[derive(Clone, Copy, PartialEq)]
enum Passes {
    /// None: the baseline.
    None,
    /// On a snapshot, as the admission loop does.
    OnSnapshots,
    /// Under the cache's read lock, as the admission loop did before snapshots.
    UnderTheLock,
}

impl Passes {
    fn column(self) -> &'static str {
        match self {
            Passes::None => "quiet",
            Passes::OnSnapshots => "during passes on snapshots",
            Passes::UnderTheLock => "during passes under the lock",
        }
    }
}

/// One pass and reclaim's plan after it.
fn admission_pass(state: &State) -> usize {
    let now = unix_now();
    let passed = admit::pass(state, Unshown::none(), Evicting::none(), now);
    passed.reclaims.reclaims.len() + passed.decision.admit.len()
}

fn pass(cache: &Cache, passes: Passes) -> usize {
    match passes {
        Passes::None => 0,
        Passes::OnSnapshots => admission_pass(&cache.snapshot()),
        Passes::UnderTheLock => cache.read(admission_pass),
    }
}

fn samples() -> usize {
    std::env::var("GP_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000)
}

fn timed<T>(call: impl FnOnce() -> T) -> Duration {
    let started = Instant::now();
    black_box(call());
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (cache, member) = build();
    let ledger = cache.ledger();
    let names: Vec<String> = (0..NODES).map(node_name).collect();
    let n = samples();
    black_box(filter(&ledger, &member, &names));

    let mut rows = Vec::new();
    for passes in [Passes::None, Passes::OnSnapshots, Passes::UnderTheLock] {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let busy = Arc::new(AtomicUsize::new(0));
        let worker = (passes != Passes::None).then(|| {
            let (cache, stop, count, busy) =
                (cache.clone(), stop.clone(), count.clone(), busy.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    black_box(pass(&cache, passes));
                    busy.fetch_add(started.elapsed().as_micros() as usize, Ordering::Relaxed);
                    count.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(MIN_PASS_INTERVAL);
                }
            })
        });
        // Calls alternate; a busy column lasts at least `MIN_PASSES` passes.
        let (mut filters, mut scores) = (Vec::new(), Vec::new());
        while filters.len() < n
            || (passes != Passes::None && count.load(Ordering::Relaxed) < MIN_PASSES)
        {
            filters.push(timed(|| filter(&ledger, &member, &names)));
            scores.push(timed(|| prioritize(&cache, &member, &names)));
        }
        filters.sort();
        scores.sort();
        stop.store(true, Ordering::Relaxed);
        if let Some(worker) = worker {
            worker.join().unwrap();
            let count = count.load(Ordering::Relaxed).max(1);
            println!(
                "{}: {count} passes (and reclaim plans), mean {}",
                passes.column(),
                micros(Duration::from_micros(
                    (busy.load(Ordering::Relaxed) / count) as u64
                ))
            );
        }
        rows.push((passes, filters, scores));
    }
    println!("\n| case | column | p50 | p99 | p99.9 |\n|---|---|---|---|---|");
    for (passes, filters, scores) in &rows {
        for (case, t) in [("filter", filters), ("prioritize", scores)] {
            println!(
                "| {case} | {} | {} | {} | {} |",
                passes.column(),
                micros(percentile(t, 0.5)),
                micros(percentile(t, 0.99)),
                micros(percentile(t, 0.999))
            );
        }
    }
    let p99 = |passes: Passes, i: usize| {
        let (_, f, s) = rows.iter().find(|(p, ..)| *p == passes).unwrap();
        percentile(if i == 0 { f } else { s }, 0.99).as_secs_f64()
    };
    println!();
    for passes in [Passes::OnSnapshots, Passes::UnderTheLock] {
        println!(
            "p99 {} / quiet: filter {:.1}×, prioritize {:.1}×",
            passes.column(),
            p99(passes, 0) / p99(Passes::None, 0),
            p99(passes, 1) / p99(Passes::None, 1)
        );
    }
}
