//! `gangplank simulate`: reads the workload and each configuration, runs one simulation per
//! configuration, and writes the comparison as text, JSON or HTML.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use gangplank_core::claims;
use gangplank_core::model::Resources;
use gangplank_core::simulate::run;

use super::configuration::{self, Configuration};
use super::not_modelled::NotModelled;
use super::recording::{self, Fidelity, Live};
use super::report::{self, Report, Run};
use super::{Workload, mapping, record};
use crate::cache;

/// Flags of `gangplank simulate`.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// A trace's directory (the Alibaba GPU trace of 2023, in the Kubernetes Scheduler
    /// Simulator's CSV files) to replay instead of a recording.
    #[arg(long, value_name = "DIR", conflicts_with = "recording")]
    pub trace: Option<PathBuf>,
    /// How the trace's rows become queues, namespaces and gangs (default: docs/simulate.md's).
    #[arg(long, value_name = "FILE", requires = "trace")]
    pub mapping: Option<PathBuf>,
    /// A recording made by `gangplank record`: its queues are compared too, as `recorded`, and
    /// the replay's starts against the live ones.
    #[arg(long, value_name = "FILE")]
    pub recording: Option<PathBuf>,
    /// Replay only the jobs of this namespace (repeat for several); default: every namespace.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "NAMESPACE",
        requires = "recording"
    )]
    pub namespaces: Vec<String>,
    /// A configuration to compare: Queue manifests and a Simulation document (placement, node
    /// changes). Repeat to compare several.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Write there instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The scheduler's throughput: at most this many pods placed per second. Default: with a
    /// recording, its rate over the stretch that placed the most pods; otherwise no limit.
    #[arg(long, value_name = "PODS", value_parser = clap::value_parser!(u32).range(1..))]
    pub binds_per_second: Option<u32>,
    /// `gangplank serve --max-bind-hold-seconds` for the replay: how long a gang's claim and
    /// held binds last at most. Default: serve's (300).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub max_bind_hold_seconds: Option<u64>,
    /// How often each queue's share is sampled, in virtual seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(1..=86_400))]
    pub sample_every: i64,
}

