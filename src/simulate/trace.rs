//! The Alibaba GPU cluster trace of 2023 (`cluster-trace-gpu-v2023`): its two CSV files read
//! into rows ([`NodeRow`], [`PodRow`]) and its nodes into the model's [`Node`]s. Which queue,
//! namespace and gang a row becomes is the mapping's to say ([`super::mapping`]).
//!
//! A trace file is input from outside: every value is checked where it enters, and a bad one
//! is refused naming the file, the line and the column; numbers are bounded so that no sum the
//! simulation makes of them can overflow, and a file of more than [`MAX_ROWS`] rows is refused
//! rather than read into memory.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use gangplank_core::model::{Node, Resources};
use serde::Deserialize;

/// The trace's node list: `sn,cpu_milli,memory_mib,gpu,model`.
pub const NODE_FILE: &str = "openb_node_list_all_node.csv";
/// The trace's pods: `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
/// creation_time,deletion_time,scheduled_time`.
pub const POD_FILE: &str = "openb_pod_list_default.csv";

/// Most rows a file may hold (the published trace has 8,152 pods and 1,523 nodes).
pub const MAX_ROWS: usize = 1_000_000;
/// Most CPU of one node or pod, in millicores (10,000 CPUs).
pub const MAX_CPU_MILLI: i64 = 10_000_000;
/// Most memory of one node or pod, in MiB (about 95 TiB).
pub const MAX_MEMORY_MIB: i64 = 100_000_000;
/// Most GPUs of one node or pod.
pub const MAX_GPUS: i64 = 1_024;
/// A GPU in thousandths.
pub const GPU_MILLI: i64 = 1_000;
/// Latest time, in seconds from the trace's start (about 317 years).
pub const MAX_TIME: i64 = 10_000_000_000;
/// Longest name of a node or a row: room for a gang's prefix and a member's index within a
/// Kubernetes name.
pub const MAX_NAME: usize = 200;
/// The `pods` a node takes: the kubelet's default.
pub const PODS_PER_NODE: i64 = 110;
/// The node label that carries the trace's GPU model.
pub const GPU_MODEL_LABEL: &str = "gpu-model";

/// One node of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpu: i64,
    /// The GPU type (`G2`, `T4`, ...); empty for a node without GPUs.
    pub model: String,
}

/// One pod (task) of the trace; times in seconds from the trace's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: i64,
    /// The share of each GPU it uses, in thousandths (below 1,000: a GPU-sharing task).
    pub gpu_milli: i64,
    /// GPU types it may run on, `|` separated; empty: any.
    pub gpu_spec: String,
    /// `LS`, `BE`, `Burstable` or `Guaranteed`: not checked here, the mapping names them.
    pub qos: String,
    /// Its phase at the end of the trace.
    pub pod_phase: String,
    pub creation_time: i64,
    pub deletion_time: i64,
    /// `None`: never scheduled (deleted while pending, or still pending at the trace's end).
    pub scheduled_time: Option<i64>,
}

/// Why a trace's file is refused: where, and what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The CSV itself: a short row, bad quoting, text that is not UTF-8.
    #[error("{file} line {line}: {error}")]
    Csv {
        file: String,
        line: u64,
        error: csv::Error,
    },
    #[error("{file} line 1: no column {}; the header must name {}", missing.join(", "), columns.join(","))]
    MissingColumns {
        file: String,
        missing: Vec<&'static str>,
        columns: &'static [&'static str],
    },
    #[error("{file}: more than {max_rows} rows; simulate a part of the trace (split the file)")]
    TooManyRows { file: String, max_rows: usize },
    #[error("{file} line {line}: {column}: {problem}")]
    Value {
        file: String,
        line: u64,
        column: &'static str,
        problem: Problem,
    },
}

