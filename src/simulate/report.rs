//! The runs of one workload under each configuration, side by side: the figures
//! ([`Report`], also the JSON of `-o json` and the data of the HTML page) and the text table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gangplank_core::model::Resources;
use gangplank_core::simulate::{Job, LongWait, Outcome, QueueSummary, Summary, summarise};
use serde::{Deserialize, Serialize};

/// Most points a time series keeps (the chart's width does not show more).
pub const MAX_POINTS: usize = 400;

/// A comparison of configurations on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Where the workload comes from.
    pub source: String,
    pub jobs: usize,
    pub nodes: usize,
    /// The resource the share charts are drawn in (GPUs when the cluster has any, else CPU).
    pub resource: String,
    pub configurations: Vec<Run>,
}

/// One configuration's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub name: String,
    /// What differs in it, in words (its file, strategy and node changes).
    pub description: String,
    pub nodes: usize,
    pub queues: Vec<QueueSummary>,
    pub makespan_seconds: i64,
    pub finished: usize,
    pub evictions: u32,
    /// Per resource the cluster offers: bound pods' requests against what nodes offer, 0..1.
    pub utilisation: BTreeMap<String, f64>,
    pub longest: Vec<LongWait>,
    pub series: Series,
    pub events: u64,
    pub passes: u64,
    /// Wall-clock seconds the run took.
    pub seconds: f64,
}

/// Values over time, at most [`MAX_POINTS`] of them, in [`Report::resource`]'s units.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Seconds of virtual time.
    pub t: Vec<i64>,
    /// Per queue: what it held and what it deserved.
    pub allocated: BTreeMap<String, Vec<f64>>,
    pub deserved: BTreeMap<String, Vec<f64>>,
    /// Per queue: groups waiting.
    pub waiting: BTreeMap<String, Vec<u32>>,
    /// Cluster-wide: bound pods' requests against what nodes offer, 0..1.
    pub utilisation: Vec<f64>,
}

/// The resource a report's charts use: GPUs if the cluster offers any, else CPU.
pub fn chart_resource(capacity: &Resources) -> &'static str {
    if capacity.get("nvidia.com/gpu") > 0 {
        "nvidia.com/gpu"
    } else {
        "cpu"
    }
}

impl Run {
    /// The figures of `outcome`, the run of `jobs`, for the report.
    pub fn of(
        name: &str,
        description: &str,
        nodes: usize,
        jobs: &[Job],
        outcome: &Outcome,
        resource: &str,
        seconds: f64,
    ) -> Run {
        let Summary {
            queues,
            makespan,
            utilisation,
            longest,
            evictions,
            finished,
        } = summarise(jobs, outcome);
        Run {
            name: name.to_owned(),
            description: description.to_owned(),
            nodes,
            queues,
            makespan_seconds: makespan,
            finished,
            evictions,
            utilisation,
            longest,
            series: series(outcome, resource),
            events: outcome.events,
            passes: outcome.passes,
            seconds,
        }
    }
}

/// `outcome`'s samples, thinned to at most [`MAX_POINTS`] evenly spaced ones.
fn series(outcome: &Outcome, resource: &str) -> Series {
    let samples = &outcome.samples;
    let step = samples.len().div_ceil(MAX_POINTS).max(1);
    let offered = outcome.capacity.get(resource).max(1) as f64;
    let unit = |amount: i64| in_units(resource, amount);
    let mut out = Series::default();
    for sample in samples.iter().step_by(step) {
        out.t.push(sample.at);
        out.utilisation
            .push(sample.used.get(resource) as f64 / offered);
        for q in &sample.queues {
            let n = out.t.len() - 1;
            let pad = |v: &mut Vec<f64>| v.resize(n, 0.0);
            let allocated = out.allocated.entry(q.queue.to_string()).or_default();
            pad(allocated);
            allocated.push(unit(q.allocated.get(resource)));
            let deserved = out.deserved.entry(q.queue.to_string()).or_default();
            pad(deserved);
            deserved.push(unit(q.deserved.get(resource)));
            let waiting = out.waiting.entry(q.queue.to_string()).or_default();
            waiting.resize(n, 0);
            waiting.push(u32::try_from(q.waiting).unwrap_or(u32::MAX));
        }
    }
    let n = out.t.len();
    for v in out.allocated.values_mut().chain(out.deserved.values_mut()) {
        v.resize(n, 0.0);
    }
    for v in out.waiting.values_mut() {
        v.resize(n, 0);
    }
    out
}

