//! The admission loop: releases waiting pods (removes Gangplank's scheduling gate) group by
//! group, in fair-share order and within queue quotas, as [`plan::decide`] says, and exports
//! each queue's deserved share, allocation and waiting groups as gauges.
//!
//! The mutating webhook gates every pod of a group or queue at creation, so the scheduler
//! does not see a gang's pods one by one as they trickle in; this loop lets a gang through as
//! a whole once it is complete. It wakes on every cache change (at most every
//! [`MIN_PASS_INTERVAL`]) and at least every [`MAX_PASS_INTERVAL`], runs one pass
//! ([`gangplank_core::admit::pass()`], the one the simulator runs) on a snapshot of the cache
//! (a consistent view that holds no lock), and patches the pods. After a pass that
//! left nothing waiting ([`is_quiet`]), only a change that may want a decision wakes it
//! ([`Cache::arrived`]: a new or gated pod, a node, PodGroup or Queue), not the binds and
//! status updates of placed pods.
//!
//! Each patch is a JSON patch that first tests that the pod's gates are still the ones the
//! decision saw, then writes them without Gangplank's gate (and, for a group with a
//! `topologyKey`, adds the chosen domain to the pod's `nodeSelector`, which the API server
//! allows only while the pod is gated): a pod changed meanwhile is left
//! for the next pass instead of being overwritten. A pod patched recently is not patched again
//! until the cache has caught up or [`RETRY_AFTER`] has passed, so a slow watch does not cause
//! a storm of duplicate patches; meanwhile the pass counts it as released
//! ([`gangplank_core::admit::groups::Groups::of`]), so its room is not handed to another
//! group. Only the gate is touched: releasing is idempotent and safe to repeat after a
//! restart.
//!
//! An admission with room kept for members still to come (ahead of its members, or on its
//! `minResources`: `gangplank_core::model::owed`) is recorded on the PodGroup, in the
//! admitted-ahead annotation, after the pass's releases. Until a snapshot shows that
//! annotation, the loop's own record of the admission ([`Kept`], of which this loop is the one
//! writer, as of `recently`, its record of the gate removals not shown yet) stands in for it in
//! every pass: however late the watch, a pass counts the room every earlier pass kept, so
//! admissions made in a burst never keep more than their queue's capability. The record ends
//! once the snapshot shows the annotation, the PodGroup is gone or the admission lapsed; an
//! annotation whose write failed is written again at the next pass. Members that come gated
//! into such room (the webhook lets them in ungated only once its snapshot shows the
//! admission, with `--admit-on-arrival` and on the leader) are released by the next pass into
//! that room, without being weighed again (`Decision::into_kept_room`).
//!
//! After each pass the loop records in the ledger the head's reservation and the groups lent
//! room in it ([`crate::cache::LedgerWriter::hold`], [`gangplank_core::admit::after_pass`]); why the
//! reservation is held as a gang claim: `docs/decisions/admission-pass.md`.
//!
//! After each pass, [`evictions`] evicts the gangs that [`gangplank_core::admit::reclaim`]
//! picks: of queues above their deserved share when a queue below its share has groups that
//! wait for room, or of lower priority in a queue whose group of higher priority waits.
//!
//! On a cluster that can grow (`--node-autoscaling`), [`stand_ins`] deletes the stand-in pods
//! no gang needs before the pass's releases and creates those growing gangs lack after them.
//!
//! Each pass's decision and reclaim's lines are [`published`] for the controller's statuses;
//! groups lent room in the head's reservation get a `Backfilled` Event ([`backfills`]).
//!
//! Every write (gate removals, admitted-ahead annotations, evictions, Events) goes through
//! clients fenced by the leader Lease ([`crate::fence`]): once this replica may no longer write
//! as the leader, a pass in progress sends nothing more, and a pass that begins then makes no
//! write at all.

