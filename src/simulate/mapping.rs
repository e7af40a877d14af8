//! The mapping file: how a trace's rows become the simulation's [`Job`]s. The trace has no
//! queues, namespaces or gangs, so whoever replays it says which queue each row goes to, which
//! rows form a gang, how GPU-sharing rows count, and how fast to replay:
//!
//! ```yaml
//! queues:
//!   by: qos            # qos | gpus | hash
//!   qos: {LS: online, BE: batch, Burstable: batch, Guaranteed: online}
//!   gpus: [{max: 0, queue: cpu}, {max: 1, queue: small}, {max: 8, queue: large}]
//!   teams: 4
//! namespace: queue     # each job's namespace: its queue's name (default), or this name
//! gangs:               # optional; absent: every row is a lone pod
//!   window: 60         # rows created within 60 s of the gang's first row,
//!   same_shape: true   # with the same cpu, memory, GPU requests, gpu_spec and qos (default true),
//!   max_size: 8        # at most 8 of them; a gang of one is a lone pod
//! gpu_sharing: whole   # whole (default) | milli
//! priority: {LS: 100, BE: 0}   # by qos; default 0
//! speed: 1             # every time divided by this (10: the same work in a tenth of the time)
//! limit: 0             # only the first N rows by creation time; 0: all
//! ```
//!
//! - `queues.by: qos`: the queue `queues.qos` names for the row's qos; every qos the rows hold
//!   must be named. `gpus`: the first entry of `queues.gpus` whose `max` is at least the row's
//!   `num_gpu`. `hash`: `team-0` to `team-<teams-1>` by the FNV-1a hash of the row's name
//!   (stable across runs and machines). Sections the chosen `by` does not read are still
//!   checked.
//! - A gang is made greedily in creation order: each row joins the earliest open gang it fits
//!   (within `window` seconds of the gang's first row, in the trace's seconds before `speed`;
//!   the same shape if asked; not full), else opens one. Its members are the rows' requests
//!   and its `minMember` all of them; its name is `gang-<first row>`, its queue, namespace and
//!   priority its first row's, its arrival its first row's creation, its runtime its longest
//!   member's; it is deleted (at the last member's deletion) only if no member was ever
//!   scheduled.
//! - A row's runtime is `deletion_time - scheduled_time` (at least 1 s). A row never scheduled
//!   was deleted while it waited (or still waited at the trace's end): it is deleted at its
//!   `deletion_time` wherever it then is, and runs `deletion_time - creation_time` if it starts
//!   before.
//! - A row's `gpu_spec` (GPU models, `|` separated, like `V100M16|V100M32`) keeps its pod to
//!   nodes whose `gpu-model` label (the node list's `model`) is one of them, as a required node
//!   affinity the simulated scheduler checks; an empty one allows any node. Under `same_shape`
//!   rows of different `gpu_spec` do not share a gang.
//! - `gpu_sharing: whole`: a row asks for `num_gpu` whole `nvidia.com/gpu`, however small its
//!   `gpu_milli` (Kubernetes without a GPU-sharing plugin). `milli`: it asks for
//!   `num_gpu × gpu_milli` of [`GPU_MILLI_RESOURCE`], and each node offers `gpu × 1000` of it
//!   instead of `nvidia.com/gpu`. The milli model counts thousandths per node, not per device:
//!   a share may straddle two GPUs (three 400-milli rows fit a node of two GPUs, where a device
//!   plugin would fit two), so it shows the most sharing could give. Queues' capabilities and
//!   guarantees then name the milli resource.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gangplank_core::model::{Node, Resources};
use gangplank_core::policy::Constraints;
use gangplank_core::policy::constraints::{LabelOperator, LabelRequirement, NodeSelectorTerm};
use gangplank_core::simulate::{Job, millis_of};
use serde::Deserialize;

use super::Workload;
use super::trace::{self, GPU_MODEL_LABEL, MAX_GPUS, NodeRow, PodRow};
use crate::api::labels::name_problem;

/// The resource of GPU thousandths under `gpu_sharing: milli`.
pub const GPU_MILLI_RESOURCE: &str = "gangplank.dev/gpu-milli";

/// The mapping used when none is given: queues by qos (`LS` and `Guaranteed` to `online`, `BE`
/// and `Burstable` to `batch`), each job in its queue's namespace, no gangs, whole GPUs, every
/// priority 0, the trace's own pace.
pub const DEFAULT: &str = "\
queues:
  by: qos
  qos: {LS: online, Guaranteed: online, BE: batch, Burstable: batch}
";

