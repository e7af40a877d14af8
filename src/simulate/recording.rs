//! A [`Recording`] of a live cluster as a [`Workload`] to replay, the queues it ran with, and
//! when each job started live; and [`fidelity`]: how closely a replay's starts follow those.
//!
//! Objects are read with the same conversions the live process applies to its watches
//! ([`crate::cache::convert`]). A job is a PodGroup with its pods (or a pod of a queue in no
//! group). Its arrival is its first object's creation; its members are its pods but those
//! deleted before they finished (evicted, then made again by their controller); its runtime the
//! longest a member ran; its live start when its `minMember`th pod was bound (pods' `PodScheduled`
//! condition). Times are in milliseconds: the recorder's own stamps ([`Stamps`]) where it saw the
//! stage within [`STAMP_AGREES`] of the whole second the API gives, the API's second otherwise
//! (an object made before the recording began, or seen late).

use std::collections::BTreeMap;
use std::sync::Arc;

use gangplank_core::model::{GroupKey, Pod, PodGroup, Queue};
use gangplank_core::policy::constraints::Constraints;
use gangplank_core::simulate::{Job, Outcome, millis_of, second_of};
use k8s_openapi::api::core::v1::Pod as ApiPod;
use serde::Serialize;

use super::Workload;
use super::not_modelled::NotModelled;
use super::record::{Recording, Stamps};
use crate::cache::constraints::constraints_of;
use crate::cache::{self, convert};

/// How far after the start of the API's whole second the recorder's stamp of the same stage may
/// come and still be taken for it: the second itself, and a second of watch delay.
pub const STAMP_AGREES: i64 = 2_000;

/// A time in Unix milliseconds.
type Millis = i64;

/// What a recording gives a simulation.
#[derive(Debug, Clone)]
pub struct Replay {
    pub workload: Workload,
    /// The queues as recorded: the configuration the live run had.
    pub queues: Vec<Queue>,
    /// Per job (in the workload's order): what happened to it live.
    pub live: Vec<Live>,
    /// The scheduler's throughput in the recording ([`throughput`]).
    pub binds_per_second: Option<u32>,
    /// What the pods replayed ask that the replay does not model.
    pub not_modelled: NotModelled,
}

/// What happened to one job live, as the fidelity compares it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// When it started, in seconds from the origin.
    pub start: Option<i64>,
    /// Its pods deleted before they finished (evicted, made again by their controller).
    pub evicted_pods: u32,
    /// What its pods ask that the replay does not model.
    pub not_modelled: Vec<&'static str>,
}

/// One pod of a job, as far as replaying goes.
struct Member<'r> {
    /// As recorded.
    object: &'r ApiPod,
    pod: Pod,
    /// Where it may run: its `nodeSelector`, required node affinity and tolerations.
    constraints: Arc<Constraints>,
    created: Millis,
    /// When Gangplank admitted it (its `admitted` annotation), in whole seconds.
    admitted: Option<i64>,
    bound: Option<Millis>,
    /// When its containers ended (Succeeded or Failed), or it was deleted.
    ended: Option<Millis>,
    finished: bool,
    deleted: Option<Millis>,
}

/// The time of a stage the API gives as the whole `second`, to the millisecond when the
/// recorder's `stamp` of it agrees ([`STAMP_AGREES`]).
fn precise(second: i64, stamp: Option<&k8s_openapi::jiff::Timestamp>) -> Millis {
    let start = millis_of(second);
    stamp
        .map(|t| t.as_millisecond())
        .filter(|&at| (start..start.saturating_add(STAMP_AGREES)).contains(&at))
        .unwrap_or(start)
}

