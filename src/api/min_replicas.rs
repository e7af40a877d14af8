//! The annotation `scheduling.gangplank.dev/min-replicas` on a workload whose replicas are the
//! instances of a gang of gangs: a JobSet's replicated jobs are its sub-groups, each Job of one
//! an instance needed whole (its pods carry JobSet's `replicatedjob-name` and `job-index`); a
//! LeaderWorkerSet's replicas (a leader and its workers, told apart by LWS's `group-index`) are
//! its one sub-group. The value names how many of each kind of replica the workload needs to
//! start (`prefill=2,decode=1`; a bare count for a workload of one kind, `2`); a kind it does not
//! name needs all its replicas. The
//! controller reads it into the PodGroup it makes for the workload (`subGroupPolicy`,
//! `crate::controller::workloads`) and the workload webhook refuses a value that does not fit
//! the spec when the workload is created (`crate::webhooks::workloads`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::labels::{MIN_REPLICAS_ANNOTATION, annotation_value};
use super::pod_group::SubGroupPolicy;
use gangplank_core::limits::{MAX_MEMBERS, MAX_MEMBERS_I32, MAX_SUB_GROUPS};

/// One kind of replica of a workload: a sub-group of its gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replicas {
    pub name: String,
    /// How many the spec asks for.
    pub count: u32,
    /// Pods of one replica, running at once.
    pub pods: u32,
    /// The label the workload's operator writes on the pods of these replicas alone; `None`
    /// when they are the workload's only kind.
    pub selector: Option<(&'static str, String)>,
    /// The label whose value tells one replica's pods from another's.
    pub instance_key: &'static str,
}

/// A workload's replicas as its spec gives them: `None` when it has none Gangplank knows,
/// `Some(Err(_))` when they cannot make a gang of gangs (they come in stages, the spec cannot be
/// read).
pub type Read = Option<Result<Vec<Replicas>, Problem>>;

/// The gang of gangs a workload's annotation asks for: its PodGroup's `minMember` and
/// `subGroupPolicy`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub min_member: i32,
    pub policy: Vec<SubGroupPolicy>,
}

/// Why the annotation cannot make a tree of the workload; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{0} has no replicas Gangplank can make a gang of gangs of; remove the annotation")]
    NotSupported(String),
    #[error(
        "its pods come in stages (a JobSet's dependsOn, a LeaderWorkerSet's startupPolicy LeaderReady), not as whole replicas; remove the annotation or that setting"
    )]
    InStages,
    #[error("the spec gives no replicas Gangplank can read (replicas, parallelism, completions)")]
    Unreadable,
    #[error(
        "the spec has {0} kinds of replicas (replicated jobs); a gang of gangs has at most {MAX_SUB_GROUPS}"
    )]
    TooMany(usize),
    #[error("{0:?} must be <name>=<count>, entries separated by commas, as in prefill=2,decode=1")]
    Entry(String),
    #[error("{0:?} names no kind of replica (replicated job) of the spec; name one of {1}")]
    Unknown(String, String),
    #[error("{0:?} is named twice; name each once")]
    Twice(String),
    #[error("{name}={count} must be from 1 to its {replicas} replicas")]
    OutOfRange {
        name: String,
        count: String,
        replicas: u32,
    },
    #[error("{0:?} runs no pods at once (parallelism or completions 0); give it at least one")]
    NoPods(String),
    #[error("the minimum is {0} pods, above the {MAX_MEMBERS} a gang may have")]
    TooBig(u64),
}

impl Problem {
    /// The field a denial names.
    pub fn field() -> String {
        format!("metadata.annotations[{MIN_REPLICAS_ANNOTATION}]")
    }
}

/// The tree the annotation on `meta` asks of a workload of `kind` whose replicas are
/// `replicas`; `None` when the workload carries no annotation.
pub fn tree(meta: &ObjectMeta, kind: &str, replicas: Read) -> Option<Result<Tree, Problem>> {
    let value = annotation_value(meta, MIN_REPLICAS_ANNOTATION)?;
    Some(match replicas {
        None => Err(Problem::NotSupported(kind.to_owned())),
        Some(Err(problem)) => Err(problem),
        Some(Ok(replicas)) => tree_of(value, &replicas),
    })
}

fn tree_of(value: &str, replicas: &[Replicas]) -> Result<Tree, Problem> {
    if replicas.len() > MAX_SUB_GROUPS as usize {
        return Err(Problem::TooMany(replicas.len()));
    }
    if let Some(idle) = replicas.iter().find(|r| r.pods == 0) {
        return Err(Problem::NoPods(idle.name.clone()));
    }
    let minimums = minimums(value, replicas)?;
    let mut min_member: u64 = 0;
    let policy = replicas
        .iter()
        .map(|r| {
            let min = minimums.get(r.name.as_str()).copied().unwrap_or(r.count);
            min_member += u64::from(min) * u64::from(r.pods);
            policy(r, min)
        })
        .collect();
    let min_member = i32::try_from(min_member)
        .ok()
        .filter(|m| *m <= MAX_MEMBERS_I32)
        .ok_or(Problem::TooBig(min_member))?;
    Ok(Tree { min_member, policy })
}