/// Longest gang window, in seconds (a day).
pub const MAX_WINDOW: i64 = 86_400;
/// Most members of a gang.
pub const MAX_GANG: usize = 1_000;
/// Most teams of `by: hash`.
pub const MAX_TEAMS: u32 = 1_000;
/// The bounds of `speed`: at most 1,000 times slower, at most a million times faster.
pub const SPEEDS: std::ops::RangeInclusive<f64> = 0.001..=1_000_000.0;

/// Why a mapping, or a trace through it, is refused: where, and what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file at the path does not read.
    #[error("cannot read mapping {path}: {1}", path = .0.display())]
    Read(PathBuf, std::io::Error),
    /// Not YAML, or not of the mapping's fields and types; serde_yaml's words start with the
    /// field's path (`queues.gpus[1].max: ...`).
    #[error("{file}: {error}")]
    Yaml {
        file: String,
        error: serde_yaml::Error,
    },
    #[error("{file}: {problem}")]
    Field { file: String, problem: FieldProblem },
    #[error(
        "queues.qos: no queue for qos {qos:?} (row {row}); name a queue for every qos the trace \
         holds"
    )]
    NoQueueForQos { qos: String, row: String },
    #[error("queues.gpus: no entry's max reaches num_gpu {num_gpu} (row {row})")]
    NoQueueForGpus { num_gpu: i64, row: String },
    #[error(transparent)]
    Trace(#[from] trace::Error),
}

/// A field whose value serde's types let through but the mapping refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldProblem {
    #[error("queues.qos: by: qos needs the queue of each qos")]
    NoQosQueues,
    #[error("queues.gpus: by: gpus needs at least one {{max, queue}}")]
    NoGpuEntries,
    #[error("queues.teams: by: hash needs the number of teams")]
    NoTeams,
    /// `why`: what keeps the name from being a DNS label.
    #[error("queues.qos.{qos}: {why}")]
    QosQueue { qos: String, why: String },
    #[error("queues.gpus[{index}].max: {max} is not within 0..={MAX_GPUS}")]
    GpusMax { index: usize, max: i64 },
    #[error(
        "queues.gpus[{index}].max: {max} is not above the entry before it ({below}); list them \
         smallest first"
    )]
    GpusOrder { index: usize, max: i64, below: i64 },
    #[error("queues.gpus[{index}].queue: {why}")]
    GpusQueue { index: usize, why: String },
    #[error("queues.teams: {0} is not within 1..={MAX_TEAMS}")]
    Teams(u32),
    #[error("namespace: {why}")]
    Namespace { why: String },
    #[error("gangs.window: {0} is not within 0..={MAX_WINDOW} seconds")]
    Window(i64),
    #[error("gangs.max_size: {0} is not within 1..={MAX_GANG}")]
    MaxSize(usize),
    #[error("speed: {speed} is not within {}..={}", SPEEDS.start(), SPEEDS.end())]
    Speed { speed: f64 },
}

/// A mapping as read from its file; see the module docs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    pub queues: Queues,
    /// `queue`: each job's queue's name; any other value: that namespace for every job.
    #[serde(default = "queue_namespace")]
    pub namespace: String,
    pub gangs: Option<Gangs>,
    #[serde(default)]
    pub gpu_sharing: GpuSharing,
    /// By qos; a qos not named: 0.
    #[serde(default)]
    pub priority: BTreeMap<String, i32>,
    #[serde(default = "one")]
    pub speed: f64,
    #[serde(default)]
    pub limit: usize,
}

/// Which queue each row goes to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Queues {
    pub by: By,
    /// For `by: qos`: the queue of each qos.
    #[serde(default)]
    pub qos: BTreeMap<String, String>,
    /// For `by: gpus`: the first entry whose `max` is at least the row's `num_gpu`.
    #[serde(default)]
    pub gpus: Vec<GpuBand>,
    /// For `by: hash`: how many `team-N` queues.
    pub teams: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Qos,
    Gpus,
    Hash,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuBand {
    pub max: i64,
    pub queue: String,
}

/// Which rows form gangs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gangs {
    /// Seconds after the gang's first row's creation within which later rows may join it.
    pub window: i64,
    /// Only rows of the first row's cpu, memory, `num_gpu`, `gpu_milli` and qos join it.
    #[serde(default = "yes")]
    pub same_shape: bool,
    pub max_size: usize,
}

/// How a row's GPU share counts; see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuSharing {
    #[default]
    Whole,
    Milli,
}

fn queue_namespace() -> String {
    "queue".to_owned()
}

fn one() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

impl Default for Mapping {
    /// [`DEFAULT`].
    fn default() -> Self {
        parse(DEFAULT, "the default mapping").expect("the default mapping reads")
    }
}

