//! Carries out the reclaim plans of [`gangplank_core::admit::reclaim`] after each admission
//! pass: [`Reclaimer`] evicts the gangs the plan picks.
//!
//! - **Through the Eviction API** (`pods/eviction`, policy/v1), never a plain delete, so
//!   PodDisruptionBudgets are respected. Each eviction names the pod's UID as a precondition,
//!   so a pod recreated under the same name (a Job's replacement) is never hit by mistake.
//! - **Whole gangs or nothing.** A gang's members are first evicted with `dryRun=All`; if any
//!   is refused (HTTP 429: a PodDisruptionBudget says not now), none is evicted, the refusal is
//!   logged and counted, and the gang is left out of reclaim for [`REFUSED_BACKOFF`], so the
//!   next candidate gets its turn instead of the same gang being asked every pass. Only then
//!   are the members evicted for real. If a member is still refused then (another disruption
//!   raced with ours), the members already evicted cannot be given back and the gang cannot
//!   run below `minMember` while its other members hold their nodes, so the rest is evicted
//!   on the following passes until done (`Reclaimer::unfinished`); a PodDisruptionBudget
//!   delays that, it does not stop it forever.
//! - **No pod twice.** A pod whose eviction was requested is remembered until the cache shows
//!   it deleting or gone (and for at most [`EVICTION_MEMORY`]); such pods, and every pod with a
//!   `deletionTimestamp`, are counted as room being freed, never picked again, and their
//!   gangs are not candidates.
//! - **Events**: `Reclaimed` on each victim's PodGroup (or lone pod) and `Reclaiming` on the
//!   starved group's, naming each other's queues (`Preempted` and `Preempting` for priority preemption, naming
//!   the priorities); for the elastic yield, `Preempted`/`Preempting` when the elastic members
//!   are of the starved group's queue and `Reclaimed`/`Reclaiming` when of another, naming the
//!   members and the group they make room for. The metrics `gangplank_reclaim_evictions_total`
//!   and `gangplank_preemption_evictions_total` count the requests by victim queue and outcome
//!   (an elastic yield as preemption inside one queue, as reclaim across queues).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use gangplank_core::admit::reclaim::{Cause, GangVictim, Reclaim, ReclaimPlan, Victim};
use gangplank_core::model::{GroupKey, State};

use crate::events::{Event, Publisher, pod_group_reference};
use crate::metrics;

/// How long a gang whose eviction a PodDisruptionBudget refused is left out of reclaim.
pub const REFUSED_BACKOFF: Duration = Duration::from_secs(30);
/// How long a requested eviction is remembered at most (the cache shows it well before).
pub const EVICTION_MEMORY: Duration = Duration::from_secs(120);

/// Carries out reclaim plans (see the module docs). One per admission loop.
pub struct Reclaimer {
    client: Client,
    publisher: Publisher,
    /// Pods whose eviction was requested, and when.
    evicting: HashMap<String, Instant>,
    /// Gangs left alone after a refusal, until then.
    refused: HashMap<GroupKey, Instant>,
    /// Gangs partly evicted: the members still to evict, why (as counted: see [`counted`]),
    /// and the victim's queue.
    unfinished: BTreeMap<GroupKey, (Cause, String, Vec<Victim>)>,
}

/// How one eviction request went.
enum EvictionOutcome {
    Evicted,
    /// HTTP 429: a PodDisruptionBudget does not allow it now.
    Refused,
    /// The pod is gone, or is another pod of the same name now.
    Gone,
    Failed(kube::Error),
}

impl Reclaimer {
    /// `client` must not retry HTTP 429 by itself (`kube::Config::default_retry` false): a
    /// PodDisruptionBudget's "not now" is an answer here, and kube's default retries would hold
    /// the admission loop for minutes.
    pub fn new(client: Client) -> Self {
        Reclaimer {
            publisher: Publisher::new(client.clone()),
            client,
            evicting: HashMap::new(),
            refused: HashMap::new(),
            unfinished: BTreeMap::new(),
        }
    }