/// Reads `recording`, the jobs of `namespaces` only unless it is empty; a pod, group, node or
/// queue that does not convert is an error naming it.
pub fn replay(
    recording: &Recording,
    source: &str,
    namespaces: &[String],
) -> Result<Replay, cache::Error> {
    let members = members_of(recording, namespaces)?;
    let specs = specs_of(recording)?;
    let arrivals: Vec<Millis> = members
        .iter()
        .map(|(key, pods)| {
            let spec = specs.get(key);
            arrival(pods, spec.map(|s| s.1), spec.map_or(1, |s| s.0.min_member))
        })
        .collect();
    let origin = arrivals
        .iter()
        .copied()
        .min()
        .unwrap_or(0)
        .min(recording.started.as_millisecond());
    let times = Times {
        origin,
        end: recording.ended.as_millisecond(),
    };
    let mut jobs = Vec::new();
    let mut live = Vec::new();
    let mut busy = Vec::new();
    let mut not_modelled = NotModelled::default();
    for ((key, pods), arrived) in members.into_iter().zip(arrivals) {
        let spec = specs.get(&key).map(|s| &s.0);
        let (job, mut lived) = job_of(&key, &pods, spec, arrived, times, &mut not_modelled);
        jobs.push(job);
        lived.start = lived.start.map(|t| second_of(t - origin));
        live.push(lived);
        busy.extend(
            pods.iter()
                .filter_map(|m| Some((m.admitted?, second_of(m.bound?))))
                .filter(|(admitted, bound)| bound >= admitted),
        );
    }
    let nodes = recording
        .nodes
        .iter()
        .map(convert::node)
        .collect::<Result<Vec<_>, _>>()?;
    let queues = recording
        .queues
        .iter()
        .map(convert::queue)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Replay {
        workload: Workload {
            source: source.to_owned(),
            nodes,
            jobs,
        },
        queues,
        live,
        binds_per_second: throughput(&mut busy),
        not_modelled,
    })
}

/// The recorded pods a replay runs (those of `namespaces`, unless it is empty; no stand-ins;
/// each of a group or a queue), by group.
fn members_of<'r>(
    recording: &'r Recording,
    namespaces: &[String],
) -> Result<BTreeMap<GroupKey, Vec<Member<'r>>>, cache::Error> {
    let mut members: BTreeMap<GroupKey, Vec<Member>> = BTreeMap::new();
    for recorded in &recording.pods {
        let pod = convert::pod(&recorded.object)?;
        let elsewhere = !namespaces.is_empty() && !namespaces.contains(&pod.namespace);
        if elsewhere
            || pod.stand_in_for.is_some()
            || (pod.pod_group.is_none() && pod.queue.is_none())
        {
            continue;
        }
        let key = GroupKey::of(&pod).unwrap_or_else(|| GroupKey::lone(&pod));
        let deleted = recorded.deleted.map(|t| t.as_millisecond());
        let finished = pod.phase.is_terminal() && !pod.disrupted;
        let seen: &Stamps = &recorded.seen;
        let ended = finished
            .then(|| terminated(&recorded.object))
            .flatten()
            .map(|second| precise(second, seen.ended.as_ref()))
            .or(deleted);
        members.entry(key).or_default().push(Member {
            object: &recorded.object,
            constraints: Arc::new(constraints_of(&recorded.object)),
            created: precise(pod.created, seen.created.as_ref()),
            admitted: admitted(&recorded.object),
            bound: bound(&recorded.object).map(|second| precise(second, seen.bound.as_ref())),
            ended,
            finished,
            deleted,
            pod,
        });
    }
    Ok(members)
}

/// The recorded PodGroups with their creation times, by key (the first seen of a key).
fn specs_of(recording: &Recording) -> Result<BTreeMap<GroupKey, (PodGroup, Millis)>, cache::Error> {
    let mut specs: BTreeMap<GroupKey, (PodGroup, Millis)> = BTreeMap::new();
    for recorded in &recording.pod_groups {
        let group = convert::pod_group(&recorded.object)?;
        let created = recorded
            .object
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(i64::MAX, |t| {
                precise(t.0.as_second(), recorded.seen.created.as_ref())
            });
        specs.entry(group.key.clone()).or_insert((group, created));
    }
    Ok(specs)
}

/// A replay's time points, in Unix milliseconds: its origin and the recording's end.
#[derive(Clone, Copy)]
struct Times {
    origin: Millis,
    end: Millis,
}