pub mod backfills;
pub mod evictions;
pub mod published;
pub mod stand_ins;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::PodGroup;
use crate::api::labels::{self, ADMISSION_GATE};
use crate::cache::Cache;
use crate::events::{Limiter, Publisher};
use crate::fence::{self, Fence};
use crate::health::Heartbeat;
use crate::metrics;
use gangplank_core::admit::groups::Unshown;
use gangplank_core::admit::kept::Kept;
use gangplank_core::admit::plan::{self, PodRef};
use gangplank_core::admit::{Evicting, Passed, pass};
use gangplank_core::model::GroupKey;

pub use gangplank_core::admit::MIN_PASS_INTERVAL;
/// Longest time between two passes when nothing changes.
pub const MAX_PASS_INTERVAL: Duration = Duration::from_secs(5);
/// How long a patched pod is left alone while the cache catches up.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// Gate removals in flight at once. A pass can admit thousands of pods; sent all at once they
/// overflow the API server's priority-and-fairness queues, which answer 429, and the client
/// retries only after a backoff.
pub const RELEASES_IN_FLIGHT: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to release pod {namespace}/{name}: {why}")]
    Release {
        namespace: String,
        name: String,
        why: kube::Error,
    },
    #[error(
        "failed to record that PodGroup {group} is admitted with room kept for its members: {why}"
    )]
    AdmitAhead { group: String, why: kube::Error },
}

/// The clients the loop writes with, and the fence they ask ([`crate::fence`]).
pub struct Clients {
    /// Gate removals, admitted-ahead annotations, Events.
    pub writes: Client,
    /// A client that does not retry HTTP 429 (see [`evictions::Reclaimer::new`]).
    pub evictions: Client,
    /// The fence both clients ask before each write: the loop asks it too before a pass's
    /// writes, so a pass that begins after it closed sends nothing.
    pub fence: Fence,
}

/// Runs admission passes until `shutdown`, publishing each one's outcome in `published` and
/// beating `heartbeat` each time it wakes (`crate::health`).
pub async fn run(
    clients: Clients,
    stand_ins: Option<stand_ins::StandInTemplate>,
    cache: Cache,
    published: published::Published,
    heartbeat: std::sync::Arc<Heartbeat>,
    shutdown: CancellationToken,
) {
    let Clients {
        writes: client,
        evictions,
        fence,
    } = clients;
    let ledger = cache.ledger();
    let mut recently: HashMap<String, Instant> = HashMap::new();
    let mut kept = Kept::new();
    let mut reclaimer = evictions::Reclaimer::new(evictions);
    let mut stand_ins = stand_ins.map(|s| stand_ins::StandIns::new(client.clone(), s));
    let mut held: Option<plan::Hold> = None;
    let publisher = Publisher::new(client.clone());
    let mut told = Limiter::default();
    let mut quiet = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = cache.changed(), if !quiet => {}
            _ = cache.arrived() => {}
            _ = tokio::time::sleep(MAX_PASS_INTERVAL) => {}
        }
        heartbeat.beat();
        if !cache.is_ready() {
            continue;
        }
        ::metrics::counter!(metrics::ADMISSION_PASSES_TOTAL).increment(1);
        let now = Instant::now();
        recently.retain(|_, at| now.duration_since(*at) < RETRY_AFTER);
        // On a snapshot: the pass and the plan never hold the cache's lock, so filter and
        // bind calls never wait for them.
        let state = cache.snapshot();
        reclaimer.settle(&state, now);
        let wall = crate::clock::unix_now();
        kept.forget_shown(&state, wall);
        let unshown = Unshown {
            released: &|uid| recently.contains_key(uid),
            kept: &kept,
        };
        let evicting = Evicting {
            evicting: &|uid| reclaimer.is_evicting(uid),
            refused: &|group| reclaimer.is_refused(group),
        };
        let Passed {
            mut decision,
            mut reclaims,
        } = pass(&state, unshown, evicting, wall);
        let backfilled = backfills::events(&state, &decision, &mut told, now);
        drop(state);
        observe(&decision);
        ledger.hold(held.as_ref(), &decision, now.into_std());
        held = decision.hold.clone();
        let settled = is_quiet(&decision);
        let due = due(&decision, &recently);
        let made = decision.admitted_with_room_kept();
        let grown = growth_of(&mut decision);
        published.publish(published::PassOutcome {
            decision,
            reclaim_waiting: std::mem::take(&mut reclaims.waiting),
        });
        if let Err(closed) = fence.check() {
            tracing::warn!(reason = closed.0.as_str(), "admission: {closed}");
            quiet = false;
            tokio::time::sleep(MIN_PASS_INTERVAL).await;
            continue;
        }
        if let Some(stand_ins) = &mut stand_ins {
            stand_ins.clear(&grown, &ledger).await;
        }
        for pod in &due {
            recently.insert(pod.uid.clone(), now);
        }
        kept.note(made, wall);
        release_all(&client, due).await;
        record_kept(&client, &mut kept).await;
        for event in &backfilled {
            if let Err(e) = publisher.publish(event).await {
                tracing::warn!(error = %e, "admission");
            }
        }
        if let Some(stand_ins) = &mut stand_ins {
            stand_ins.ask(&grown, &ledger).await;
        }
        reclaimer.execute(reclaims).await;
        quiet = settled && reclaimer.is_idle();
        tokio::time::sleep(MIN_PASS_INTERVAL).await;
    }
}

