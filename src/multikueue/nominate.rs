//! What the dispatcher decides, as pure functions: whether MultiKueue is waiting for a
//! nomination ([`dispatchable`]), the gang to fit ([`member_sets`]), which workers to nominate
//! for one Workload, or why none ([`decide`]), and for a round's Workloads in turn, each
//! worker's room taken by the gangs nominated to it before ([`in_turn`]).

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use gangplank_core::model::State;
use gangplank_core::policy::Constraints;
use gangplank_core::policy::cluster_fit::{MemberSet, Placement, place_whole_gang};
use kube::ResourceExt;

use crate::api::kueue::KueueWorkload;
use crate::cache::constraints::constraints_of_spec;
use crate::cache::convert::{on_node, pod_requests};

/// The MultiKueueConfig of `workload`'s MultiKueue check, when MultiKueue waits for a
/// dispatcher to nominate workers for it: quota reserved on the manager, not finished or being
/// deleted, no worker chosen yet, and its MultiKueue check (one of `multikueue_checks`, check
/// name to MultiKueueConfig name) `Pending`.
pub fn dispatchable<'a>(
    workload: &KueueWorkload,
    multikueue_checks: &'a HashMap<String, String>,
) -> Option<&'a str> {
    if !workload.has_quota_reserved() || workload.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = workload.status.as_ref()?;
    if status.cluster_name.is_some() {
        return None;
    }
    status
        .admission_checks
        .iter()
        .filter(|c| c.state == "Pending")
        .find_map(|c| multikueue_checks.get(&c.name).map(String::as_str))
}

/// The gang of `workload`: per PodSet, what each pod requests on its node, how many pods the
/// reservation counts, and where they may run (`constraints`, which the caller keeps, one per
/// PodSet). Or why a PodSet cannot be read.
pub fn member_sets<'c>(
    workload: &KueueWorkload,
    constraints: &'c mut Vec<Constraints>,
) -> Result<Vec<MemberSet<'c>>, String> {
    let mut sized = Vec::new();
    constraints.clear();
    for (set, count) in workload.admitted_pod_sets() {
        let spec = set.template.spec.clone().unwrap_or_default();
        let requests = pod_requests(&spec)
            .map_err(|why| format!("PodSet {} cannot be read: {why}", set.name))?;
        sized.push((on_node(requests), count as usize));
        constraints.push(constraints_of_spec(&spec));
    }
    Ok(sized
        .into_iter()
        .zip(constraints.iter())
        .map(|((requests, count), constraints)| MemberSet {
            requests,
            count,
            constraints,
        })
        .collect())
}

/// Whether one worker can hold the whole gang now (where), or why not.
pub struct Verdict {
    pub worker: String,
    pub fits: Result<Placement, String>,
}

/// One worker's model for a round: its nodes and pods (or why it cannot be asked), and the
/// gangs held on it so far in the round.
pub struct Worker {
    pub state: Result<State, String>,
    pub held_for: Vec<String>,
}

impl Worker {
    pub fn new(state: Result<State, String>) -> Self {
        Worker {
            state,
            held_for: Vec::new(),
        }
    }

    /// Whether the gang of `sets` fits, or why not (naming the gangs whose room it holds).
    fn fits(&self, sets: &Result<Vec<MemberSet>, String>) -> Result<Placement, String> {
        let state = self.state.as_ref().map_err(Clone::clone)?;
        let sets = sets.as_ref().map_err(Clone::clone)?;
        place_whole_gang(state, sets).map_err(|misfit| match &self.held_for[..] {
            [] => misfit.to_string(),
            held => format!(
                "{misfit}, room being held for {} (nominated before it this round)",
                held.join(", ")
            ),
        })
    }
}

/// A Workload waiting for a nomination, with the workers its MultiKueueConfig lists.
pub struct Waiting<W> {
    pub workload: W,
    pub listed: Vec<String>,
}