/// The job of group `key`'s recorded `pods` (its PodGroup `spec`, if any), which `arrived`,
/// and what happened to it live (its start, in Unix milliseconds: its `minMember`th pod bound);
/// what its members ask that a replay does not model is counted in `not_modelled`.
fn job_of(
    key: &GroupKey,
    pods: &[Member],
    spec: Option<&PodGroup>,
    arrived: Millis,
    times: Times,
    not_modelled: &mut NotModelled,
) -> (Job, Live) {
    let gang = pods[0].pod.pod_group.is_some();
    let kept: Vec<&Member> = pods
        .iter()
        .filter(|m| m.finished || m.deleted.is_none())
        .collect();
    let cancelled = kept.is_empty();
    let kept = if cancelled {
        pods.iter().collect()
    } else {
        kept
    };
    let min_member = spec.map_or(1, |s| s.min_member).min(kept.len() as u32);
    let mut starts: Vec<Millis> = pods.iter().filter_map(|m| m.bound).collect();
    starts.sort_unstable();
    let live_start = starts.get(min_member.max(1) as usize - 1).copied();
    let runtime = runtime_of(&kept, spec, arrived, times.end);
    let first = kept[0];
    let mut asked: Vec<&'static str> = kept
        .iter()
        .flat_map(|m| not_modelled.count(m.object))
        .collect();
    asked.sort_unstable();
    asked.dedup();
    let lived = Live {
        start: live_start,
        evicted_pods: (pods.len() - kept.len()) as u32,
        not_modelled: asked,
    };
    let job = Job {
        name: if gang {
            key.name.to_string()
        } else {
            first.pod.name.clone()
        },
        namespace: key.namespace.to_string(),
        queue: spec
            .map(|s| s.queue.clone())
            .or_else(|| first.pod.queue.clone())
            .unwrap_or_default(),
        arrival_ms: arrived - times.origin,
        members: kept.iter().map(|m| m.pod.requests.clone()).collect(),
        min_member: min_member.max(1),
        gang,
        priority: first.pod.priority,
        runtimes_ms: kept
            .iter()
            .map(|m| match (m.bound, m.finished) {
                (Some(bound), true) => m.ended.unwrap_or(times.end) - bound,
                _ => runtime,
            })
            .map(|r| r.max(1_000))
            .collect(),
        runtime_ms: runtime,
        deleted_at_ms: cancelled
            .then(|| pods.iter().filter_map(|m| m.deleted).max())
            .flatten()
            .map(|t| t - times.origin),
        expected_runtime: spec.and_then(|s| s.expected_runtime),
        sub_groups: spec.map(|s| s.sub_groups.clone()).unwrap_or_default(),
        constraints: kept.iter().map(|m| m.constraints.clone()).collect(),
        labels: kept.iter().map(|m| m.pod.labels.clone()).collect(),
    };
    (job, lived)
}

/// How long a job of `kept` members runs once bound, in milliseconds: as long as its finished
/// members ran; members still running at the recording's `end` say only how long it is at
/// least, so the owner's estimate (`spec`'s expected runtime) goes first; at least 1 s.
fn runtime_of(kept: &[&Member], spec: Option<&PodGroup>, arrived: Millis, end: Millis) -> Millis {
    let ran = |finished: bool| {
        kept.iter()
            .filter(|m| m.finished == finished)
            .filter_map(|m| Some(m.ended.unwrap_or(end) - m.bound?))
            .max()
    };
    let expected = spec
        .and_then(|s| s.expected_runtime)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    ran(true)
        .or(expected)
        .or_else(|| ran(false))
        .unwrap_or(end - arrived)
        .max(1_000)
}

/// The scheduler's throughput in a recording, from each pod's (admitted, bound) seconds: the
/// pods bound per second over the stretch that placed the most pods, a stretch being two
/// seconds or more in which some admitted pod was not bound yet. `None` when there is none.
fn throughput(pods: &mut [(i64, i64)]) -> Option<u32> {
    pods.sort_unstable();
    let mut best: Option<(usize, f64)> = None;
    let mut i = 0;
    while i < pods.len() {
        let (start, mut end) = pods[i];
        let mut j = i + 1;
        while j < pods.len() && pods[j].0 <= end {
            end = end.max(pods[j].1);
            j += 1;
        }
        let length = end - start;
        if length >= 2 && best.is_none_or(|(pods, _)| j - i > pods) {
            best = Some((j - i, (j - i) as f64 / length as f64));
        }
        i = j;
    }
    best.map(|(_, rate)| rate.ceil().clamp(1.0, f64::from(u32::MAX)) as u32)
}

/// When Gangplank admitted the pod: its `admitted` annotation, an RFC 3339 time.
fn admitted(pod: &ApiPod) -> Option<i64> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(crate::api::labels::ADMITTED_ANNOTATION)?
        .parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// The job's arrival: when as many of its pods existed as its gang needs (`quorum`), or its