    /// Forgets what the cache has caught up with or what is too old; call before [`gangplank_core::admit::reclaim::plan`].
    pub fn settle(&mut self, state: &State, now: Instant) {
        self.evicting.retain(|uid, at| {
            now.duration_since(*at) < EVICTION_MEMORY
                && state.pods().get(uid).is_some_and(|p| !p.deleting)
        });
        self.refused.retain(|_, until| *until > now);
    }

    pub fn is_evicting(&self, uid: &str) -> bool {
        self.evicting.contains_key(uid)
    }

    /// No eviction is awaited or left unfinished.
    pub fn is_idle(&self) -> bool {
        self.evicting.is_empty() && self.unfinished.is_empty()
    }

    pub fn is_refused(&self, group: &GroupKey) -> bool {
        self.refused.contains_key(group) || self.unfinished.contains_key(group)
    }

    /// Finishes partly evicted gangs, then evicts what `plan` says.
    pub async fn execute(&mut self, plan: ReclaimPlan) {
        let unfinished = std::mem::take(&mut self.unfinished);
        for (group, (cause, queue, pods)) in unfinished {
            let left = self.evict_all(cause, &queue, &pods).await;
            if !left.is_empty() {
                self.unfinished.insert(group, (cause, queue, left));
            }
        }
        for reclaim in plan.reclaims {
            for victim in &reclaim.victims {
                self.evict_gang(&reclaim, victim).await;
            }
        }
    }

    async fn evict_gang(&mut self, reclaim: &Reclaim, victim: &GangVictim) {
        let cause = counted(reclaim.cause, &victim.queue, &reclaim.queue);
        let noun = reclaim.cause.noun();
        for pod in &victim.pods {
            match self.evict(pod, true).await {
                EvictionOutcome::Evicted | EvictionOutcome::Gone => {}
                EvictionOutcome::Refused => {
                    count(cause, &victim.queue, "refused");
                    tracing::info!(gang = %victim.group, pod = %pod.name, "{noun}: a PodDisruptionBudget refuses evicting a member now; the gang is left alone for a while");
                    self.refused
                        .insert(victim.group.clone(), Instant::now() + REFUSED_BACKOFF);
                    return;
                }
                EvictionOutcome::Failed(why) => {
                    count(cause, &victim.queue, "error");
                    tracing::warn!(gang = %victim.group, pod = %pod.name, error = %why, "{noun}: dry-run eviction failed; the gang is left alone for a while");
                    self.refused
                        .insert(victim.group.clone(), Instant::now() + REFUSED_BACKOFF);
                    return;
                }
            }
        }
        let names: Vec<&str> = victim.pods.iter().map(|p| p.name.as_str()).collect();
        let starved = reclaim.subject();
        tracing::info!(gang = %victim.group, queue = %victim.queue, for_group = %starved, for_queue = %reclaim.queue, pods = ?names, "{noun}: evicting {}", victim_what(victim));
        let left = self.evict_all(cause, &victim.queue, &victim.pods).await;
        if !left.is_empty() {
            self.unfinished
                .insert(victim.group.clone(), (cause, victim.queue.clone(), left));
        }
        let [(victim_reason, victim_note), (starved_reason, starved_note)] = notes(reclaim, victim);
        self.publish(Event {
            regarding: victim_reference(victim),
            warning: true,
            reason: victim_reason.to_owned(),
            action: "Evict",
            note: victim_note,
        })
        .await;
        self.publish(Event {
            regarding: starved_reference(reclaim),
            warning: false,
            reason: starved_reason.to_owned(),
            action: "Evict",
            note: starved_note,
        })
        .await;
    }