/// What is wrong with one value of a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("empty; a whole number is needed")]
    NoNumber,
    #[error("{0:?} is not a whole number")]
    NotANumber(String),
    #[error("{0} is negative")]
    Negative(i64),
    #[error("{value} is more than {max}")]
    TooLarge { value: i64, max: i64 },
    #[error("empty; every row needs a name")]
    NoName,
    #[error("{0} characters, more than {MAX_NAME}")]
    TooLong(usize),
    #[error("{0:?} holds a space or control character")]
    NotAName(String),
    #[error("{0:?} is named twice")]
    NamedTwice(String),
    #[error("{deletion_time} is before creation_time {creation_time}")]
    DeletedBeforeCreated {
        creation_time: i64,
        deletion_time: i64,
    },
    #[error(
        "{scheduled_time} is not between creation_time {creation_time} and deletion_time \
         {deletion_time}"
    )]
    ScheduledOutsideLife {
        creation_time: i64,
        deletion_time: i64,
        scheduled_time: i64,
    },
    #[error("{0:?} is not one of Pending, Running, Succeeded, Failed")]
    UnknownPhase(String),
    #[error(
        "{phase} with {}; only a Pending row has no scheduled_time",
        match scheduled_time {
            Some(t) => format!("scheduled_time {t}"),
            None => "no scheduled_time".to_owned(),
        }
    )]
    PhaseAgainstSchedule {
        phase: String,
        scheduled_time: Option<i64>,
    },
}

/// Both files of a trace directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub nodes: Vec<NodeRow>,
    pub pods: Vec<PodRow>,
}

/// Reads [`NODE_FILE`] and [`POD_FILE`] in `dir`.
pub fn read(dir: &Path) -> Result<Trace, Error> {
    let open = |file: &str| {
        let path = dir.join(file);
        std::fs::File::open(&path).map_err(|error| Error::Read { path, error })
    };
    Ok(Trace {
        nodes: nodes(open(NODE_FILE)?, NODE_FILE)?,
        pods: pods(open(POD_FILE)?, POD_FILE)?,
    })
}

#[derive(Deserialize)]
struct RawNode<'a> {
    sn: &'a str,
    cpu_milli: &'a str,
    memory_mib: &'a str,
    gpu: &'a str,
    model: &'a str,
}

#[derive(Deserialize)]
struct RawPod<'a> {
    name: &'a str,
    cpu_milli: &'a str,
    memory_mib: &'a str,
    num_gpu: &'a str,
    gpu_milli: &'a str,
    gpu_spec: &'a str,
    qos: &'a str,
    pod_phase: &'a str,
    creation_time: &'a str,
    deletion_time: &'a str,
    scheduled_time: &'a str,
}

const NODE_COLUMNS: [&str; 5] = ["sn", "cpu_milli", "memory_mib", "gpu", "model"];
const POD_COLUMNS: [&str; 11] = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// Reads a node list (the columns of [`NODE_FILE`], in any order) from `input`, named `file`
/// in errors.
pub fn nodes(input: impl Read, file: &str) -> Result<Vec<NodeRow>, Error> {
    nodes_at_most(input, file, MAX_ROWS)
}

fn nodes_at_most(input: impl Read, file: &str, max_rows: usize) -> Result<Vec<NodeRow>, Error> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    each_row(
        input,
        file,
        &NODE_COLUMNS,
        max_rows,
        |at, record, headers| {
            let raw: RawNode = record.deserialize(Some(headers)).map_err(|e| at.whole(e))?;
            let row = NodeRow {
                name: at.name("sn", raw.sn)?,
                cpu_milli: at.number("cpu_milli", raw.cpu_milli, MAX_CPU_MILLI)?,
                memory_mib: at.number("memory_mib", raw.memory_mib, MAX_MEMORY_MIB)?,
                gpu: at.number("gpu", raw.gpu, MAX_GPUS)?,
                model: at.text("model", raw.model)?,
            };
            if !names.insert(row.name.clone()) {
                return Err(at.column("sn", Problem::NamedTwice(row.name)));
            }
            out.push(row);
            Ok(())
        },
    )?;
    Ok(out)
}