/// Reads the mapping in `path`; the error names the field.
pub fn read(path: &Path) -> Result<Mapping, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read(path.to_owned(), e))?;
    parse(&text, &path.display().to_string())
}

/// Reads a mapping from `text`, the contents of `file`; the error names the field.
pub fn parse(text: &str, file: &str) -> Result<Mapping, Error> {
    let mapping: Mapping = serde_yaml::from_str(text).map_err(|error| Error::Yaml {
        file: file.to_owned(),
        error,
    })?;
    mapping.check().map_err(|problem| Error::Field {
        file: file.to_owned(),
        problem,
    })?;
    Ok(mapping)
}

/// Why `name` cannot name a queue, or a namespace: a DNS label.
fn label_problem(name: &str) -> Option<String> {
    name_problem(name).or_else(|| {
        name.contains('.')
            .then(|| format!("{name:?} holds a '.', which a namespace cannot"))
    })
}

impl Mapping {
    /// Refuses what serde's types let through, naming the field.
    fn check(&self) -> Result<(), FieldProblem> {
        let q = &self.queues;
        match q.by {
            By::Qos if q.qos.is_empty() => return Err(FieldProblem::NoQosQueues),
            By::Gpus if q.gpus.is_empty() => return Err(FieldProblem::NoGpuEntries),
            By::Hash if q.teams.is_none() => return Err(FieldProblem::NoTeams),
            _ => {}
        }
        for (qos, queue) in &q.qos {
            if let Some(why) = label_problem(queue) {
                let qos = qos.clone();
                return Err(FieldProblem::QosQueue { qos, why });
            }
        }
        let mut below = -1;
        for (index, band) in q.gpus.iter().enumerate() {
            let max = band.max;
            if !(0..=MAX_GPUS).contains(&max) {
                return Err(FieldProblem::GpusMax { index, max });
            }
            if max <= below {
                return Err(FieldProblem::GpusOrder { index, max, below });
            }
            below = max;
            if let Some(why) = label_problem(&band.queue) {
                return Err(FieldProblem::GpusQueue { index, why });
            }
        }
        if let Some(teams) = q.teams
            && !(1..=MAX_TEAMS).contains(&teams)
        {
            return Err(FieldProblem::Teams(teams));
        }
        if self.namespace != "queue"
            && let Some(why) = label_problem(&self.namespace)
        {
            return Err(FieldProblem::Namespace { why });
        }
        if let Some(gangs) = &self.gangs {
            if !(0..=MAX_WINDOW).contains(&gangs.window) {
                return Err(FieldProblem::Window(gangs.window));
            }
            if !(1..=MAX_GANG).contains(&gangs.max_size) {
                return Err(FieldProblem::MaxSize(gangs.max_size));
            }
        }
        if !SPEEDS.contains(&self.speed) {
            return Err(FieldProblem::Speed { speed: self.speed });
        }
        Ok(())
    }

    /// Every queue the mapping can send rows to, sorted: what configurations define.
    pub fn queue_names(&self) -> Vec<String> {
        let q = &self.queues;
        let mut names: Vec<String> = match q.by {
            By::Qos => q.qos.values().cloned().collect(),
            By::Gpus => q.gpus.iter().map(|b| b.queue.clone()).collect(),
            By::Hash => (0..q.teams.unwrap_or(1)).map(team).collect(),
        };
        names.sort();
        names.dedup();
        names
    }

    /// The queue of `row`.
    fn queue_of(&self, row: &PodRow) -> Result<String, Error> {
        let q = &self.queues;
        match q.by {
            By::Qos => q
                .qos
                .get(&row.qos)
                .cloned()
                .ok_or_else(|| Error::NoQueueForQos {
                    qos: row.qos.clone(),
                    row: row.name.clone(),
                }),
            By::Gpus => q
                .gpus
                .iter()
                .find(|b| b.max >= row.num_gpu)
                .map(|b| b.queue.clone())
                .ok_or_else(|| Error::NoQueueForGpus {
                    num_gpu: row.num_gpu,
                    row: row.name.clone(),
                }),
            By::Hash => {
                let teams = u64::from(q.teams.unwrap_or(1).max(1));
                Ok(team((fnv1a(row.name.as_bytes()) % teams) as u32))
            }
        }
    }

    /// A time of the trace at the mapping's speed, in whole seconds.
    fn time(&self, seconds: i64) -> i64 {
        (seconds as f64 / self.speed).round() as i64
    }

