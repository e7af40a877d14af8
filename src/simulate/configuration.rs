//! One configuration to compare, from a YAML file of several documents: the Queue manifests
//! the cluster would take (the same YAML), and at most one `Simulation` document for what is
//! not a Queue:
//!
//! ```yaml
//! apiVersion: simulate.gangplank.dev/v1alpha1
//! kind: Simulation
//! name: research-weight-4      # default: the file's name
//! placement: binpack           # or spread: gangplank serve --placement
//! nodes:
//!   scale: 1.5                 # each node of the workload 1.5 times (rounded down per kind)
//!   remove: [openb-node-0007]  # by name
//!   add:
//!     - count: 10
//!       prefix: extra-gpu      # extra-gpu-0 ... extra-gpu-9
//!       allocatable: {cpu: "96", memory: 512Gi, nvidia.com/gpu: "8"}
//!       labels: {gpu-model: H100}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gangplank_core::claims;
use gangplank_core::model::{Node, Queue};
use gangplank_core::policy::placement::Strategy;
use gangplank_core::simulate::{Job, Setup};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use crate::api;
use crate::cache::lookup::{Lookup, QueueLookup, QueueView};
use crate::cache::{self, convert};
use crate::webhooks::queues::check_without_cluster;
use crate::webhooks::review::Denial;

/// Most nodes a configuration may add or scale to: a made-up cluster ten times the design's
/// target is refused rather than filling memory.
pub const MAX_NODES: usize = 50_000;

/// A configuration as read from its file.
#[derive(Debug, Clone)]
pub struct Configuration {
    pub name: String,
    pub queues: Vec<Queue>,
    /// How its pods are placed: `gangplank serve --placement`.
    pub placement: Strategy,
    pub nodes: NodeChanges,
    /// The file it was read from.
    pub file: String,
}

/// The `Simulation` document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Simulation {
    #[serde(rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(rename = "kind")]
    _kind: Option<String>,
    name: Option<String>,
    placement: Option<String>,
    #[serde(default)]
    nodes: NodeChanges,
}

/// How a configuration changes the workload's nodes: `remove` first, then `scale`, then `add`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeChanges {
    pub scale: Option<f64>,
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub add: Vec<NewNodes>,
}

/// Nodes a configuration adds, all alike.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewNodes {
    pub count: usize,
    pub prefix: String,
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Why a configuration is refused: its file, the document or the field, and what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file at the path does not read.
    #[error("cannot read configuration {path}: {1}", path = .0.display())]
    Read(PathBuf, std::io::Error),
    /// One document of the file, counted from 1.
    #[error("{file}, document {document}: {problem}")]
    Document {
        file: String,
        document: usize,
        problem: DocumentProblem,
    },
    #[error("{file}: placement: {name:?} is not binpack or spread")]
    Placement { file: String, name: String },
    #[error("{file}: nodes.scale: {scale} is not a positive number")]
    Scale { file: String, scale: f64 },
    #[error("{file}: nodes.remove: the workload has no node {name:?}")]
    NoSuchNode { file: String, name: String },
    #[error("{file}: nodes: more than {MAX_NODES} nodes; simulate a smaller cluster")]
    TooManyNodes { file: String },
    /// `why`: the quantity that does not parse, in [`convert::resources`]' words.
    #[error("{file}: nodes.add[{index}].allocatable: {why}")]
    Allocatable {
        file: String,
        index: usize,
        why: String,
    },
    #[error(
        "{file}: the workload's jobs name queues the configuration does not define: {}; add a \
         Queue for each",
        queues.join(", ")
    )]
    MissingQueues { file: String, queues: Vec<String> },
}