/// PodGroup was created, whichever came later: before that, admission had nothing to admit.
fn arrival(pods: &[Member], group_created: Option<Millis>, quorum: u32) -> Millis {
    let mut created: Vec<Millis> = pods.iter().map(|m| m.created).collect();
    created.sort_unstable();
    let index = (quorum.max(1) as usize)
        .min(created.len())
        .saturating_sub(1);
    created
        .get(index)
        .copied()
        .into_iter()
        .chain(group_created)
        .max()
        .unwrap_or(0)
}

/// When the pod was bound: its `PodScheduled` condition turning True.
fn bound(pod: &ApiPod) -> Option<i64> {
    let status = pod.status.as_ref()?;
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second())
}

/// When the last of the pod's containers ended.
fn terminated(pod: &ApiPod) -> Option<i64> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0.as_second())
        .max()
}

/// How a replay's starts compare with the live ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fidelity {
    /// Jobs that started both live and in the replay.
    pub compared: usize,
    /// Pairs of jobs started in one order live (a second or more apart) and the other in the
    /// replay.
    pub order_swaps: Vec<(String, String)>,
    /// Jobs whose replayed start is further from the live one than allowed: 5 s or 10% of the
    /// live wait, whichever is larger.
    pub off: Vec<StartOff>,
    /// Jobs that started on one side only.
    pub one_sided: Vec<String>,
    /// The largest difference between a replayed and a live start, in seconds.
    pub worst_seconds: i64,
    /// Per job named above, why it parted from the live run, as far as the replay can tell.
    pub causes: BTreeMap<String, Vec<String>>,
}

/// A job whose replayed start is off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartOff {
    pub job: String,
    pub live_wait: i64,
    pub replay_wait: i64,
    pub allowed: i64,
}

impl Fidelity {
    pub fn holds(&self) -> bool {
        self.order_swaps.is_empty() && self.off.is_empty() && self.one_sided.is_empty()
    }
}

/// How the fidelity names `job`: namespace/name.
fn named(job: &Job) -> String {
    format!("{}/{}", job.namespace, job.name)
}

/// Compares `outcome`, the replay of `jobs`, with what happened to them `live`.
pub fn fidelity(jobs: &[Job], live: &[Live], outcome: &Outcome) -> Fidelity {
    let name = |j: usize| named(&jobs[j]);
    let mut both = Vec::new();
    let mut out = Fidelity {
        compared: 0,
        order_swaps: Vec::new(),
        off: Vec::new(),
        one_sided: Vec::new(),
        worst_seconds: 0,
        causes: BTreeMap::new(),
    };
    for (j, job) in jobs.iter().enumerate() {
        match (live[j].start, outcome.jobs[j].started) {
            (Some(l), Some(r)) => {
                both.push((j, l, r));
                let live_wait = l - job.arrival();
                let allowed = 5.max(live_wait / 10);
                out.worst_seconds = out.worst_seconds.max((r - l).abs());
                if (r - l).abs() > allowed {
                    out.off.push(StartOff {
                        job: name(j),
                        live_wait,
                        replay_wait: r - job.arrival(),
                        allowed,
                    });
                }
            }
            (None, None) => {}
            _ => out.one_sided.push(name(j)),
        }
    }
    out.compared = both.len();
    for (i, &(a, live_a, replay_a)) in both.iter().enumerate() {
        for &(b, live_b, replay_b) in &both[i + 1..] {
            if (live_a < live_b && replay_a > replay_b) || (live_b < live_a && replay_b > replay_a)
            {
                out.order_swaps.push((name(a), name(b)));
            }
        }
    }
    out.causes = causes(jobs, live, outcome, &out);
    out
}