/// Reads a pod list (the columns of [`POD_FILE`], in any order) from `input`, named `file` in
/// errors.
pub fn pods(input: impl Read, file: &str) -> Result<Vec<PodRow>, Error> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    each_row(
        input,
        file,
        &POD_COLUMNS,
        MAX_ROWS,
        |at, record, headers| {
            let raw: RawPod = record.deserialize(Some(headers)).map_err(|e| at.whole(e))?;
            let scheduled_time = match raw.scheduled_time.trim() {
                "" => None,
                time => Some(at.number("scheduled_time", time, MAX_TIME)?),
            };
            let row = PodRow {
                name: at.name("name", raw.name)?,
                cpu_milli: at.number("cpu_milli", raw.cpu_milli, MAX_CPU_MILLI)?,
                memory_mib: at.number("memory_mib", raw.memory_mib, MAX_MEMORY_MIB)?,
                num_gpu: at.number("num_gpu", raw.num_gpu, MAX_GPUS)?,
                gpu_milli: at.number("gpu_milli", raw.gpu_milli, GPU_MILLI)?,
                gpu_spec: at.text("gpu_spec", raw.gpu_spec)?,
                qos: at.text("qos", raw.qos)?,
                pod_phase: at.text("pod_phase", raw.pod_phase)?,
                creation_time: at.number("creation_time", raw.creation_time, MAX_TIME)?,
                deletion_time: at.number("deletion_time", raw.deletion_time, MAX_TIME)?,
                scheduled_time,
            };
            let (creation_time, deletion_time) = (row.creation_time, row.deletion_time);
            if deletion_time < creation_time {
                return Err(at.column(
                    "deletion_time",
                    Problem::DeletedBeforeCreated {
                        creation_time,
                        deletion_time,
                    },
                ));
            }
            if let Some(scheduled_time) = row.scheduled_time
                && !(creation_time..=deletion_time).contains(&scheduled_time)
            {
                return Err(at.column(
                    "scheduled_time",
                    Problem::ScheduledOutsideLife {
                        creation_time,
                        deletion_time,
                        scheduled_time,
                    },
                ));
            }
            if let Some(problem) = phase_problem(&row) {
                return Err(at.column("pod_phase", problem));
            }
            if !names.insert(row.name.clone()) {
                return Err(at.column("name", Problem::NamedTwice(row.name)));
            }
            out.push(row);
            Ok(())
        },
    )?;
    Ok(out)
}

/// The phases a row may end in: `Pending` (never scheduled: withdrawn at its deletion
/// time), or `Running`, `Succeeded` or `Failed` (scheduled: runs until its deletion time,
/// which for `Running` is when the trace was taken).
pub const PHASES: [&str; 4] = ["Pending", "Running", "Succeeded", "Failed"];

/// What is wrong with `row`'s phase: one not in [`PHASES`], or one that its `scheduled_time`
/// contradicts.
fn phase_problem(row: &PodRow) -> Option<Problem> {
    let phase = row.pod_phase.as_str();
    if !PHASES.contains(&phase) {
        return Some(Problem::UnknownPhase(row.pod_phase.clone()));
    }
    let pending = phase == "Pending";
    (pending != row.scheduled_time.is_none()).then(|| Problem::PhaseAgainstSchedule {
        phase: row.pod_phase.clone(),
        scheduled_time: row.scheduled_time,
    })
}

/// Where a value is: the file and the line, for errors.
struct At<'f> {
    file: &'f str,
    line: u64,
}