/// Exports what a pass left waiting and whether the door is open, and logs what it admitted
/// (at debug level).
fn observe(decision: &plan::Decision) {
    ::metrics::gauge!(metrics::ADMISSION_WAITING_GROUPS).set(decision.waiting.len() as f64);
    ::metrics::gauge!(metrics::ADMISSION_DOOR_OPEN)
        .set(f64::from(u8::from(decision.door.is_some())));
    if tracing::enabled!(tracing::Level::DEBUG) {
        let admitted: Vec<String> = decision
            .admit
            .iter()
            .flat_map(|a| &a.pods)
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect();
        tracing::debug!(?admitted, hold = ?decision.hold, "admission pass");
    }
}

/// The pods whose gates `decision` removes (those it admits and those it releases into kept
/// room), but for those patched `recently`.
fn due(decision: &plan::Decision, recently: &HashMap<String, Instant>) -> Vec<PodRef> {
    decision
        .admit
        .iter()
        .flat_map(|a| &a.pods)
        .chain(&decision.into_kept_room)
        .filter(|p| !recently.contains_key(&p.uid))
        .cloned()
        .collect()
}

/// The growth part of `decision` (what stand-ins to ask for and clear), taken out of it.
fn growth_of(decision: &mut plan::Decision) -> plan::Decision {
    plan::Decision {
        grow: std::mem::take(&mut decision.grow),
        unwanted_stand_ins: std::mem::take(&mut decision.unwanted_stand_ins),
        growth_timed_out: std::mem::take(&mut decision.growth_timed_out),
        ..plan::Decision::default()
    }
}

/// Removes the gates of `due`, a few at a time, counting the releases; a fenced refusal (this
/// replica may no longer write as the leader) is logged once for all.
async fn release_all(client: &Client, due: Vec<PodRef>) {
    let results: Vec<_> = stream::iter(due)
        .map(|p| async move { release(client, &p).await })
        .buffer_unordered(RELEASES_IN_FLIGHT)
        .collect()
        .await;
    let mut fenced = 0;
    for result in results {
        match result {
            Ok(()) => ::metrics::counter!(metrics::ADMISSION_RELEASED_PODS_TOTAL).increment(1),
            Err(Error::Release { why, .. }) if fence::refused(&why) => fenced += 1,
            Err(e) => tracing::warn!(error = %e, "admission"),
        }
    }
    if fenced > 0 {
        tracing::warn!(
            pods = fenced,
            "admission: gates not removed: this replica may no longer write as the leader"
        );
    }
}