    /// Evicts every pod of `pods` for real; returns those refused (to retry).
    async fn evict_all(&mut self, cause: Cause, queue: &str, pods: &[Victim]) -> Vec<Victim> {
        let mut left = Vec::new();
        for pod in pods {
            if self.evicting.contains_key(&pod.uid) {
                continue;
            }
            match self.evict(pod, false).await {
                EvictionOutcome::Evicted => {
                    self.evicting.insert(pod.uid.clone(), Instant::now());
                    count(cause, queue, "ok");
                }
                EvictionOutcome::Gone => {}
                EvictionOutcome::Refused => {
                    count(cause, queue, "refused");
                    left.push(pod.clone());
                }
                EvictionOutcome::Failed(why) => {
                    count(cause, queue, "error");
                    tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), error = %why, "{}: eviction failed; retrying on a later pass", cause.noun());
                    left.push(pod.clone());
                }
            }
        }
        left
    }

    async fn evict(&self, pod: &Victim, dry_run: bool) -> EvictionOutcome {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let body = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": pod.uid}},
        });
        let params = PostParams {
            dry_run,
            ..PostParams::default()
        };
        match api
            .create_subresource::<_, serde_json::Value>("eviction", &pod.name, &params, &body)
            .await
        {
            Ok(_) => EvictionOutcome::Evicted,
            Err(kube::Error::Api(s)) if s.code == 429 => EvictionOutcome::Refused,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => EvictionOutcome::Gone,
            Err(why) => EvictionOutcome::Failed(why),
        }
    }

    async fn publish(&self, event: Event) {
        if let Err(e) = self.publisher.publish(&event).await {
            tracing::warn!(error = %e, "reclaim");
        }
    }
}

/// "the pod", "the whole gang" or "its elastic members beyond minMember".
fn victim_what(victim: &GangVictim) -> &'static str {
    if victim.lone {
        "the pod"
    } else if victim.whole {
        "the whole gang"
    } else {
        "its elastic members beyond minMember"
    }
}