impl At<'_> {
    fn column(&self, column: &'static str, problem: Problem) -> Error {
        Error::Value {
            file: self.file.to_owned(),
            line: self.line,
            column,
            problem,
        }
    }

    fn whole(&self, error: csv::Error) -> Error {
        Error::Csv {
            file: self.file.to_owned(),
            line: self.line,
            error,
        }
    }

    /// A whole number in `0..=max`.
    fn number(&self, column: &'static str, value: &str, max: i64) -> Result<i64, Error> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(self.column(column, Problem::NoNumber));
        }
        let number: i64 = trimmed
            .parse()
            .map_err(|_| self.column(column, Problem::NotANumber(value.to_owned())))?;
        if number < 0 {
            return Err(self.column(column, Problem::Negative(number)));
        }
        if number > max {
            return Err(self.column(column, Problem::TooLarge { value: number, max }));
        }
        Ok(number)
    }

    /// A name: not empty, at most [`MAX_NAME`] characters, no spaces or control characters.
    fn name(&self, column: &'static str, value: &str) -> Result<String, Error> {
        if value.is_empty() {
            return Err(self.column(column, Problem::NoName));
        }
        if value.len() > MAX_NAME {
            return Err(self.column(column, Problem::TooLong(value.len())));
        }
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(self.column(column, Problem::NotAName(value.to_owned())));
        }
        Ok(value.to_owned())
    }

    /// A short text: at most [`MAX_NAME`] characters.
    fn text(&self, column: &'static str, value: &str) -> Result<String, Error> {
        if value.len() > MAX_NAME {
            return Err(self.column(column, Problem::TooLong(value.len())));
        }
        Ok(value.trim().to_owned())
    }
}

/// Calls `each` with every record of `input` after its header, which must name `columns`;
/// stops at the first error, and after `max_rows` rows.
fn each_row(
    input: impl Read,
    file: &str,
    columns: &'static [&'static str],
    max_rows: usize,
    mut each: impl FnMut(&At, &csv::StringRecord, &csv::StringRecord) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut reader = csv::ReaderBuilder::new().from_reader(input);
    let at_line = |line: u64| At { file, line };
    let headers = reader.headers().map_err(|e| at_line(1).whole(e))?.clone();
    let missing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !headers.iter().any(|h| h.trim() == *c))
        .collect();
    if !missing.is_empty() {
        return Err(Error::MissingColumns {
            file: file.to_owned(),
            missing,
            columns,
        });
    }
    let headers: csv::StringRecord = headers.iter().map(str::trim).collect();
    let mut record = csv::StringRecord::new();
    let mut rows = 0usize;
    loop {
        let line = reader.position().line();
        let more = reader.read_record(&mut record).map_err(|e| {
            let line = e.position().map_or(line, csv::Position::line);
            at_line(line).whole(e)
        })?;
        if !more {
            return Ok(());
        }
        rows += 1;
        if rows > max_rows {
            return Err(Error::TooManyRows {
                file: file.to_owned(),
                max_rows,
            });
        }
        let line = record.position().map_or(line, csv::Position::line);
        each(&at_line(line), &record, &headers)?;
    }
}

/// The model's node of a row: `cpu`, `memory`, `nvidia.com/gpu` (when it has any) and
/// [`PODS_PER_NODE`] `pods`; the GPU model as the label [`GPU_MODEL_LABEL`].
pub fn node(row: &NodeRow) -> Node {
    let mut allocatable = Resources::new();
    allocatable.set("cpu", row.cpu_milli);
    allocatable.set("memory", row.memory_mib << 20);
    if row.gpu > 0 {
        allocatable.set("nvidia.com/gpu", row.gpu);
    }
    allocatable.set("pods", PODS_PER_NODE);
    let mut labels = BTreeMap::new();
    if !row.model.is_empty() {
        labels.insert(GPU_MODEL_LABEL.to_owned(), row.model.clone());
    }
    Node {
        name: row.name.clone(),
        allocatable,
        labels,
        ..Node::default()
    }
}