/// What is wrong with one document of a configuration.
#[derive(Debug, thiserror::Error)]
pub enum DocumentProblem {
    /// Not YAML.
    #[error("{0}")]
    Yaml(serde_yaml::Error),
    #[error("kind {0:?}: a configuration holds Queue documents and at most one Simulation")]
    Kind(Option<String>),
    #[error("not a Queue: {0}")]
    NotAQueue(serde_yaml::Error),
    #[error("metadata.name: a Queue needs a name")]
    Unnamed,
    #[error("metadata.name: a second Queue {0:?}; keep one")]
    SecondQueue(String),
    #[error("the cluster would refuse this Queue: {0}")]
    Refused(Denial),
    /// A Queue the model does not take (a quantity that does not parse).
    #[error("{0}")]
    Queue(cache::Error),
    #[error("a second Simulation document; keep one")]
    SecondSimulation,
    #[error("Simulation: {0}")]
    Simulation(serde_yaml::Error),
}

/// Reads the configuration in `path`; the error names the document and the field.
pub fn read(path: &Path) -> Result<Configuration, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read(path.to_owned(), e))?;
    parse(&text, &path.display().to_string())
}

/// Reads a configuration from `text`, the contents of `file`. Its Queues must pass the Queue
/// webhook's checks that need no live cluster (`webhooks::queues::check_without_cluster`), as
/// the cluster would refuse them otherwise.
pub fn parse(text: &str, file: &str) -> Result<Configuration, Error> {
    let (manifests, simulation) = documents(text, file)?;
    let queues = checked_queues(&manifests, file)?;
    let simulation = simulation.unwrap_or_default();
    let placement = match simulation.placement {
        None => Strategy::Binpack,
        Some(name) => Strategy::named(&name).ok_or_else(|| Error::Placement {
            file: file.to_owned(),
            name,
        })?,
    };
    if let Some(scale) = simulation.nodes.scale
        && !(scale.is_finite() && scale > 0.0)
    {
        return Err(Error::Scale {
            file: file.to_owned(),
            scale,
        });
    }
    let name = simulation.name.unwrap_or_else(|| {
        Path::new(file)
            .file_stem()
            .map_or_else(|| file.to_owned(), |s| s.to_string_lossy().into_owned())
    });
    Ok(Configuration {
        name,
        queues,
        placement,
        nodes: simulation.nodes,
        file: file.to_owned(),
    })
}

/// The Queue manifests of `text` (each with the number of its document) and its Simulation
/// document, if any.
fn documents(text: &str, file: &str) -> Result<(Manifests, Option<Simulation>), Error> {
    let mut manifests = Vec::new();
    let mut simulation: Option<Simulation> = None;
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let at = |problem| Error::Document {
            file: file.to_owned(),
            document: i + 1,
            problem,
        };
        let value =
            serde_yaml::Value::deserialize(document).map_err(|e| at(DocumentProblem::Yaml(e)))?;
        if value.is_null() {
            continue;
        }
        match value.get("kind").and_then(serde_yaml::Value::as_str) {
            Some("Queue") => {
                let queue: api::Queue =
                    serde_yaml::from_value(value).map_err(|e| at(DocumentProblem::NotAQueue(e)))?;
                if queue.metadata.name.as_deref().is_none_or(str::is_empty) {
                    return Err(at(DocumentProblem::Unnamed));
                }
                manifests.push((i + 1, queue));
            }
            Some("Simulation") => {
                if simulation.is_some() {
                    return Err(at(DocumentProblem::SecondSimulation));
                }
                simulation = Some(
                    serde_yaml::from_value(value)
                        .map_err(|e| at(DocumentProblem::Simulation(e)))?,
                );
            }
            other => return Err(at(DocumentProblem::Kind(other.map(str::to_owned)))),
        }
    }
    Ok((manifests, simulation))
}

/// Queue manifests, each with the number of the document it was read from.
type Manifests = Vec<(usize, api::Queue)>;