    /// What `row` asks for, one pod's requests.
    fn requests(&self, row: &PodRow) -> Resources {
        let mut r = Resources::new();
        r.set("cpu", row.cpu_milli);
        r.set("memory", row.memory_mib << 20);
        r.set("pods", 1);
        match self.gpu_sharing {
            GpuSharing::Whole => r.set("nvidia.com/gpu", row.num_gpu),
            GpuSharing::Milli => r.set(GPU_MILLI_RESOURCE, row.num_gpu * row.gpu_milli),
        }
        r
    }

    /// The model's node of `row`, with its GPUs as the mapping counts them.
    pub fn node(&self, row: &NodeRow) -> Node {
        let mut node = trace::node(row);
        if self.gpu_sharing == GpuSharing::Milli {
            node.allocatable.set("nvidia.com/gpu", 0);
            node.allocatable
                .set(GPU_MILLI_RESOURCE, row.gpu * trace::GPU_MILLI);
        }
        node
    }
}

fn team(i: u32) -> String {
    format!("team-{i}")
}

/// The 64-bit FNV-1a hash of `bytes`: stable across runs, builds and machines, unlike std's
/// hasher, which is seeded at random.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

/// What must match for rows to share a gang under `same_shape`.
fn shape(row: &PodRow) -> (i64, i64, i64, i64, &str, &str) {
    (
        row.cpu_milli,
        row.memory_mib,
        row.num_gpu,
        row.gpu_milli,
        row.qos.as_str(),
        row.gpu_spec.as_str(),
    )
}

/// Where the pod of `row` may run: with a `gpu_spec` (GPU models, `|` separated), only on
/// nodes whose [`GPU_MODEL_LABEL`] is one of them, as a required node affinity; else anywhere.
fn on_gpu_models(row: &PodRow) -> Arc<Constraints> {
    if row.gpu_spec.is_empty() {
        return Arc::default();
    }
    let models = row.gpu_spec.split('|').map(str::to_owned).collect();
    Arc::new(Constraints {
        required_node_affinity: Some(vec![NodeSelectorTerm {
            match_expressions: vec![LabelRequirement {
                key: GPU_MODEL_LABEL.to_owned(),
                operator: LabelOperator::In(models),
            }],
            match_fields: Vec::new(),
            invalid: None,
        }]),
        ..Constraints::default()
    })
}

/// The rows' jobs under `mapping`, in arrival order; see the module docs. The same rows, in
/// any order, give the same jobs.
pub fn jobs(rows: &[PodRow], mapping: &Mapping) -> Result<Vec<Job>, Error> {
    let mut order: Vec<&PodRow> = rows.iter().collect();
    order.sort_by(|a, b| (a.creation_time, &a.name).cmp(&(b.creation_time, &b.name)));
    if mapping.limit > 0 {
        order.truncate(mapping.limit);
    }
    groups(&order, mapping.gangs.as_ref())
        .iter()
        .map(|members| job(members, mapping))
        .collect()
}

/// The rows of each job, as positions in `order` (sorted by creation): one each without
/// `gangs`.
fn groups<'r>(order: &[&'r PodRow], gangs: Option<&Gangs>) -> Vec<Vec<&'r PodRow>> {
    let Some(gangs) = gangs else {
        return order.iter().map(|row| vec![*row]).collect();
    };
    let mut all: Vec<Vec<&PodRow>> = Vec::new();
    // Gangs that later rows may still join, by their index in `all`, oldest first.
    let mut open: Vec<usize> = Vec::new();
    for row in order {
        open.retain(|&g| {
            let first = all[g][0];
            row.creation_time - first.creation_time <= gangs.window && all[g].len() < gangs.max_size
        });
        let joins = open
            .iter()
            .copied()
            .find(|&g| !gangs.same_shape || shape(all[g][0]) == shape(row));
        match joins {
            Some(g) => all[g].push(row),
            None => {
                all.push(vec![row]);
                open.push(all.len() - 1);
            }
        }
    }
    all
}