/// Why `gangplank simulate` compares nothing: what to change in its flags or files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("name the work to replay: --recording FILE or --trace DIR")]
    NoWork,
    #[error("nothing to compare: name a configuration with --config")]
    NothingToCompare,
    #[error("cannot read recording {}: {error}", path.display())]
    ReadRecording {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is not a recording of gangplank record: {error}", path.display())]
    NotARecording {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// A recorded object that does not convert to the model.
    #[error(transparent)]
    Recorded(#[from] cache::Error),
    #[error(transparent)]
    Configuration(#[from] configuration::Error),
    #[error(transparent)]
    Mapping(#[from] mapping::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Html,
}

/// Runs `gangplank simulate`, its engine set as `gangplank serve`'s defaults (`serve`) but
/// where the flags say otherwise.
pub fn main(args: &SimulateArgs, serve: claims::Settings) -> anyhow::Result<()> {
    let inputs = inputs(args)?;
    if inputs.configurations.is_empty() {
        return Err(Error::NothingToCompare.into());
    }
    let mut settings = serve;
    if let Some(seconds) = args.max_bind_hold_seconds {
        settings.max_hold = Duration::from_secs(seconds);
    }
    let options = RunOptions {
        sample_every: args.sample_every,
        binds_per_second: inputs.binds_per_second,
        settings,
        serve,
    };
    let (report, fidelity) = compare(
        &inputs.workload,
        &inputs.configurations,
        inputs.live.as_deref(),
        options,
    )?;
    let mut out = match args.output {
        Format::Text => report::text(&report),
        Format::Json => serde_json::to_string_pretty(&Json {
            report: &report,
            fidelity: fidelity.as_ref(),
            not_modelled: &inputs.not_modelled,
        })?,
        Format::Html => super::html::html(&report),
    };
    if let (Format::Text, Some(f)) = (args.output, &fidelity) {
        out.push_str(&fidelity_text(f));
        out.push_str(&inputs.not_modelled.text());
    }
    match &args.out {
        Some(path) => std::fs::write(path, out)?,
        None => print!("{out}"),
    }
    Ok(())
}

/// `-o json`: the report, and with a recording how the replay followed it.
#[derive(serde::Serialize)]
struct Json<'a> {
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    fidelity: Option<&'a Fidelity>,
    /// With a recording: per kind, the pods replayed as if they had not asked it.
    #[serde(rename = "notModelled", skip_serializing_if = "NotModelled::is_empty")]
    not_modelled: &'a NotModelled,
}

/// The workload, the configurations, and with a recording the live starts and the scheduler's
/// throughput it shows.
struct Inputs {
    workload: Workload,
    configurations: Vec<Configuration>,
    live: Option<Vec<Live>>,
    binds_per_second: Option<u32>,
    not_modelled: NotModelled,
}

fn inputs(args: &SimulateArgs) -> Result<Inputs, Error> {
    let configs = args
        .configs
        .iter()
        .map(|path| configuration::read(path))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(dir) = &args.trace {
        return Ok(Inputs {
            workload: mapping::workload(dir, args.mapping.as_deref())?,
            configurations: configs,
            live: None,
            binds_per_second: args.binds_per_second,
            not_modelled: NotModelled::default(),
        });
    }
    let Some(path) = &args.recording else {
        return Err(Error::NoWork);
    };
    let bytes = std::fs::read(path).map_err(|error| Error::ReadRecording {
        path: path.clone(),
        error,
    })?;
    let recorded: record::Recording =
        serde_json::from_slice(&bytes).map_err(|error| Error::NotARecording {
            path: path.clone(),
            error,
        })?;
    let replay = recording::replay(
        &recorded,
        &format!("recording {}", path.display()),
        &args.namespaces,
    )?;
    let mut configurations = vec![Configuration::recorded(
        replay.queues,
        &path.display().to_string(),
    )];
    configurations.extend(configs);
    Ok(Inputs {
        workload: replay.workload,
        configurations,
        live: Some(replay.live),
        binds_per_second: args.binds_per_second.or(replay.binds_per_second),
        not_modelled: replay.not_modelled,
    })
}

/// What every run of one comparison shares.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub sample_every: i64,
    pub binds_per_second: Option<u32>,
    /// The engine's claim settings; each configuration's placement replaces `strategy`.
    pub settings: claims::Settings,
    /// `gangplank serve`'s defaults: where `settings` differ, each run's description says so.
    pub serve: claims::Settings,
}

/// Runs `workload` under each configuration; with `live` starts, how the first run followed them.
pub fn compare(
    workload: &Workload,
    configurations: &[Configuration],
    live: Option<&[Live]>,
    options: RunOptions,
) -> Result<(Report, Option<Fidelity>), Error> {
    let mut capacity = Resources::new();
    for node in &workload.nodes {
        capacity.add(&node.allocatable);
    }
    let resource = report::chart_resource(&capacity);
    let mut runs = Vec::new();
    let mut fidelity = None;
    for configuration in configurations.iter() {
        let setup = configuration.setup(
            &workload.nodes,
            &workload.jobs,
            options.settings,
            options.sample_every,
            options.binds_per_second,
        )?;
        let began = Instant::now();
        let outcome = run(&setup, &workload.jobs);
        let seconds = began.elapsed().as_secs_f64();
        if let (Some(live), None) = (live, &fidelity) {
            fidelity = Some(recording::fidelity(&workload.jobs, live, &outcome));
        }
        runs.push(Run::of(
            &configuration.name,
            &describe(configuration, &options),
            setup.nodes.len(),
            &workload.jobs,
            &outcome,
            resource,
            seconds,
        ));
    }
    Ok((
        Report {
            source: workload.source.clone(),
            jobs: workload.jobs.len(),
            nodes: workload.nodes.len(),
            resource: resource.to_owned(),
            configurations: runs,
        },
        fidelity,
    ))
}

fn describe(c: &Configuration, options: &RunOptions) -> String {
    let mut parts = vec![
        c.file.clone(),
        format!("{} queues", c.queues.len()),
        format!("placement {}", c.placement.as_str()),
    ];
    parts.extend(differences(&options.settings, &options.serve));
    if let Some(scale) = c.nodes.scale {
        parts.push(format!("nodes x{scale}"));
    }
    if !c.nodes.remove.is_empty() {
        parts.push(format!("{} nodes removed", c.nodes.remove.len()));
    }
    let added: usize = c.nodes.add.iter().map(|a| a.count).sum();
    if added > 0 {
        parts.push(format!("{added} nodes added"));
    }
    parts.join(", ")
}

/// Each setting of the engine that is not `gangplank serve`'s default, as `flag value (serve:
/// default)`; the placement is each configuration's own and named apart.
pub fn differences(engine: &claims::Settings, serve: &claims::Settings) -> Vec<String> {
    let mut out = Vec::new();
    if engine.max_hold != serve.max_hold {
        out.push(format!(
            "--max-bind-hold-seconds {} (gangplank serve: {})",
            engine.max_hold.as_secs(),
            serve.max_hold.as_secs()
        ));
    }
    let flags = [
        (
            "--bind-unmarked-pods",
            engine.bind_unmarked,
            serve.bind_unmarked,
        ),
        (
            "--hold-workload-api-gang-binds",
            engine.hold_scheduler_gangs,
            serve.hold_scheduler_gangs,
        ),
        ("--gate-pods", engine.gated_admission, serve.gated_admission),
    ];
    for (flag, engine, serve) in flags {
        if engine != serve {
            out.push(format!("{flag} {engine} (gangplank serve: {serve})"));
        }
    }
    out
}

/// How the `recorded` run followed the live one, for the text output.
pub fn fidelity_text(f: &Fidelity) -> String {
    let mut out = format!(
        "\nReplay of the recorded configuration against the live run: {} jobs started in both; \
         largest start difference {} s; {} out of tolerance (5 s or 10% of the live wait); {} \
         pairs started in another order; {} started on one side only.\n",
        f.compared,
        f.worst_seconds,
        f.off.len(),
        f.order_swaps.len(),
        f.one_sided.len()
    );
    for off in &f.off {
        out.push_str(&format!(
            "  {}: waited {} s live, {} s replayed (allowed {} s)\n",
            off.job, off.live_wait, off.replay_wait, off.allowed
        ));
    }
    for (a, b) in &f.order_swaps {
        out.push_str(&format!("  {a} and {b} started in the other order\n"));
    }
    for job in &f.one_sided {
        out.push_str(&format!("  {job} started on one side only\n"));
    }
    for (job, reasons) in &f.causes {
        out.push_str(&format!("  why {job} parted: {}\n", reasons.join("; ")));
    }
    out
}