/// The Queues of `manifests`, read from `file`, once every one passes the Queue webhook's
/// checks that need no live cluster, its parent looked up among them.
fn checked_queues(manifests: &[(usize, api::Queue)], file: &str) -> Result<Vec<Queue>, Error> {
    let listed = Listed(manifests);
    let mut queues = Vec::with_capacity(manifests.len());
    for (i, (document, queue)) in manifests.iter().enumerate() {
        let at = |problem| Error::Document {
            file: file.to_owned(),
            document: *document,
            problem,
        };
        let name = queue.metadata.name.as_deref().unwrap_or_default();
        if manifests[..i]
            .iter()
            .any(|(_, q)| q.metadata.name.as_deref() == Some(name))
        {
            return Err(at(DocumentProblem::SecondQueue(name.to_owned())));
        }
        check_without_cluster(queue, &listed).map_err(|d| at(DocumentProblem::Refused(d)))?;
        queues.push(convert::queue(queue).map_err(|e| at(DocumentProblem::Queue(e)))?);
    }
    Ok(queues)
}

/// A configuration's Queues as the Queue webhook looks queues up.
struct Listed<'a>(&'a [(usize, api::Queue)]);

impl QueueLookup for Listed<'_> {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>> {
        Ok(self
            .0
            .iter()
            .map(|(_, q)| q)
            .find(|q| q.metadata.name.as_deref() == Some(name))
            .map(|q| QueueView {
                name: name.to_owned(),
                state: q.spec.state,
                parent: q.spec.parent.clone().filter(|p| !p.is_empty()),
                namespaces: q.spec.namespace_selector.clone(),
            }))
    }

    fn children(&self, name: &str) -> Lookup<Vec<String>> {
        Ok(self
            .0
            .iter()
            .filter(|(_, q)| q.spec.parent.as_deref() == Some(name))
            .filter_map(|(_, q)| q.metadata.name.clone())
            .collect())
    }
}

impl Configuration {
    /// The configuration a recording (`file`) ran with: its `queues`, as `recorded`.
    pub fn recorded(queues: Vec<Queue>, file: &str) -> Configuration {
        Configuration {
            name: "recorded".to_owned(),
            queues,
            placement: Strategy::Binpack,
            nodes: NodeChanges::default(),
            file: file.to_owned(),
        }
    }

    /// The workload's `nodes` as this configuration changes them.
    pub fn nodes_of(&self, nodes: &[Node]) -> Result<Vec<Node>, Error> {
        let changes = &self.nodes;
        let file = || self.file.clone();
        for name in &changes.remove {
            if !nodes.iter().any(|n| &n.name == name) {
                return Err(Error::NoSuchNode {
                    file: file(),
                    name: name.clone(),
                });
            }
        }
        let mut out: Vec<Node> = nodes
            .iter()
            .filter(|n| !changes.remove.contains(&n.name))
            .cloned()
            .collect();
        if let Some(scale) = changes.scale {
            out = scaled(&out, scale);
        }
        let too_many = || Error::TooManyNodes { file: file() };
        if out.len() > MAX_NODES {
            return Err(too_many());
        }
        for (index, add) in changes.add.iter().enumerate() {
            let allocatable =
                convert::resources(&add.allocatable).map_err(|why| Error::Allocatable {
                    file: file(),
                    index,
                    why,
                })?;
            if out.len().saturating_add(add.count) > MAX_NODES {
                return Err(too_many());
            }
            out.extend((0..add.count).map(|n| Node {
                name: format!("{}-{n}", add.prefix),
                allocatable: allocatable.clone(),
                labels: add.labels.clone(),
                ..Node::default()
            }));
        }
        Ok(out)
    }

    /// What the engine runs for this configuration on the workload's `nodes` and `jobs`: its
    /// cluster and queues, and `settings` (serve's, with the what-if's flags) with its
    /// placement; the origin of virtual time is now. Refused when a job names a queue the
    /// configuration does not define.
    pub fn setup(
        &self,
        nodes: &[Node],
        jobs: &[Job],
        settings: claims::Settings,
        sample_every: i64,
        binds_per_second: Option<u32>,
    ) -> Result<Setup, Error> {
        let missing = self.missing_queues(jobs.iter().map(|j| j.queue.as_str()));
        if !missing.is_empty() {
            return Err(Error::MissingQueues {
                file: self.file.clone(),
                queues: missing,
            });
        }
        Ok(Setup {
            nodes: self.nodes_of(nodes)?,
            queues: self.queues.clone(),
            settings: claims::Settings {
                strategy: self.placement,
                ..settings
            },
            origin: std::time::Instant::now(),
            sample_every,
            binds_per_second,
        })
    }