/// Decides for each of `waiting` in the order Kueue's queues give them (higher priority first,
/// then the older), against `workers`' models (by name; an error says why a worker cannot be
/// asked). A gang's placement is held on every worker that can hold it (each is nominated) for the rest of the
/// round: MultiKueue copies it to each, and the first to admit it keeps it, so until a worker
/// shows its pods bound, the room it may take there is not offered to the gangs after it.
pub fn in_turn<W: Borrow<KueueWorkload>>(
    mut waiting: Vec<Waiting<W>>,
    workers: &mut HashMap<String, Worker>,
) -> Vec<(W, Decision)> {
    waiting.sort_by_cached_key(|w| {
        let w: &KueueWorkload = w.workload.borrow();
        (
            Reverse(w.spec.priority.unwrap_or(0)),
            w.metadata.creation_timestamp.clone(),
            w.namespace(),
            w.name_any(),
        )
    });
    let mut decided = Vec::with_capacity(waiting.len());
    for Waiting { workload, listed } in waiting {
        let w: &KueueWorkload = workload.borrow();
        let mut constraints = Vec::new();
        let sets = member_sets(w, &mut constraints);
        let verdicts: Vec<Verdict> = listed
            .iter()
            .map(|worker| Verdict {
                worker: worker.clone(),
                fits: workers.get(worker).map_or_else(
                    || Err("no MultiKueueCluster of that name".to_owned()),
                    |w| w.fits(&sets),
                ),
            })
            .collect();
        let owner = format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any());
        for verdict in &verdicts {
            if let (Ok(placement), Some(worker)) = (&verdict.fits, workers.get_mut(&verdict.worker))
                && let Ok(state) = &mut worker.state
            {
                placement.hold(state, &owner);
                worker.held_for.push(owner.clone());
            }
        }
        let nominated = w
            .status
            .as_ref()
            .map(|s| s.nominated_cluster_names.clone())
            .unwrap_or_default();
        decided.push((workload, decide(&nominated, &verdicts)));
    }
    decided
}

/// What to do for one Workload.
#[derive(Debug, PartialEq)]
pub struct Decision {
    /// The workers to nominate, when they differ from those nominated now.
    pub nominate: Option<Vec<String>>,
    /// Why the gang waits, when no worker can hold it now.
    pub waits: Option<String>,
}

