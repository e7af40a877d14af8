//! How fast `gangplank simulate` replays a trace: the Alibaba GPU trace through
//! `examples/simulate/alibaba-mapping.yaml`, run once on each configuration
//! (`examples/simulate/baseline.yaml` and `online-weight-3.yaml` unless named), printing per
//! run the events and admission passes, the wall and CPU seconds, events per second and the
//! peak resident memory, a digest of the outcome (equal digests: the same run), then each
//! queue's figures.
//!
//! Run: `cargo run --release --example simulate_speed [-- --limit 2000] [CONFIG...]`. The trace
//! is `--trace`, else `GANGPLANK_TRACE_DIR`, else `../shared/traces/alibaba-gpu-2023` beside
//! the repository. CPU seconds come from `/proc/self/stat` (in the kernel's 100 ticks a
//! second), peak memory from `VmHWM` in `/proc/self/status`, reset before each run through
//! `/proc/self/clear_refs` where the kernel allows it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use gangplank::simulate::{configuration, mapping, trace};
use gangplank_core::model::Node;
use gangplank_core::simulate::{Job, Outcome, Setup, Summary, run, summarise};

#[derive(Parser)]
struct Args {
    /// The trace's directory.
    #[arg(long, env = "GANGPLANK_TRACE_DIR")]
    trace: Option<PathBuf>,
    /// The mapping file.
    #[arg(long)]
    mapping: Option<PathBuf>,
    /// Only the first N rows by creation time (overrides the mapping's `limit`).
    #[arg(long)]
    limit: Option<usize>,
    /// Seconds of virtual time between samples of the queues.
    #[arg(long, default_value_t = 600)]
    sample_every: i64,
    /// The configurations to run.
    configs: Vec<PathBuf>,
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis start at the third, `state`; utime and
    // stime are the 14th and 15th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// `VmHWM` (peak resident memory) of this process, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = args
        .trace
        .unwrap_or_else(|| repo("../shared/traces/alibaba-gpu-2023"));
    let mapping_file = args
        .mapping
        .unwrap_or_else(|| repo("examples/simulate/alibaba-mapping.yaml"));
    let configs = if args.configs.is_empty() {
        vec![
            repo("examples/simulate/baseline.yaml"),
            repo("examples/simulate/online-weight-3.yaml"),
        ]
    } else {
        args.configs
    };
    let (nodes, jobs) = load(&dir, &mapping_file, args.limit)?;
    for config in &configs {
        let configuration = configuration::read(config)?;
        let serve = gangplank::config::ServeArgs::defaults().gang_settings();
        let setup = configuration.setup(&nodes, &jobs, serve, args.sample_every, None)?;
        let outcome = timed(&configuration.name, &setup, &jobs);
        print_summary(&summarise(&jobs, &outcome));
    }
    Ok(())
}

/// The trace in `dir` as nodes and jobs through the mapping file (its `limit` replaced by
/// `limit`), printing what was read.
fn load(
    dir: &Path,
    mapping_file: &Path,
    limit: Option<usize>,
) -> anyhow::Result<(Vec<Node>, Vec<Job>)> {
    let loading = Instant::now();
    let mut mapping = mapping::read(mapping_file)?;
    if let Some(limit) = limit {
        mapping.limit = limit;
    }
    let rows = trace::read(dir)?;
    let jobs = mapping::jobs(&rows.pods, &mapping)?;
    let nodes: Vec<_> = rows.nodes.iter().map(|n| mapping.node(n)).collect();
    let gangs = jobs.iter().filter(|j| j.gang).count();
    let members: usize = jobs.iter().map(|j| j.members.len()).sum();
    println!(
        "trace {}: {} nodes, {} rows as {} jobs ({gangs} gangs, {members} pods), read in {:.2} s",
        dir.display(),
        nodes.len(),
        rows.pods.len(),
        jobs.len(),
        loading.elapsed().as_secs_f64()
    );
    Ok((nodes, jobs))
}

/// Runs `setup` over `jobs` once, printing the configuration `name`'s events, passes, wall and
/// CPU seconds, peak memory and the outcome's digest.
fn timed(name: &str, setup: &Setup, jobs: &[Job]) -> Outcome {
    // Resets VmHWM to the current resident size (Linux 4.0 on), so the peak is this run's.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let cpu = cpu_seconds();
    let started = Instant::now();
    let outcome = run(setup, jobs);
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    println!(
        "\n{name}: {} events, {} passes, {wall:.2} s wall, {:.0} events/s, {cpu:.2} s CPU, \
         peak {:.0} MiB resident",
        outcome.events,
        outcome.passes,
        outcome.events as f64 / wall,
        peak_mib()
    );
    // What each job did, as one number: equal digests, equal runs (a change to the
    // engine's speed must keep it).
    let digest = mapping::fnv1a(
        format!(
            "{:?}{:?}{}{}",
            outcome.jobs, outcome.admission_order, outcome.passes, outcome.end
        )
        .as_bytes(),
    );
    println!("  outcome digest {digest:016x}");
    outcome
}

/// A run's makespan, utilisation, each queue's figures and its three longest waits.
fn print_summary(summary: &Summary) {
    println!(
        "  makespan {} s, {} finished, {} evictions, utilisation {}",
        summary.makespan,
        summary.finished,
        summary.evictions,
        summary
            .utilisation
            .iter()
            .map(|(r, u)| format!("{r} {:.1}%", u * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  {:<8} {:>6} {:>7} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}",
        "queue",
        "jobs",
        "started",
        "finished",
        "withdrawn",
        "never",
        "wait p50",
        "p90",
        "p99",
        "evict",
        "share"
    );
    let secs = |w: Option<i64>| w.map_or_else(|| "-".to_owned(), |w| w.to_string());
    for q in &summary.queues {
        println!(
            "  {:<8} {:>6} {:>7} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}",
            q.queue,
            q.jobs,
            q.started,
            q.finished,
            q.withdrawn,
            q.never_started,
            secs(q.wait_p50_seconds),
            secs(q.wait_p90_seconds),
            secs(q.wait_p99_seconds),
            q.evictions,
            q.share_held
                .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}"))
        );
    }
    for long in summary.longest.iter().take(3) {
        println!(
            "  waited {} s{}: {} ({})",
            long.wait_seconds,
            if long.started { "" } else { " (never started)" },
            long.job,
            long.why.as_deref().unwrap_or("-")
        );
    }
}