    /// The queues the jobs name that this configuration does not define, in name order.
    fn missing_queues<'j>(&self, jobs: impl Iterator<Item = &'j str>) -> Vec<String> {
        let mut missing: Vec<String> = jobs
            .filter(|q| !self.queues.iter().any(|d| d.name == *q))
            .map(str::to_owned)
            .collect();
        missing.sort();
        missing.dedup();
        missing
    }
}

/// Each kind of node (same allocatable and labels) `scale` times as many, rounded down, with
/// at least one: copies are named after their model, `-x1`, `-x2` and so on.
fn scaled(nodes: &[Node], scale: f64) -> Vec<Node> {
    let mut kinds: Vec<(&Node, usize)> = Vec::new();
    for node in nodes {
        match kinds
            .iter_mut()
            .find(|(k, _)| k.allocatable == node.allocatable && k.labels == node.labels)
        {
            Some((_, count)) => *count += 1,
            None => kinds.push((node, 1)),
        }
    }
    let mut out = Vec::new();
    for (model, count) in kinds {
        let want = ((count as f64 * scale).floor() as usize).clamp(1, MAX_NODES + 1);
        let same: Vec<&Node> = nodes
            .iter()
            .filter(|n| n.allocatable == model.allocatable && n.labels == model.labels)
            .collect();
        out.extend(same.iter().take(want).map(|n| (*n).clone()));
        for copy in same.len()..want {
            out.push(Node {
                name: format!("{}-x{copy}", model.name),
                ..model.clone()
            });
        }
        if out.len() > MAX_NODES {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gangplank_core::model::Resources;

    const CONFIG: &str = r#"
apiVersion: scheduling.gangplank.dev/v1alpha1
kind: Queue
metadata: {name: research}
spec: {weight: 4, capability: {nvidia.com/gpu: "64"}}
---
apiVersion: simulate.gangplank.dev/v1alpha1
kind: Simulation
name: more-gpus
placement: spread
nodes:
  remove: [b]
  add:
    - {count: 2, prefix: new, allocatable: {cpu: "96", nvidia.com/gpu: "8"}}
"#;

    fn node(name: &str, cpu: i64) -> Node {
        Node {
            name: name.to_owned(),
            allocatable: Resources::from([("cpu", cpu * 1_000)]),
            ..Node::default()
        }
    }

    #[test]
    fn a_configuration_reads_its_queues_placement_and_node_changes() {
        let c = parse(CONFIG, "x.yaml").unwrap();
        assert_eq!(c.name, "more-gpus");
        assert_eq!(c.placement, Strategy::Spread);
        assert_eq!(c.queues[0].name, "research");
        assert_eq!(c.queues[0].weight, 4);
        let nodes = c.nodes_of(&[node("a", 8), node("b", 8)]).unwrap();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "new-0", "new-1"]);
        assert_eq!(nodes[1].allocatable.get("nvidia.com/gpu"), 8);
    }

    #[test]
    fn a_setup_for_jobs_of_queues_the_configuration_lacks_is_refused_naming_them() {
        let c = parse(CONFIG, "x.yaml").unwrap();
        let job = |queue: &str| Job {
            name: "j".into(),
            namespace: "ns".into(),
            queue: queue.into(),
            arrival_ms: 0,
            members: Vec::new(),
            min_member: 1,
            gang: false,
            priority: 0,
            runtime_ms: 1_000,
            runtimes_ms: Vec::new(),
            deleted_at_ms: None,
            expected_runtime: None,
            sub_groups: Vec::new(),
            labels: Vec::new(),
            constraints: Vec::new(),
        };
        let settings = crate::config::ServeArgs::defaults().gang_settings();
        let nodes = [node("a", 8), node("b", 8)];
        let jobs = [job("research"), job("web"), job("etl"), job("web")];
        let err = c.setup(&nodes, &jobs, settings, 10, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.yaml: the workload's jobs name queues the configuration does not define: etl, \
             web; add a Queue for each"
        );
        assert!(c.setup(&nodes, &jobs[..1], settings, 10, None).is_ok());
    }

    #[test]
    fn scaling_keeps_each_kind_of_node_in_proportion() {
        let nodes = [node("a", 8), node("b", 8), node("c", 16), node("d", 8)];
        let half = scaled(&nodes, 0.5);
        assert_eq!(half.len(), 2, "{half:?}");
        let double = scaled(&nodes, 2.0);
        assert_eq!(double.len(), 8);
        assert!(double.iter().any(|n| n.name == "c-x1"));
    }

    #[test]
    fn a_queue_the_cluster_would_refuse_is_refused_with_the_webhooks_words() {
        let queue = |name: &str, spec: &str| {
            format!("kind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n---\n")
        };
        let refused = |text: String| parse(&text, "x.yaml").unwrap_err().to_string();
        let err = refused(queue("a", "{weight: 0}"));
        assert!(
            err.contains(
                "document 1: the cluster would refuse this Queue: spec.weight: must be at least 1"
            ),
            "{err}"
        );
        let err = refused(queue(
            "a",
            "{guarantee: {cpu: '8'}, capability: {cpu: '4'}}",
        ));
        assert!(
            err.contains("spec.guarantee[cpu]: must not exceed"),
            "{err}"
        );
        let err = refused(queue("a", "{parent: nowhere}"));
        assert!(
            err.contains("spec.parent: queue \"nowhere\" does not exist"),
            "{err}"
        );
        let err = refused(queue("a", "{parent: b}") + &queue("b", "{parent: a}"));
        assert!(err.contains("cycle of parents"), "{err}");
        let err = refused(queue("a", "{}") + &queue("a", "{weight: 2}"));
        assert!(
            err.contains("document 2: metadata.name: a second Queue"),
            "{err}"
        );
        let c = parse(
            &(queue("team", "{parent: default}") + &queue("default", "{}")),
            "x.yaml",
        );
        assert_eq!(
            c.unwrap().queues.len(),
            2,
            "a parent defined in the file, or default"
        );
    }

    #[test]
    fn bad_documents_are_refused_naming_what_to_change() {
        let err = read(Path::new("no/such.yaml")).unwrap_err().to_string();
        assert!(
            err.starts_with("cannot read configuration no/such.yaml: "),
            "{err}"
        );
        let err = parse("kind: Deployment\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("document 1") && err.contains("Deployment"),
            "{err}"
        );
        let err = parse("kind: Simulation\nplacement: random\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("placement"), "{err}");
        let err = parse("kind: Simulation\nnodez: {}\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodez"), "{err}");
        let err = parse(
            "kind: Queue\nmetadata: {name: q}\nspec: {capability: {cpu: lots}}\n",
            "x.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("capability.cpu"), "{err}");
        let c = parse("kind: Simulation\nnodes: {remove: [zz]}\n", "x.yaml").unwrap();
        let err = c.nodes_of(&[node("a", 8)]).unwrap_err().to_string();
        assert!(err.contains("zz"), "{err}");
        let c = parse(
            "kind: Simulation\nnodes: {add: [{count: 100000, prefix: n, allocatable: {cpu: '1'}}]}\n",
            "x.yaml",
        )
        .unwrap();
        assert!(
            c.nodes_of(&[])
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        let c = parse(
            "kind: Simulation\nnodes: {add: [{count: 2, prefix: n, allocatable: {cpu: '1'}}]}\n",
            "x.yaml",
        )
        .unwrap();
        let full: Vec<Node> = (0..MAX_NODES).map(|i| node(&format!("w{i}"), 1)).collect();
        let err = c.nodes_of(&full).unwrap_err().to_string();
        assert!(
            err.contains("more than"),
            "nodes added past the bound: {err}"
        );
    }
}