/// One job of `rows` (one row: a lone pod).
fn job(rows: &[&PodRow], mapping: &Mapping) -> Result<Job, Error> {
    let first = rows[0];
    let queue = mapping.queue_of(first)?;
    let namespace = if mapping.namespace == "queue" {
        queue.clone()
    } else {
        mapping.namespace.clone()
    };
    let ran = |r: &&PodRow| {
        mapping
            .time(r.deletion_time - r.scheduled_time.unwrap_or(r.creation_time))
            .max(1)
    };
    let runtime = rows.iter().map(ran).max().unwrap_or(1);
    let deleted_at = rows
        .iter()
        .all(|r| r.scheduled_time.is_none())
        .then(|| rows.iter().map(|r| r.deletion_time).max().unwrap_or(0))
        .map(|at| mapping.time(at));
    let gang = rows.len() > 1;
    Ok(Job {
        name: if gang {
            format!("gang-{}", first.name)
        } else {
            first.name.clone()
        },
        namespace,
        queue,
        arrival_ms: millis_of(mapping.time(first.creation_time)),
        members: rows.iter().map(|r| mapping.requests(r)).collect(),
        min_member: u32::try_from(rows.len()).unwrap_or(u32::MAX),
        gang,
        priority: mapping.priority.get(&first.qos).copied().unwrap_or(0),
        runtime_ms: millis_of(runtime),
        runtimes_ms: if gang {
            rows.iter().map(|r| millis_of(ran(r))).collect()
        } else {
            Vec::new()
        },
        deleted_at_ms: deleted_at.map(millis_of),
        expected_runtime: None,
        sub_groups: Vec::new(),
        labels: Vec::new(),
        constraints: if rows.iter().all(|r| r.gpu_spec.is_empty()) {
            Vec::new()
        } else {
            rows.iter().map(|r| on_gpu_models(r)).collect()
        },
    })
}