/// The published trace, which CI has beside the repository (`shared/`), or
/// `GANGPLANK_TRACE_DIR`.
#[cfg(test)]
pub(crate) fn shared_trace_dir() -> std::path::PathBuf {
    std::env::var_os("GANGPLANK_TRACE_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/alibaba-gpu-2023"),
        Into::into,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
sn,cpu_milli,memory_mib,gpu,model
n-0,32000,262144,0,
n-1,96000,786432,8,G2
";

    const PODS: &str = "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p-0,12000,16384,1,1000,,LS,Running,0,100,0
p-1,6000,12288,1,460,,BE,Failed,10,50,12
p-2,4000,8192,0,0,,BE,Pending,20,90,
";

    fn pod_error(body: &str) -> String {
        let header = PODS.lines().next().unwrap();
        pods(format!("{header}\n{body}\n").as_bytes(), POD_FILE)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_node_list_becomes_rows_and_model_nodes_with_their_gpus_and_model() {
        let rows = nodes(NODES.as_bytes(), NODE_FILE).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1],
            NodeRow {
                name: "n-1".into(),
                cpu_milli: 96_000,
                memory_mib: 786_432,
                gpu: 8,
                model: "G2".into()
            }
        );
        let cpu_only = node(&rows[0]);
        assert_eq!(
            cpu_only.allocatable,
            Resources::from([("cpu", 32_000), ("memory", 262_144 << 20), ("pods", 110)])
        );
        assert!(cpu_only.labels.is_empty());
        let gpu = node(&rows[1]);
        assert_eq!(gpu.allocatable.get("nvidia.com/gpu"), 8);
        assert_eq!(gpu.labels[GPU_MODEL_LABEL], "G2");
    }

    #[test]
    fn a_pod_list_becomes_rows_and_an_empty_scheduled_time_means_never_scheduled() {
        let rows = pods(PODS.as_bytes(), POD_FILE).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[1],
            PodRow {
                name: "p-1".into(),
                cpu_milli: 6_000,
                memory_mib: 12_288,
                num_gpu: 1,
                gpu_milli: 460,
                gpu_spec: String::new(),
                qos: "BE".into(),
                pod_phase: "Failed".into(),
                creation_time: 10,
                deletion_time: 50,
                scheduled_time: Some(12),
            }
        );
        assert_eq!(rows[2].scheduled_time, None);
    }

    #[test]
    fn columns_may_come_in_any_order_and_extra_ones_are_ignored() {
        let text = "model,gpu,extra,memory_mib,cpu_milli,sn\nT4,2,x,1024,8000,n-9\n";
        let rows = nodes(text.as_bytes(), NODE_FILE).unwrap();
        assert_eq!(rows[0].name, "n-9");
        assert_eq!(rows[0].gpu, 2);
        assert_eq!(rows[0].model, "T4");
    }

    #[test]
    fn a_bad_value_is_refused_naming_the_file_the_line_and_the_column() {
        let err = pod_error("p-0,1000,1,0,0,,LS,Running,0,1,0\np-1,x,1,0,0,,LS,Running,0,1,0");
        assert_eq!(
            err,
            "openb_pod_list_default.csv line 3: cpu_milli: \"x\" is not a whole number"
        );
        let header = PODS.lines().next().unwrap();
        let typed = pods(
            format!("{header}\np-1,x,1,0,0,,LS,Running,0,1,0\n").as_bytes(),
            POD_FILE,
        );
        assert!(matches!(
            typed,
            Err(Error::Value {
                line: 2,
                column: "cpu_milli",
                problem: Problem::NotANumber(_),
                ..
            })
        ));
        let err = pod_error("p-0,1000,1,0,0,,LS,Running,0,1,1.5");
        assert_eq!(
            err,
            "openb_pod_list_default.csv line 2: scheduled_time: \"1.5\" is not a whole number"
        );
        let err = pod_error("p-0,1000,,0,0,,LS,Running,0,1,0");
        assert!(err.contains("line 2: memory_mib: empty"), "{err}");
        let err = nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,two,\n".as_bytes(),
            NODE_FILE,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "openb_node_list_all_node.csv line 2: gpu: \"two\" is not a whole number"
        );
    }

    #[test]
    fn numbers_are_bounded_where_they_enter() {
        let cases = [
            ("p,-1,1,0,0,,LS,Running,0,1,0", "cpu_milli: -1 is negative"),
            (
                "p,10000001,1,0,0,,LS,Running,0,1,0",
                "cpu_milli: 10000001 is more than",
            ),
            (
                "p,1,100000001,0,0,,LS,Running,0,1,0",
                "memory_mib: 100000001 is more than",
            ),
            (
                "p,1,1,1025,0,,LS,Running,0,1,0",
                "num_gpu: 1025 is more than",
            ),
            (
                "p,1,1,1,1001,,LS,Running,0,1,0",
                "gpu_milli: 1001 is more than",
            ),
            (
                "p,1,1,0,0,,LS,Running,-5,1,0",
                "creation_time: -5 is negative",
            ),
            (
                "p,1,1,0,0,,LS,Running,0,10000000001,0",
                "deletion_time: 10000000001 is more",
            ),
            (
                "p,1,1,0,0,,LS,Running,0,99999999999999999999,0",
                "is not a whole number",
            ),
            (
                "p,1,1,0,0,,LS,Running,10,5,",
                "deletion_time: 5 is before creation_time 10",
            ),
            (
                "p,1,1,0,0,,LS,Running,10,20,30",
                "scheduled_time: 30 is not between",
            ),
            (
                "p,1,1,0,0,,LS,Running,0,1,0\np,1,1,0,0,,LS,Running,0,1,0",
                "line 3: name: \"p\" is named twice",
            ),
            (",1,1,0,0,,LS,Running,0,1,0", "name: empty"),
        ];
        for (body, want) in cases {
            let err = pod_error(body);
            assert!(err.contains(want), "{body}: {err}");
        }
        let phases = [
            (
                "p,1,1,0,0,,LS,Done,0,1,0",
                "pod_phase: \"Done\" is not one of Pending",
            ),
            (
                "p,1,1,0,0,,LS,Pending,0,1,0",
                "pod_phase: Pending with scheduled_time 0; only a Pending row has no",
            ),
            (
                "p,1,1,0,0,,LS,Failed,0,1,",
                "pod_phase: Failed with no scheduled_time; only a Pending row",
            ),
        ];
        for (body, want) in phases {
            let err = pod_error(body);
            assert!(err.contains(want), "{body}: {err}");
        }
        let err = nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2000,\n".as_bytes(),
            NODE_FILE,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("gpu: 2000 is more than 1024"), "{err}");
    }

    #[test]
    fn a_file_without_a_column_or_with_a_short_row_is_refused() {
        let err = nodes("sn,cpu_milli,gpu,model\nn,1,0,\n".as_bytes(), NODE_FILE)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1: no column memory_mib"), "{err}");
        let err = nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn,1,1\n".as_bytes(),
            NODE_FILE,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("openb_node_list_all_node.csv line 2:"),
            "{err}"
        );
    }

    #[test]
    fn a_file_of_more_rows_than_the_bound_is_refused() {
        // The same check as MAX_ROWS's, at a bound a test reaches quickly.
        let mut text = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
        for i in 0..=10 {
            text.push_str(&format!("n{i},1,1,0,\n"));
        }
        let err = nodes_at_most(text.as_bytes(), NODE_FILE, 10)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "openb_node_list_all_node.csv: more than 10 rows; simulate a part of the trace (split \
             the file)"
        );
        assert!(nodes_at_most(text.as_bytes(), NODE_FILE, 11).is_ok());
    }

    #[test]
    #[ignore = "reads the published trace beside the repository: run by ./test.sh"]
    fn the_published_trace_reads_whole_1523_nodes_and_8152_pods() {
        let dir = shared_trace_dir();
        let trace = read(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(trace.nodes.len(), 1_523);
        assert_eq!(trace.pods.len(), 8_152);
        let never = trace.pods.iter().filter(|p| p.scheduled_time.is_none());
        assert_eq!(never.count(), 897);
        assert_eq!(trace.nodes.iter().map(|n| n.gpu).sum::<i64>(), 6_212);
    }
}