/// The minimum of each replica kind `value` names, checked against `replicas`; a bare count
/// names a workload's only kind.
fn minimums<'v>(
    value: &'v str,
    replicas: &'v [Replicas],
) -> Result<BTreeMap<&'v str, u32>, Problem> {
    let mut minimums = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, count) = match (entry.split_once('='), replicas) {
            (Some((n, c)), _) => (n.trim(), c.trim()),
            (None, [only]) => (only.name.as_str(), entry),
            (None, _) => return Err(Problem::Entry(entry.to_owned())),
        };
        let Some(of) = replicas.iter().find(|r| r.name == name) else {
            let names: Vec<&str> = replicas.iter().map(|r| r.name.as_str()).collect();
            return Err(Problem::Unknown(name.to_owned(), names.join(", ")));
        };
        let min = count
            .parse::<u32>()
            .ok()
            .filter(|m| (1..=of.count).contains(m))
            .ok_or_else(|| Problem::OutOfRange {
                name: name.to_owned(),
                count: count.to_owned(),
                replicas: of.count,
            })?;
        if minimums.insert(name, min).is_some() {
            return Err(Problem::Twice(name.to_owned()));
        }
    }
    if minimums.is_empty() {
        return Err(Problem::Entry(value.to_owned()));
    }
    Ok(minimums)
}

fn policy(replicas: &Replicas, min: u32) -> SubGroupPolicy {
    SubGroupPolicy {
        name: replicas.name.clone(),
        sub_group_size: i32::try_from(replicas.pods).unwrap_or(i32::MAX),
        min_sub_groups: i32::try_from(min).unwrap_or(i32::MAX),
        label_selector: replicas
            .selector
            .as_ref()
            .map(|(key, value)| LabelSelector {
                match_labels: Some(BTreeMap::from([((*key).to_owned(), value.clone())])),
                match_expressions: None,
            }),
        match_label_keys: vec![replicas.instance_key.to_owned()],
        topology_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(value: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(BTreeMap::from([(
                MIN_REPLICAS_ANNOTATION.to_owned(),
                value.to_owned(),
            )])),
            ..ObjectMeta::default()
        }
    }

    fn replicas(name: &str, count: u32, pods: u32) -> Replicas {
        Replicas {
            name: name.into(),
            count,
            pods,
            selector: Some(("role", name.into())),
            instance_key: "index",
        }
    }

    fn service() -> Read {
        Some(Ok(vec![
            replicas("prefill", 4, 2),
            replicas("decode", 2, 4),
            replicas("router", 1, 1),
        ]))
    }

    #[test]
    fn each_replicated_job_is_a_sub_group_of_whole_jobs_at_its_minimum_or_all_its_replicas() {
        let tree = tree(&annotated("prefill=2, decode=1"), "JobSet", service())
            .unwrap()
            .unwrap();
        assert_eq!(tree.min_member, 2 * 2 + 4 + 1);
        let sizes = crate::testing::sub_group_sizes(&tree.policy);
        assert_eq!(
            sizes,
            [("prefill", 2, 2), ("decode", 4, 1), ("router", 1, 1)]
        );
        let selector = tree.policy[1].label_selector.as_ref().unwrap();
        assert_eq!(
            selector.match_labels.as_ref().unwrap().get("role"),
            Some(&"decode".to_owned())
        );
        assert_eq!(tree.policy[1].match_label_keys, ["index"]);
    }

    #[test]
    fn a_workload_without_the_annotation_is_no_tree() {
        assert_eq!(tree(&ObjectMeta::default(), "JobSet", service()), None);
    }

    #[test]
    fn each_bad_value_is_refused_saying_what_to_change() {
        let problem = |value: &str| {
            tree(&annotated(value), "JobSet", service())
                .unwrap()
                .unwrap_err()
                .to_string()
        };
        assert!(problem("prefill").contains("must be <name>=<count>"));
        assert!(problem(" , ").contains("must be <name>=<count>"));
        assert!(problem("encode=1").contains("name one of prefill, decode, router"));
        assert!(problem("prefill=1,prefill=2").contains("named twice"));
        assert!(problem("prefill=5").contains("from 1 to its 4 replicas"));
        assert!(problem("prefill=0").contains("from 1 to its 4 replicas"));
        assert!(problem("prefill=two").contains("from 1 to its 4 replicas"));
    }

    #[test]
    fn workloads_of_no_replicas_or_in_stages_or_too_big_are_refused() {
        let refused = |kind: &str, replicas| {
            tree(&annotated("a=1"), kind, replicas)
                .unwrap()
                .unwrap_err()
        };
        assert_eq!(
            refused("PyTorchJob", None),
            Problem::NotSupported("PyTorchJob".into())
        );
        assert_eq!(
            refused("JobSet", Some(Err(Problem::InStages))),
            Problem::InStages
        );
        let many = (0..17).map(|i| replicas(&format!("r{i}"), 1, 1)).collect();
        assert_eq!(refused("JobSet", Some(Ok(many))), Problem::TooMany(17));
        let big = |min: &str| {
            let replicas = vec![replicas("a", 200, 100), replicas("b", 1, 1)];
            tree(&annotated(min), "JobSet", Some(Ok(replicas))).unwrap()
        };
        assert_eq!(big("a=150"), Err(Problem::TooBig(15_001)));
        assert_eq!(
            big("a=99").map(|t| t.min_member),
            Ok(9_901),
            "only a's minimum counts, not its 200 replicas"
        );
        let idle = vec![replicas("a", 1, 0)];
        assert_eq!(
            refused("JobSet", Some(Ok(idle))),
            Problem::NoPods("a".into())
        );
    }
}