/// The trace in `dir` read through the mapping in `mapping_file` ([`DEFAULT`] when `None`).
pub fn workload(dir: &Path, mapping_file: Option<&Path>) -> Result<Workload, Error> {
    let mapping = match mapping_file {
        Some(file) => read(file)?,
        None => Mapping::default(),
    };
    let trace = trace::read(dir)?;
    let jobs = jobs(&trace.pods, &mapping)?;
    Ok(Workload {
        source: format!(
            "trace {} through {}",
            dir.display(),
            mapping_file.map_or_else(
                || "the default mapping".to_owned(),
                |f| format!("mapping {}", f.display())
            )
        ),
        nodes: trace.nodes.iter().map(|n| mapping.node(n)).collect(),
        jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, qos: &str, num_gpu: i64, created: i64) -> PodRow {
        PodRow {
            name: name.to_owned(),
            cpu_milli: 4_000,
            memory_mib: 8_192,
            num_gpu,
            gpu_milli: if num_gpu > 0 { 1_000 } else { 0 },
            gpu_spec: String::new(),
            qos: qos.to_owned(),
            pod_phase: "Running".to_owned(),
            creation_time: created,
            deletion_time: created + 100,
            scheduled_time: Some(created + 10),
        }
    }

    fn mapping(yaml: &str) -> Mapping {
        parse(yaml, "m.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn refused(yaml: &str) -> String {
        parse(yaml, "m.yaml").unwrap_err().to_string()
    }

    fn queues(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(|j| j.queue.as_str()).collect()
    }

    const GANGS: &str = "queues: {by: qos, qos: {LS: online, BE: batch}}\n\
                         gangs: {window: 60, max_size: 3}\n";

    #[test]
    fn by_qos_each_row_goes_to_its_qos_queue_and_an_unnamed_qos_is_refused() {
        let m = Mapping::default();
        let rows = [
            row("a", "LS", 1, 0),
            row("b", "BE", 1, 5),
            row("c", "Guaranteed", 0, 9),
        ];
        let jobs = jobs(&rows, &m).unwrap();
        assert_eq!(queues(&jobs), ["online", "batch", "online"]);
        assert_eq!(jobs[1].namespace, "batch");
        assert!(jobs.iter().all(|j| !j.gang && j.members.len() == 1));
        let err = super::jobs(&[row("d", "Weird", 0, 0)], &m)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("queues.qos: no queue for qos \"Weird\" (row d)"),
            "{err}"
        );
    }

    #[test]
    fn by_gpus_each_row_goes_to_the_first_entry_whose_max_reaches_its_gpus() {
        let m = mapping(
            "queues:\n  by: gpus\n  gpus: [{max: 0, queue: cpu}, {max: 1, queue: small}, \
             {max: 8, queue: large}]\n",
        );
        let rows = [
            row("a", "LS", 0, 0),
            row("b", "LS", 1, 1),
            row("c", "LS", 2, 2),
            row("d", "LS", 8, 3),
        ];
        assert_eq!(
            queues(&jobs(&rows, &m).unwrap()),
            ["cpu", "small", "large", "large"]
        );
        assert_eq!(m.queue_names(), ["cpu", "large", "small"]);
        let err = super::jobs(&[row("e", "LS", 16, 0)], &m)
            .unwrap_err()
            .to_string();
        assert!(err.contains("queues.gpus: no entry's max reaches num_gpu 16 (row e)"));
    }

    #[test]
    fn by_hash_rows_spread_over_teams_by_a_stable_fnv1a_hash_of_their_name() {
        // The published test vectors of 64-bit FNV-1a.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        let m = mapping("queues: {by: hash, teams: 4}\nnamespace: research\n");
        let rows: Vec<PodRow> = (0..200)
            .map(|i| row(&format!("openb-pod-{i:04}"), "LS", 1, i))
            .collect();
        let jobs = jobs(&rows, &m).unwrap();
        for (job, row) in jobs.iter().zip(&rows) {
            assert_eq!(
                job.queue,
                format!("team-{}", fnv1a(row.name.as_bytes()) % 4)
            );
            assert_eq!(job.namespace, "research");
        }
        for team in m.queue_names() {
            let n = jobs.iter().filter(|j| j.queue == team).count();
            assert!((25..=75).contains(&n), "{team}: {n} of 200");
        }
    }

    #[test]
    fn a_lone_row_runs_from_its_scheduling_to_its_deletion_for_at_least_a_second() {
        let mut quick = row("quick", "LS", 1, 50);
        quick.scheduled_time = Some(quick.deletion_time);
        let jobs = jobs(&[row("a", "LS", 1, 50), quick], &Mapping::default()).unwrap();
        assert_eq!((jobs[0].arrival_ms, jobs[0].runtime_ms), (50_000, 90_000));
        assert_eq!(jobs[0].deleted_at_ms, None);
        assert_eq!(jobs[1].runtime_ms, 1_000);
    }

    #[test]
    fn a_row_never_scheduled_is_deleted_at_its_deletion_time() {
        let mut never = row("never", "BE", 1, 20);
        never.scheduled_time = None;
        let jobs = jobs(&[never], &Mapping::default()).unwrap();
        assert_eq!(jobs[0].deleted_at_ms, Some(120_000));
        assert_eq!(jobs[0].runtime_ms, 100_000);
    }

    #[test]
    fn rows_of_one_shape_within_the_window_form_a_gang_of_at_most_max_size() {
        let m = mapping(GANGS);
        let mut long = row("b", "LS", 1, 30);
        long.deletion_time = 500;
        let rows = [
            row("a", "LS", 1, 0),
            long,
            row("c", "LS", 1, 60),
            // The gang is full: d opens the next one, which e joins.
            row("d", "LS", 1, 60),
            row("e", "LS", 1, 70),
        ];
        let jobs = jobs(&rows, &m).unwrap();
        assert_eq!(jobs.len(), 2);
        let gang = &jobs[0];
        assert_eq!(gang.name, "gang-a");
        assert!(gang.gang);
        assert_eq!((gang.members.len(), gang.min_member), (3, 3));
        assert_eq!(gang.arrival_ms, 0);
        assert_eq!(gang.runtime_ms, (500 - 40) * 1_000);
        assert_eq!(gang.deleted_at_ms, None);
        assert_eq!(jobs[1].name, "gang-d");
        assert_eq!(jobs[1].members.len(), 2);
    }

    #[test]
    fn rows_past_the_window_or_of_another_shape_do_not_join_a_gang() {
        let m = mapping(GANGS);
        let mut bigger = row("b", "LS", 1, 10);
        bigger.cpu_milli = 8_000;
        let rows = [
            row("a", "LS", 1, 0),
            bigger,
            row("c", "BE", 1, 20),
            row("d", "LS", 1, 61),
        ];
        let jobs = jobs(&rows, &m).unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        // Each alone: a gang of one is a lone pod.
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert!(jobs.iter().all(|j| !j.gang));
        // Without same_shape, a, b and c share a gang (a's queue), d is past the window.
        let m = mapping(&GANGS.replace("max_size: 3", "max_size: 3, same_shape: false"));
        let jobs = super::jobs(&rows, &m).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (jobs[0].members.len(), jobs[0].queue.as_str()),
            (3, "online")
        );
    }

    #[test]
    fn a_rows_gpu_spec_keeps_its_pod_to_nodes_of_those_models() {
        let m = mapping(GANGS);
        let mut v100 = row("a", "LS", 1, 0);
        v100.gpu_spec = "V100M16|V100M32".to_owned();
        let mut other = row("b", "LS", 1, 5);
        other.gpu_spec = "T4".to_owned();
        let jobs = jobs(&[v100, other, row("c", "LS", 1, 9)], &m).unwrap();
        // Another gpu_spec is another shape: three lone pods.
        assert_eq!(jobs.len(), 3);
        let node = |model: &str| Node {
            name: model.to_owned(),
            labels: BTreeMap::from([(GPU_MODEL_LABEL.to_owned(), model.to_owned())]),
            ..Node::default()
        };
        let allows = |job: &Job, model: &str| {
            job.constraints_of(0)
                .is_none_or(|c| gangplank_core::policy::feasible(&node(model), c).is_ok())
        };
        assert!(allows(&jobs[0], "V100M32") && allows(&jobs[0], "V100M16"));
        assert!(!allows(&jobs[0], "T4") && !allows(&jobs[0], "G2"));
        assert!(allows(&jobs[1], "T4") && !allows(&jobs[1], "V100M32"));
        assert!(jobs[2].constraints.is_empty(), "no gpu_spec: anywhere");
    }

    #[test]
    fn a_gang_is_deleted_only_if_none_of_its_rows_was_ever_scheduled() {
        let m = mapping(GANGS);
        let mut a = row("a", "LS", 1, 0);
        let mut b = row("b", "LS", 1, 5);
        a.scheduled_time = None;
        b.scheduled_time = None;
        b.deletion_time = 300;
        let jobs = jobs(&[a.clone(), b.clone()], &m).unwrap();
        assert_eq!(jobs[0].deleted_at_ms, Some(300_000));
        b.scheduled_time = Some(10);
        let jobs = super::jobs(&[a, b], &m).unwrap();
        assert_eq!(jobs[0].deleted_at_ms, None);
    }

    #[test]
    fn whole_gpus_count_a_shared_gpu_whole_and_milli_counts_thousandths_on_pods_and_nodes() {
        let mut shared = row("s", "BE", 1, 0);
        shared.gpu_milli = 460;
        let whole = jobs(std::slice::from_ref(&shared), &Mapping::default()).unwrap();
        assert_eq!(
            whole[0].members[0],
            Resources::from([
                ("cpu", 4_000),
                ("memory", 8_192 << 20),
                ("pods", 1),
                ("nvidia.com/gpu", 1)
            ])
        );
        let m = mapping(&format!("{DEFAULT}gpu_sharing: milli\n"));
        let milli = jobs(&[shared], &m).unwrap();
        assert_eq!(milli[0].members[0].get(GPU_MILLI_RESOURCE), 460);
        assert_eq!(milli[0].members[0].get("nvidia.com/gpu"), 0);
        let node = NodeRow {
            name: "n".into(),
            cpu_milli: 1,
            memory_mib: 1,
            gpu: 8,
            model: "G2".into(),
        };
        assert_eq!(m.node(&node).allocatable.get(GPU_MILLI_RESOURCE), 8_000);
        assert_eq!(m.node(&node).allocatable.get("nvidia.com/gpu"), 0);
        assert_eq!(
            Mapping::default()
                .node(&node)
                .allocatable
                .get("nvidia.com/gpu"),
            8
        );
    }

    #[test]
    fn priority_is_by_qos_speed_divides_every_time_and_limit_keeps_the_first_rows() {
        let m = mapping(&format!(
            "{DEFAULT}priority: {{LS: 100}}\nspeed: 10\nlimit: 2\n"
        ));
        let mut never = row("c", "BE", 1, 1_000);
        never.scheduled_time = None;
        // Given out of order: the limit is by creation time.
        let jobs = jobs(&[never, row("z", "BE", 1, 500), row("a", "LS", 1, 999)], &m).unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["z", "a"]);
        assert_eq!((jobs[0].priority, jobs[1].priority), (0, 100));
        assert_eq!((jobs[0].arrival_ms, jobs[0].runtime_ms), (50_000, 9_000));
        let m = mapping(&format!("{DEFAULT}speed: 10\n"));
        let mut never = row("c", "BE", 1, 1_000);
        never.scheduled_time = None;
        let jobs = super::jobs(&[never], &m).unwrap();
        assert_eq!(
            (jobs[0].arrival_ms, jobs[0].deleted_at_ms),
            (100_000, Some(110_000))
        );
    }

    #[test]
    fn the_same_rows_in_any_order_give_the_same_jobs() {
        let m = mapping(GANGS);
        let rows: Vec<PodRow> = (0..300)
            .map(|i| {
                row(
                    &format!("r{i}"),
                    ["LS", "BE"][i % 2],
                    (i % 3) as i64,
                    (i * 7 % 400) as i64,
                )
            })
            .collect();
        let first = jobs(&rows, &m).unwrap();
        assert!(first.iter().any(|j| j.gang));
        let mut reversed = rows.clone();
        reversed.reverse();
        assert_eq!(jobs(&reversed, &m).unwrap(), first);
        assert_eq!(jobs(&rows, &m).unwrap(), first);
    }

    #[test]
    fn bad_mappings_are_refused_naming_the_field() {
        let unreadable = read(Path::new("no/such.yaml")).unwrap_err().to_string();
        assert!(unreadable.starts_with("cannot read mapping no/such.yaml: "));
        let cases = [
            (
                "queues: {by: qos, qos: {LS: a}}\nspeeed: 2\n",
                "m.yaml: unknown field `speeed`",
            ),
            (
                "queues: {by: qoss}\n",
                "m.yaml: queues.by: unknown variant `qoss`",
            ),
            (
                "queues: {by: qos, qos: {LS: a}, team: 3}\n",
                "queues: unknown field `team`",
            ),
            ("namespace: x\n", "missing field `queues`"),
            ("queues: {by: qos}\n", "queues.qos: by: qos needs"),
            ("queues: {by: gpus}\n", "queues.gpus: by: gpus needs"),
            ("queues: {by: hash}\n", "queues.teams: by: hash needs"),
            (
                "queues: {by: hash, teams: 0}\n",
                "queues.teams: 0 is not within",
            ),
            (
                "queues: {by: qos, qos: {LS: Online}}\n",
                "queues.qos.LS: must be",
            ),
            (
                "queues: {by: qos, qos: {LS: a.b}}\n",
                "queues.qos.LS: \"a.b\" holds a '.'",
            ),
            (
                "queues: {by: gpus, gpus: [{max: 1, queue: a}, {max: 1, queue: b}]}\n",
                "queues.gpus[1].max: 1 is not above",
            ),
            (
                "queues: {by: gpus, gpus: [{max: -1, queue: a}]}\n",
                "queues.gpus[0].max: -1",
            ),
            (
                "queues: {by: gpus, gpus: [{max: 1}]}\n",
                "queues.gpus[0]: missing field `queue`",
            ),
            (
                "queues: {by: hash, teams: 2}\nnamespace: My_NS\n",
                "namespace: must be",
            ),
            (
                "queues: {by: hash, teams: 2}\ngangs: {window: -1, max_size: 2}\n",
                "gangs.window",
            ),
            (
                "queues: {by: hash, teams: 2}\ngangs: {window: 1, max_size: 0}\n",
                "gangs.max_size",
            ),
            (
                "queues: {by: hash, teams: 2}\ngangs: {window: 1}\n",
                "gangs: missing field `max_size`",
            ),
            (
                "queues: {by: hash, teams: 2}\ngpu_sharing: half\n",
                "gpu_sharing: unknown variant",
            ),
            (
                "queues: {by: hash, teams: 2}\nspeed: 0\n",
                "speed: 0 is not within",
            ),
            (
                "queues: {by: hash, teams: 2}\nspeed: .nan\n",
                "speed: NaN is not within",
            ),
            (
                "queues: {by: hash, teams: 2}\nlimit: -3\n",
                "m.yaml: limit: invalid type: integer `-3`",
            ),
            (
                "queues: {by: hash, teams: 2}\npriority: {LS: high}\n",
                "priority.LS: invalid type",
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .map(|(yaml, want)| (refused(yaml), want))
            .filter(|(err, want)| !err.contains(*want))
            .map(|(err, want)| format!("want {want:?}, got {err:?}"))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    fn repo(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
    }

    #[test]
    fn the_example_mapping_reads_and_the_example_configurations_define_exactly_its_queues() {
        let m = read(&repo("examples/simulate/alibaba-mapping.yaml")).unwrap();
        for config in ["baseline.yaml", "online-weight-3.yaml"] {
            let c =
                super::super::configuration::read(&repo(&format!("examples/simulate/{config}")))
                    .unwrap();
            let mut defined: Vec<String> = c.queues.iter().map(|q| q.name.clone()).collect();
            defined.sort();
            assert_eq!(defined, m.queue_names(), "{config}");
        }
    }

    #[test]
    #[ignore = "reads the published trace beside the repository: run by ./test.sh"]
    fn the_published_trace_becomes_a_workload_through_the_example_mapping() {
        let dir = trace::shared_trace_dir();
        let mapping = repo("examples/simulate/alibaba-mapping.yaml");
        let w = workload(&dir, Some(&mapping)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.nodes.len(), 1_523);
        let members: usize = w.jobs.iter().map(|j| j.members.len()).sum();
        assert_eq!(members, 8_152);
        assert!(w.jobs.iter().any(|j| j.gang));
        let w = workload(&dir, None).unwrap();
        assert_eq!(w.jobs.len(), 8_152);
        assert!(w.source.contains("the default mapping"), "{}", w.source);
    }
}