/// The workers to nominate, given those `nominated` now and each worker's verdict: every
/// worker that can hold the whole gang now, and those nominated before (their copies may be
/// admitted as room frees there, and dropping one deletes its copy), in name order. When none
/// can, the nomination stays as it is and the decision says why, worker by worker.
pub fn decide(nominated: &[String], verdicts: &[Verdict]) -> Decision {
    let listed: BTreeSet<&str> = verdicts.iter().map(|v| v.worker.as_str()).collect();
    let fit: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.fits.is_ok())
        .map(|v| v.worker.as_str())
        .collect();
    if fit.is_empty() {
        let why = if verdicts.is_empty() {
            "its MultiKueueConfig lists no worker".to_owned()
        } else {
            let each: Vec<String> = verdicts
                .iter()
                .filter_map(|v| v.fits.as_ref().err().map(|e| format!("{}: {e}", v.worker)))
                .collect();
            format!("no worker can hold the whole gang now: {}", each.join("; "))
        };
        return Decision {
            nominate: None,
            waits: Some(why),
        };
    }
    let names: BTreeSet<&str> = fit
        .into_iter()
        .chain(nominated.iter().map(String::as_str))
        .filter(|name| listed.contains(name))
        .collect();
    let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
    Decision {
        nominate: (names != nominated).then_some(names),
        waits: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn verdict(worker: &str, fits: Result<(), &str>) -> Verdict {
        Verdict {
            worker: worker.into(),
            fits: fits
                .map(|()| Placement { members: vec![] })
                .map_err(str::to_owned),
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn only_the_workers_that_can_hold_the_whole_gang_are_nominated() {
        let verdicts = [
            verdict("worker-1", Err("cpu 64 needed, 40 free")),
            verdict("worker-2", Ok(())),
        ];
        let decision = decide(&[], &verdicts);
        assert_eq!(decision.nominate, Some(names(&["worker-2"])));
        assert_eq!(decision.waits, None);
        // Nominated already: nothing to write.
        assert_eq!(decide(&names(&["worker-2"]), &verdicts).nominate, None);
    }

    #[test]
    fn when_no_worker_can_hold_it_nothing_is_nominated_and_each_worker_says_why() {
        let verdicts = [
            verdict("worker-1", Err("cpu 96 needed, 64 free")),
            verdict("worker-2", Err("its nodes and pods are not read yet")),
        ];
        let decision = decide(&[], &verdicts);
        assert_eq!(decision.nominate, None);
        assert_eq!(
            decision.waits.as_deref(),
            Some(
                "no worker can hold the whole gang now: worker-1: cpu 96 needed, 64 free; worker-2: its nodes and pods are not read yet"
            )
        );
    }

    #[test]
    fn a_worker_nominated_before_keeps_its_copy_and_one_no_longer_listed_loses_it() {
        let verdicts = [
            verdict("worker-1", Err("cpu 64 needed, 40 free")),
            verdict("worker-2", Ok(())),
        ];
        let decision = decide(&names(&["worker-1", "worker-9"]), &verdicts);
        assert_eq!(decision.nominate, Some(names(&["worker-1", "worker-2"])));
        // None fits now: the nomination stays.
        let none = [verdict("worker-1", Err("full"))];
        assert_eq!(decide(&names(&["worker-1"]), &none).nominate, None);
    }

    fn workload(status: serde_json::Value) -> KueueWorkload {
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-1", "namespace": "ml"},
            "spec": {"podSets": [{"name": "main", "count": 4, "template": {"spec": {
                "nodeSelector": {"pool": "gpu"},
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "16"}}}]}}}]},
            "status": status,
        }))
        .unwrap()
    }

    fn reserved() -> serde_json::Value {
        json!([{"type": "QuotaReserved", "status": "True", "reason": "R", "message": "",
            "lastTransitionTime": "2026-12-07T06:00:00Z"}])
    }

    #[test]
    fn a_workload_waits_for_a_nomination_while_reserved_unplaced_and_its_check_pending() {
        let checks = HashMap::from([("mk".to_owned(), "config".to_owned())]);
        let pending = json!([{"name": "mk", "state": "Pending", "message": ""}]);
        let waiting = workload(json!({"conditions": reserved(), "admissionChecks": pending}));
        assert_eq!(dispatchable(&waiting, &checks), Some("config"));
        let placed = workload(json!({"conditions": reserved(), "admissionChecks": pending,
            "clusterName": "worker-2"}));
        assert_eq!(dispatchable(&placed, &checks), None);
        let unreserved = workload(json!({"conditions": [], "admissionChecks": pending}));
        assert_eq!(dispatchable(&unreserved, &checks), None);
        let ready = json!([{"name": "mk", "state": "Ready", "message": ""}]);
        let admitted = workload(json!({"conditions": reserved(), "admissionChecks": ready}));
        assert_eq!(dispatchable(&admitted, &checks), None);
    }

    #[test]
    fn a_workloads_gang_is_its_pod_sets_with_their_node_selectors() {
        let w = workload(json!({"conditions": reserved()}));
        let mut constraints = Vec::new();
        let sets = member_sets(&w, &mut constraints).unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].count, 4);
        assert_eq!(sets[0].requests.get("cpu"), 16_000);
        assert_eq!(sets[0].requests.get("pods"), 1);
        assert_eq!(
            sets[0].constraints.node_selector,
            [("pool".to_owned(), "gpu".to_owned())]
        );
    }

    /// A Workload of `count` pods of 16 CPUs, created at `created`, of `priority`.
    fn gang(name: &str, count: i32, priority: i32, created: &str) -> KueueWorkload {
        serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
            "spec": {"priority": priority, "podSets": [{"name": "main", "count": count,
                "template": {"spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "16"}}}]}}}]},
            "status": {"conditions": reserved()},
        }))
        .unwrap()
    }

    /// A worker of one node of `cpus` CPUs, nothing running.
    fn worker_of(cpus: i64) -> Worker {
        let mut state = State::default();
        state.apply_node(gangplank_core::model::Node {
            name: "n1".into(),
            allocatable: gangplank_core::model::Resources::from([
                ("cpu", cpus * 1_000),
                ("pods", 110),
            ]),
            ..Default::default()
        });
        Worker::new(Ok(state))
    }

    #[test]
    fn a_rounds_gangs_are_nominated_in_turn_none_counting_on_room_held_for_one_before_it() {
        let both = names(&["worker-1", "worker-2"]);
        let waiting = |gangs: Vec<KueueWorkload>| -> Vec<Waiting<KueueWorkload>> {
            gangs
                .into_iter()
                .map(|workload| Waiting {
                    workload,
                    listed: both.clone(),
                })
                .collect()
        };
        let workers = || {
            HashMap::from([
                ("worker-1".to_owned(), worker_of(64)),
                ("worker-2".to_owned(), worker_of(32)),
            ])
        };
        // Alone, the older gang of four fits worker-1.
        let alone = in_turn(
            waiting(vec![gang("old", 4, 0, "2026-12-07T06:00:00Z")]),
            &mut workers(),
        );
        assert_eq!(alone[0].1.nominate, Some(names(&["worker-1"])));
        // A gang of higher priority, newer, goes first: it fits both and is held on both, so
        // the older one is told why it waits instead of being sent where the room is taken.
        let round = in_turn(
            waiting(vec![
                gang("old", 4, 0, "2026-12-07T06:00:00Z"),
                gang("urgent", 2, 10, "2026-12-07T06:05:00Z"),
            ]),
            &mut workers(),
        );
        let decided: Vec<(String, &Decision)> =
            round.iter().map(|(w, d)| (w.name_any(), d)).collect();
        assert_eq!(decided[0].0, "urgent");
        assert_eq!(decided[0].1.nominate, Some(both.clone()));
        assert_eq!(decided[1].0, "old");
        assert_eq!(decided[1].1.nominate, None);
        assert_eq!(
            decided[1].1.waits.as_deref(),
            Some(
                "no worker can hold the whole gang now: \
                 worker-1: cpu 64 needed, 32 free, room being held for ml/urgent (nominated before it this round); \
                 worker-2: cpu 64 needed, 0 free, room being held for ml/urgent (nominated before it this round)"
            )
        );
    }
}