/// `amount` of `resource` in the units people count it in (CPUs, not millicores).
fn in_units(resource: &str, amount: i64) -> f64 {
    if resource == "cpu" {
        amount as f64 / 1_000.0
    } else {
        amount as f64
    }
}

/// "3d 4h", "2h 05m", "4m 10s", "12s".
pub fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, s % 86_400 / 3_600),
        s if s >= 3_600 => format!("{}h {:02}m", s / 3_600, s % 3_600 / 60),
        s if s >= 60 => format!("{}m {:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

fn or_dash(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), duration)
}

/// The report as text: a heading, then per queue a row per configuration, then the
/// cluster-wide figures and each configuration's longest waits.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Simulated {} jobs on {} nodes ({})\n",
        report.jobs, report.nodes, report.source
    );
    let mut rows = vec![vec![
        "QUEUE".to_owned(),
        "CONFIG".to_owned(),
        "JOBS".to_owned(),
        "FINISHED".to_owned(),
        "NEVER STARTED".to_owned(),
        "WAIT P50".to_owned(),
        "P90".to_owned(),
        "P99".to_owned(),
        "EVICTIONS".to_owned(),
        "SHARE HELD".to_owned(),
    ]];
    let queues: std::collections::BTreeSet<&str> = report
        .configurations
        .iter()
        .flat_map(|c| c.queues.iter().map(|q| q.queue.as_str()))
        .collect();
    for queue in queues {
        for run in &report.configurations {
            let Some(q) = run.queues.iter().find(|q| q.queue == queue) else {
                continue;
            };
            rows.push(vec![
                queue.to_owned(),
                run.name.clone(),
                q.jobs.to_string(),
                q.finished.to_string(),
                q.never_started.to_string(),
                or_dash(q.wait_p50_seconds),
                or_dash(q.wait_p90_seconds),
                or_dash(q.wait_p99_seconds),
                q.evictions.to_string(),
                q.share_held
                    .map_or_else(|| "-".to_owned(), |s| format!("{:.0}%", s * 100.0)),
            ]);
        }
    }
    table(&mut out, &rows);
    out.push('\n');
    let mut rows = vec![vec![
        "CONFIG".to_owned(),
        "NODES".to_owned(),
        "MAKESPAN".to_owned(),
        "FINISHED".to_owned(),
        "EVICTIONS".to_owned(),
        "UTILISATION".to_owned(),
        "EVENTS".to_owned(),
        "RUN TIME".to_owned(),
    ]];
    for run in &report.configurations {
        let utilisation: Vec<String> = run
            .utilisation
            .iter()
            .filter(|(name, _)| matches!(name.as_str(), "cpu" | "memory" | "nvidia.com/gpu"))
            .map(|(name, u)| format!("{} {:.0}%", short(name), u * 100.0))
            .collect();
        rows.push(vec![
            run.name.clone(),
            run.nodes.to_string(),
            duration(run.makespan_seconds),
            run.finished.to_string(),
            run.evictions.to_string(),
            utilisation.join(" "),
            run.events.to_string(),
            format!("{:.2}s", run.seconds),
        ]);
    }
    table(&mut out, &rows);
    for run in &report.configurations {
        let _ = writeln!(out, "\nLongest waits with {}:", run.name);
        for long in &run.longest {
            let _ = writeln!(
                out,
                "  {:<28} {:<12} {:>9}{}  {}",
                long.job,
                long.queue,
                duration(long.wait_seconds),
                if long.started { "" } else { "+" },
                long.why.as_deref().unwrap_or("")
            );
        }
    }
    out.push_str("\n(+: never started; waited until the end of the run)\n");
    out
}

fn short(resource: &str) -> &str {
    match resource {
        "nvidia.com/gpu" => "gpu",
        "memory" => "mem",
        other => other,
    }
}

fn table(out: &mut String, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
}