/// Whether a pass left nothing to do but wait for a new pod or a change of configuration:
/// it admitted nothing, released no member into kept room, left nothing waiting and holds no
/// reservation. A placed pod's updates
/// and a pod's deletion then give the next pass nothing to decide, so the loop waits for
/// [`Cache::arrived`] instead of every change.
fn is_quiet(decision: &plan::Decision) -> bool {
    decision.admit.is_empty()
        && decision.into_kept_room.is_empty()
        && decision.waiting.is_empty()
        && decision.hold.is_none()
}

/// Writes each queue's deserved share, allocation and waiting groups at the latest pass in
/// `published` (nothing before the first pass): the gauges of
/// [`metrics::FROM_STATE`], so a deleted queue's series end with it.
pub fn queue_series(published: &published::Published, out: &mut String) {
    let Some(outcome) = published.latest() else {
        return;
    };
    let queues = &outcome.decision.queues;
    // Per queue and resource: the labels, deserved, allocated.
    type Share<'a> = ([(&'a str, &'a str); 2], f64, f64);
    let mut shares: Vec<Share> = Vec::new();
    for (name, report) in queues {
        let resources: BTreeSet<&str> = report
            .deserved
            .ids()
            .chain(report.allocated.ids())
            .filter(|(id, _)| !id.is_marker())
            .map(|(id, _)| id.name())
            .collect();
        for resource in resources {
            shares.push((
                [("queue", name.as_str()), ("resource", resource)],
                in_units(resource, report.deserved.get(resource)),
                in_units(resource, report.allocated.get(resource)),
            ));
        }
    }
    metrics::write_gauges(
        out,
        metrics::QUEUE_DESERVED,
        shares
            .iter()
            .map(|(labels, deserved, _)| (&labels[..], *deserved)),
    );
    metrics::write_gauges(
        out,
        metrics::QUEUE_ALLOCATED,
        shares
            .iter()
            .map(|(labels, _, allocated)| (&labels[..], *allocated)),
    );
    let names: Vec<[(&str, &str); 1]> = queues.keys().map(|n| [("queue", n.as_str())]).collect();
    metrics::write_gauges(
        out,
        metrics::QUEUE_WAITING_GROUPS,
        names
            .iter()
            .zip(queues.values())
            .map(|(labels, report)| (&labels[..], report.waiting_groups as f64)),
    );
}

/// An amount in the unit Prometheus expects: CPU in cores, the rest as the cache keeps it.
fn in_units(resource: &str, amount: i64) -> f64 {
    if resource == "cpu" {
        amount as f64 / 1000.0
    } else {
        amount as f64
    }
}

/// Writes the annotation of each admission with room kept that `kept` records unwritten (made
/// by this pass, or whose write failed before), and records those written.
async fn record_kept(client: &Client, kept: &mut Kept) {
    for (group, at) in kept.unwritten() {
        match admit_ahead(client, &group, at).await {
            Ok(()) => kept.written(&group),
            Err(e) => tracing::warn!(error = %e, "admission"),
        }
    }
}

/// Records on `group`'s PodGroup that it is admitted with room kept for members still to come
/// (ahead of its members, or on its `minResources`), at `at` (Unix seconds; see
/// `gangplank_core::model::owed`): the annotation the cache and the controller read.
async fn admit_ahead(client: &Client, group: &GroupKey, at: i64) -> Result<(), Error> {
    let api: Api<PodGroup> = Api::namespaced(client.clone(), &group.namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {
        (labels::ADMITTED_AHEAD_ANNOTATION): crate::clock::rfc3339(at),
    }}});
    api.patch(&group.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| tracing::info!(group = %group, "admitted with room kept for members to come"))
        .map_err(|why| Error::AdmitAhead {
            group: group.to_string(),
            why,
        })
}