/// The reasons and notes of the Events on a victim and on the group it makes room for.
fn notes(reclaim: &Reclaim, victim: &GangVictim) -> [(&'static str, String); 2] {
    let what = victim_what(victim);
    let subject = victim.subject();
    let names: Vec<&str> = victim.pods.iter().map(|p| p.name.as_str()).collect();
    let starved = reclaim.subject();
    let this = if reclaim.pod.is_some() {
        "pod"
    } else {
        "group"
    };
    let (victim_reason, victim_note, starved_reason, starved_note) = match reclaim.cause {
        Cause::Yield => {
            let (victim_reason, starved_reason) =
                match counted(reclaim.cause, &victim.queue, &reclaim.queue) {
                    Cause::Reclaim => ("Reclaimed", "Reclaiming"),
                    _ => ("Preempted", "Preempting"),
                };
            (
                victim_reason,
                format!(
                    "evicted {what} ({}) of queue {}, to make room for {starved} of queue {} to reach its minMember: elastic members yield to any gang's minimum",
                    names.join(", "),
                    victim.queue,
                    reclaim.queue
                ),
                starved_reason,
                format!(
                    "evicting {subject} beyond its minMember ({}) of queue {} to make room for this {this}'s minMember: elastic members yield to any gang's minimum",
                    names.join(", "),
                    victim.queue
                ),
            )
        }
        Cause::Reclaim => (
            "Reclaimed",
            format!(
                "evicted {what} ({}) of queue {}, which holds more than its deserved share, to make room for {starved} of queue {}",
                names.join(", "),
                victim.queue,
                reclaim.queue
            ),
            "Reclaiming",
            format!(
                "evicting {subject} of queue {} (above its deserved share) to make room for this {this} of queue {} (below its deserved share)",
                victim.queue, reclaim.queue
            ),
        ),
        Cause::Preemption => (
            "Preempted",
            format!(
                "evicted {what} ({}) of priority {} to make room for {starved} of higher priority in the same queue {}",
                names.join(", "),
                victim.priority,
                reclaim.queue
            ),
            "Preempting",
            format!(
                "evicting {subject} of priority {} (lower than this {this}'s) in queue {} to make room for this {this}",
                victim.priority, reclaim.queue
            ),
        ),
    };
    [(victim_reason, victim_note), (starved_reason, starved_note)]
}

/// How an eviction for `cause` of a victim of `victim_queue`, for a group of `for_queue`, is
/// counted: an elastic yield as preemption inside one queue, as reclaim across queues.
fn counted(cause: Cause, victim_queue: &str, for_queue: &str) -> Cause {
    match cause {
        Cause::Yield if victim_queue == for_queue => Cause::Preemption,
        Cause::Yield => Cause::Reclaim,
        other => other,
    }
}

fn count(cause: Cause, queue: &str, outcome: &'static str) {
    let name = match cause {
        Cause::Reclaim | Cause::Yield => metrics::RECLAIM_EVICTIONS_TOTAL,
        Cause::Preemption => metrics::PREEMPTION_EVICTIONS_TOTAL,
    };
    ::metrics::counter!(name, "queue" => queue.to_owned(), "outcome" => outcome).increment(1);
}

/// What a victim's Events are about: the pod.
fn pod_reference(pod: &Victim) -> ObjectReference {
    crate::events::pod_reference(&pod.namespace, &pod.name, &pod.uid)
}

/// What a gang victim's Events are about: the PodGroup, or the lone pod.
fn victim_reference(victim: &GangVictim) -> ObjectReference {
    match (victim.lone, victim.pods.first()) {
        (true, Some(pod)) => pod_reference(pod),
        _ => pod_group_reference(&victim.group),
    }
}

/// What the starved group's Events are about: the PodGroup, or the pod.
fn starved_reference(reclaim: &Reclaim) -> ObjectReference {
    match &reclaim.pod {
        Some(pod) => pod_reference(pod),
        None => pod_group_reference(&reclaim.group),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn victim(name: &str) -> Victim {
        Victim {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    #[test]
    fn events_about_a_pod_in_no_group_are_on_the_pod_and_about_a_gang_on_its_pod_group() {
        let lone = GangVictim {
            group: GroupKey::new("ns", "uid-solo"),
            queue: "a".into(),
            priority: 0,
            pods: vec![victim("solo")],
            whole: true,
            lone: true,
        };
        let on_pod = victim_reference(&lone);
        assert_eq!(on_pod.kind.as_deref(), Some("Pod"));
        assert_eq!(on_pod.uid.as_deref(), Some("uid-solo"));
        let gang = GangVictim {
            group: GroupKey::new("ns", "train"),
            lone: false,
            ..lone
        };
        let on_group = victim_reference(&gang);
        assert_eq!(on_group.kind.as_deref(), Some("PodGroup"));
        assert_eq!(on_group.name.as_deref(), Some("train"));
        let starved = Reclaim {
            group: GroupKey::new("ns", "uid-waiting"),
            pod: Some(victim("waiting")),
            queue: "b".into(),
            cause: Cause::Reclaim,
            victims: vec![gang],
        };
        assert_eq!(starved_reference(&starved).kind.as_deref(), Some("Pod"));
    }

    #[test]
    fn an_elastic_yield_names_the_members_and_the_group_they_make_room_for() {
        let extras = GangVictim {
            group: GroupKey::new("ns", "a"),
            queue: "q".into(),
            priority: 10,
            pods: vec![victim("a-8"), victim("a-9")],
            whole: false,
            lone: false,
        };
        let for_b = Reclaim {
            group: GroupKey::new("ns", "b"),
            pod: None,
            queue: "q".into(),
            cause: Cause::Yield,
            victims: vec![extras.clone()],
        };
        let [(on_a, a_note), (on_b, b_note)] = notes(&for_b, &extras);
        assert_eq!((on_a, on_b), ("Preempted", "Preempting"));
        assert_eq!(
            a_note,
            "evicted its elastic members beyond minMember (a-8, a-9) of queue q, to make room for \
             gang ns/b of queue q to reach its minMember: elastic members yield to any gang's minimum"
        );
        assert_eq!(
            b_note,
            "evicting elastic members of gang ns/a beyond its minMember (a-8, a-9) of queue q to \
             make room for this group's minMember: elastic members yield to any gang's minimum"
        );
        // For a group of another queue, they are reclaimed, and counted so.
        let other = Reclaim {
            queue: "other".into(),
            ..for_b
        };
        let [(on_a, _), (on_b, b_note)] = notes(&other, &extras);
        assert_eq!((on_a, on_b), ("Reclaimed", "Reclaiming"));
        assert!(b_note.contains("of queue q to make room"), "{b_note}");
        assert_eq!(counted(Cause::Yield, "q", "other"), Cause::Reclaim);
        assert_eq!(counted(Cause::Yield, "q", "q"), Cause::Preemption);
    }
}