/// Why each job that `f` names parted from the live run (off, on one side only, or in another
/// order than a job that is neither), as far as the replay can tell: its
/// pods evicted another number of times, what its pods ask that the replay does not model, or
/// else the first job to part (by its live start, else its arrival), which it followed; the
/// first to part with no cause of its own has none the replay can name.
fn causes(
    jobs: &[Job],
    live: &[Live],
    outcome: &Outcome,
    f: &Fidelity,
) -> BTreeMap<String, Vec<String>> {
    let name = |j: usize| named(&jobs[j]);
    let mut named: std::collections::BTreeSet<String> = f
        .off
        .iter()
        .map(|o| o.job.clone())
        .chain(f.one_sided.iter().cloned())
        .collect();
    // A pair in the other order is the off job's doing when one of the two is off.
    let swapped: Vec<String> = f
        .order_swaps
        .iter()
        .filter(|(a, b)| !named.contains(a) && !named.contains(b))
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    named.extend(swapped);
    let mut parted: Vec<usize> = (0..jobs.len())
        .filter(|&j| named.contains(&name(j)))
        .collect();
    parted.sort_by_key(|&j| (live[j].start.unwrap_or(i64::MAX), jobs[j].arrival_ms));
    let first = parted.first().copied();
    let mut out = BTreeMap::new();
    for &j in &parted {
        let mut reasons = Vec::new();
        let replayed = outcome.jobs[j].evicted_pods;
        if live[j].evicted_pods != replayed {
            reasons.push(format!(
                "{} of its pods evicted live, {replayed} in the replay",
                live[j].evicted_pods
            ));
        }
        if !live[j].not_modelled.is_empty() {
            reasons.push(format!(
                "its pods ask what the replay does not model: {}",
                live[j].not_modelled.join(", ")
            ));
        }
        if reasons.is_empty() {
            reasons.push(match first {
                Some(first) if first != j => {
                    format!("it follows {}, which parted first", name(first))
                }
                _ => "none the replay can name".to_owned(),
            });
        }
        out.insert(name(j), reasons);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gangplank_core::simulate::JobOutcome;

    fn job(name: &str, arrival: i64) -> Job {
        Job {
            name: name.to_owned(),
            namespace: "ns".to_owned(),
            queue: "q".to_owned(),
            arrival_ms: arrival * 1_000,
            members: Vec::new(),
            min_member: 1,
            gang: true,
            priority: 0,
            runtime_ms: 10_000,
            runtimes_ms: Vec::new(),
            deleted_at_ms: None,
            expected_runtime: None,
            sub_groups: Vec::new(),
            constraints: Vec::new(),
            labels: Vec::new(),
        }
    }

    /// What happened live: only starts.
    fn started(starts: &[Option<i64>]) -> Vec<Live> {
        starts
            .iter()
            .map(|&start| Live {
                start,
                ..Live::default()
            })
            .collect()
    }

    fn outcome(starts: &[Option<i64>]) -> Outcome {
        Outcome {
            jobs: starts
                .iter()
                .map(|s| JobOutcome {
                    started: *s,
                    ..JobOutcome::default()
                })
                .collect(),
            ..Outcome::default()
        }
    }

    #[test]
    fn a_stamp_gives_the_millisecond_only_when_it_agrees_with_the_apis_second() {
        let at = |t: &str| t.parse::<k8s_openapi::jiff::Timestamp>().expect("a time");
        let second = at("2026-12-07T10:00:00Z").as_second();
        let start = second * 1_000;
        let inside = at("2026-12-07T10:00:00.250Z");
        assert_eq!(precise(second, Some(&inside)), start + 250);
        // Seen a second late (the watch's delay): still that stage.
        let late = at("2026-12-07T10:00:01.900Z");
        assert_eq!(precise(second, Some(&late)), start + 1_900);
        // Seen long after (listed when the recording began), or before: the API's second.
        let listed = at("2026-12-07T10:05:00.100Z");
        assert_eq!(precise(second, Some(&listed)), start);
        let before = at("2026-12-07T09:59:59.900Z");
        assert_eq!(precise(second, Some(&before)), start);
        assert_eq!(precise(second, None), start);
    }

    #[test]
    fn a_start_within_5_s_or_a_tenth_of_the_live_wait_holds() {
        let jobs = [job("a", 0), job("b", 0)];
        // b waited 100 s live: 10 s of tolerance; a waited 0 s: 5 s.
        let live = started(&[Some(0), Some(100)]);
        assert!(fidelity(&jobs, &live, &outcome(&[Some(5), Some(110)])).holds());
        let f = fidelity(&jobs, &live, &outcome(&[Some(6), Some(111)]));
        assert_eq!(f.off.len(), 2);
        assert_eq!(f.worst_seconds, 11);
    }

    #[test]
    fn jobs_started_in_the_other_order_are_named_unless_live_started_them_in_one_second() {
        let jobs = [job("a", 0), job("b", 0), job("c", 0)];
        let live = started(&[Some(10), Some(12), Some(12)]);
        let f = fidelity(&jobs, &live, &outcome(&[Some(13), Some(11), Some(11)]));
        assert_eq!(f.order_swaps.len(), 2, "{f:?}");
        let f = fidelity(&jobs, &live, &outcome(&[Some(10), Some(13), Some(12)]));
        assert!(
            f.order_swaps.is_empty(),
            "b and c started in the same second live: {f:?}"
        );
        // None of them is off: each of a swapped pair is named, the first to part without
        // a cause of its own.
        let f = fidelity(&jobs, &live, &outcome(&[Some(13), Some(11), Some(11)]));
        assert_eq!(f.causes["ns/a"], ["none the replay can name"]);
        assert_eq!(f.causes["ns/b"], ["it follows ns/a, which parted first"]);
    }

    #[test]
    fn a_job_that_started_on_one_side_only_fails_fidelity() {
        let jobs = [job("a", 0)];
        let f = fidelity(&jobs, &started(&[Some(3)]), &outcome(&[None]));
        assert_eq!(f.one_sided, vec!["ns/a".to_owned()]);
        assert!(!f.holds());
    }

    #[test]
    fn each_job_that_parted_is_given_its_cause_or_the_job_it_followed() {
        let jobs = [job("a", 0), job("b", 0), job("c", 0), job("d", 0)];
        let mut live = started(&[Some(10), Some(20), Some(30), Some(40)]);
        // b's pods were evicted twice live, never in the replay; d asked for pod affinity.
        live[1].evicted_pods = 2;
        live[3].not_modelled = vec!["pod affinity"];
        let f = fidelity(
            &jobs,
            &live,
            &outcome(&[Some(10), Some(60), Some(70), Some(90)]),
        );
        let why = |job: &str| f.causes[job].join("; ");
        assert!(!f.causes.contains_key("ns/a"), "{f:?}");
        assert_eq!(why("ns/b"), "2 of its pods evicted live, 0 in the replay");
        assert_eq!(why("ns/c"), "it follows ns/b, which parted first");
        assert_eq!(
            why("ns/d"),
            "its pods ask what the replay does not model: pod affinity"
        );
        let g = fidelity(
            &jobs,
            &started(&[Some(10), Some(20), Some(30), Some(40)]),
            &outcome(&[Some(10), Some(60), Some(70), Some(40)]),
        );
        assert_eq!(g.causes["ns/b"], ["none the replay can name"]);
        assert_eq!(g.causes["ns/c"], ["it follows ns/b, which parted first"]);
    }

    #[test]
    fn a_recorded_pods_node_selector_and_tolerations_go_with_it_and_what_is_not_modelled_is_counted()
     {
        let pod: ApiPod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns", "uid": "u1",
                "creationTimestamp": "2026-12-07T10:00:00Z",
                "labels": { crate::api::labels::QUEUE_LABEL: "q" }
            },
            "spec": {
                "containers": [{ "name": "c", "resources": { "requests": { "cpu": "1" } } }],
                "nodeSelector": { "gpu": "a100" },
                "tolerations": [{ "key": "dedicated", "operator": "Exists" }],
                "affinity": { "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        { "topologyKey": "kubernetes.io/hostname" }
                    ]
                } }
            }
        }))
        .expect("a pod");
        let at = |t: &str| t.parse::<k8s_openapi::jiff::Timestamp>().expect("a time");
        let recorded = Recording {
            started: at("2026-12-07T10:00:00Z"),
            ended: at("2026-12-07T10:10:00Z"),
            nodes: Vec::new(),
            queues: Vec::new(),
            pod_groups: Vec::new(),
            pods: vec![super::super::record::Recorded {
                object: pod,
                deleted: None,
                seen: Stamps::default(),
            }],
        };
        let replay = replay(&recorded, "test", &[]).expect("it replays");
        let job = &replay.workload.jobs[0];
        let constraints = job.constraints_of(0).expect("the pod's constraints");
        assert_eq!(
            constraints.node_selector,
            [("gpu".to_owned(), "a100".to_owned())]
        );
        assert_eq!(constraints.tolerations.len(), 1);
        assert_eq!(
            replay.not_modelled.text(),
            "Not modelled, so replayed as if not asked: pod anti-affinity (1 pod).\n"
        );
    }
}