/// Removes Gangplank's gate from one pod, if its gates are still as the decision saw them, and
/// records in the same write that Gangplank admitted it (the annotation the bind verb asks for).
async fn release(client: &Client, pod: &PodRef) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let patch = release_patch(pod, &crate::clock::rfc3339_now());
    api.patch(
        &pod.name,
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await
    .map(|_| tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "released"))
    .map_err(|why| Error::Release {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        why,
    })
}

/// The JSON patch of [`release`], recording `admitted` as the time of admission.
fn release_patch(pod: &PodRef, admitted: &str) -> json_patch::Patch {
    let gates = |names: &[String]| {
        serde_json::Value::Array(
            names
                .iter()
                .map(|n| serde_json::json!({ "name": n }))
                .collect(),
        )
    };
    let kept: Vec<String> = pod
        .gates
        .iter()
        .filter(|g| *g != ADMISSION_GATE)
        .cloned()
        .collect();
    let mut ops = vec![
        serde_json::json!({"op": "test", "path": "/metadata/uid", "value": pod.uid}),
        serde_json::json!({"op": "test", "path": "/spec/schedulingGates", "value": gates(&pod.gates)}),
    ];
    // The API server accepts new nodeSelector entries only while a gate is on: in the same
    // update as the gate's removal, not after.
    if let Some(selector) = &pod.node_selector {
        ops.push(serde_json::json!({"op": "add", "path": "/spec/nodeSelector", "value": selector}));
    }
    if pod.annotated {
        let path = json_patch::jsonptr::PointerBuf::from_tokens([
            "metadata",
            "annotations",
            labels::ADMITTED_ANNOTATION,
        ]);
        ops.push(serde_json::json!({"op": "add", "path": path.as_str(), "value": admitted}));
    } else {
        // The API server's `test` of `null` passes on a missing member: the pod still has no
        // annotations, which the next op would otherwise replace.
        ops.push(serde_json::json!({"op": "test", "path": "/metadata/annotations", "value": null}));
        ops.push(
            serde_json::json!({"op": "add", "path": "/metadata/annotations",
            "value": {(labels::ADMITTED_ANNOTATION): admitted}}),
        );
    }
    ops.push(serde_json::json!({"op": "replace", "path": "/spec/schedulingGates", "value": gates(&kept)}));
    serde_json::from_value(serde_json::Value::Array(ops)).expect("a well-formed JSON patch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_removes_only_gangplanks_gate_and_records_the_admission_in_the_same_patch() {
        let pod = PodRef {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            gates: vec![ADMISSION_GATE.into(), "other/gate".into()],
            node_selector: None,
            annotated: true,
        };
        let mut doc = serde_json::json!({
            "metadata": {"uid": "u", "annotations": {"team": "a"}},
            "spec": {"schedulingGates": [{"name": ADMISSION_GATE}, {"name": "other/gate"}]},
        });
        json_patch::patch(&mut doc, &release_patch(&pod, "2026-11-28T19:00:00Z")).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({
                "metadata": {"uid": "u", "annotations": {
                    "team": "a", (labels::ADMITTED_ANNOTATION): "2026-11-28T19:00:00Z"}},
                "spec": {"schedulingGates": [{"name": "other/gate"}]},
            })
        );
        let bare = PodRef {
            annotated: false,
            ..pod
        };
        let ops = serde_json::to_value(release_patch(&bare, "t")).unwrap();
        assert!(
            ops.as_array().unwrap().contains(
                &serde_json::json!({"op": "test", "path": "/metadata/annotations", "value": null})
            ),
            "a pod without annotations gets the map only if it still has none: {ops}"
        );
    }
    use crate::api::labels;
    use gangplank_core::model::Resources;
    use published::{PassOutcome, Published};

    fn outcome(queues: &[(&str, i64, i64, usize)]) -> PassOutcome {
        let mut outcome = PassOutcome::default();
        for &(name, deserved, allocated, waiting) in queues {
            let report = plan::QueueReport {
                deserved: Resources::from([
                    ("cpu", deserved),
                    (labels::MANAGED_RESOURCE, 5),
                    (labels::PLACEMENT_RESOURCE, 5),
                ]),
                allocated: Resources::from([("cpu", allocated), ("memory", 1 << 30)]),
                demand: Resources::new(),
                waiting_groups: waiting,
                ..Default::default()
            };
            outcome.decision.queues.insert(name.to_owned(), report);
        }
        outcome
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_whose_lease_renewal_lapses_midway_makes_no_write_after_the_fence_closes() {
        use crate::cache::{Change, Watched};
        use crate::fence::tests::Recorder;
        use crate::testing::{node, pod};
        use gangplank_core::model::{Pod, Queue};

        // 100 lone pods of queue q wait at the gate with room for all. The API server answers
        // each write in 1 s and the loop sends 32 at once, so the pass's writes take 4 s; the
        // last renewal's fence closes 1.5 s into them.
        let (cache, mut mirror) = Cache::new();
        mirror.apply_node(node("n", 1_000_000, 1_000));
        mirror.apply_queue(Queue::new("q"));
        for i in 0..100 {
            mirror.apply_pod(Pod {
                queue: Some("q".into()),
                scheduling_gates: vec![ADMISSION_GATE.to_owned()],
                marked: true,
                ..pod(&format!("p{i}"), 100)
            });
        }
        for kind in Watched::ALL {
            mirror.apply(Change::Listed(kind, None));
        }
        let fence = Fence::closed();
        let closes = Instant::now() + Duration::from_millis(1_500);
        fence.open_until(closes);
        let api = Recorder::default();
        let client = api.client(&fence, Duration::from_secs(1));
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(run(
            Clients {
                writes: client.clone(),
                evictions: client,
                fence,
            },
            None,
            cache,
            Published::new(),
            Heartbeat::idle("the admission loop", Duration::from_secs(120)),
            shutdown.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(30)).await;
        shutdown.cancel();
        running.await.unwrap();

        let writes = api.writes();
        assert!(
            writes.len() >= RELEASES_IN_FLIGHT,
            "the pass began while leading and wrote: {}",
            writes.len()
        );
        assert!(
            writes.len() < 100,
            "every gate was removed: {}",
            writes.len()
        );
        let late: Vec<_> = writes.iter().filter(|(.., at)| *at >= closes).collect();
        assert!(late.is_empty(), "written after the fence closed: {late:?}");
    }

    #[test]
    fn queue_series_show_the_latest_pass_and_end_with_a_deleted_queue() {
        let published = Published::new();
        let mut text = String::new();
        queue_series(&published, &mut text);
        assert_eq!(text, "", "no series before the first pass");

        published.publish(outcome(&[("a", 2_500, 1_000, 3), ("b", 500, 0, 0)]));
        queue_series(&published, &mut text);
        for line in [
            "gangplank_queue_deserved{queue=\"a\",resource=\"cpu\"} 2.5\n",
            "gangplank_queue_deserved{queue=\"a\",resource=\"memory\"} 0\n",
            "gangplank_queue_allocated{queue=\"a\",resource=\"cpu\"} 1\n",
            "gangplank_queue_allocated{queue=\"a\",resource=\"memory\"} 1073741824\n",
            "gangplank_queue_waiting_groups{queue=\"a\"} 3\n",
            "gangplank_queue_deserved{queue=\"b\",resource=\"cpu\"} 0.5\n",
            "gangplank_queue_waiting_groups{queue=\"b\"} 0\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("scheduling.gangplank.dev/"), "{text}");
        assert_eq!(
            text.matches("# TYPE gangplank_queue_deserved gauge")
                .count(),
            1
        );

        published.publish(outcome(&[("b", 500, 0, 0)]));
        let mut text = String::new();
        queue_series(&published, &mut text);
        assert!(!text.contains("queue=\"a\""), "{text}");
        assert!(text.contains("gangplank_queue_waiting_groups{queue=\"b\"} 0\n"));
    }
}
