//! The largest numbers Gangplank accepts from the objects users write, in one place: the CRD
//! schemas (`maximum`, `maxItems`), the webhooks (a denial naming the field and the limit) and
//! the model (which never builds more than these for one object) all read them from here.
//!
//! Why bounds at all: the model allocates per member of a gang admitted ahead of its pods
//! (placeholders) and per member still to place when a gang claims room, and a user's `i32`
//! added up over tasks overflows. The bounds are far above what a real job asks for, and low
//! enough that one object's worth of work and memory stays small (a gang at the limit admitted
//! ahead is a few megabytes of placeholders). Volcano and Kueue have no such bound; Kubernetes
//! bounds an indexed Job's `completions` and `parallelism` at 100,000.
//!
//! An object written before a bound existed is not validated again: the model treats a gang
//! larger than [`MAX_MEMBERS`] as one that can never be placed, and it waits saying so.

/// The most members a gang may need or hold: `minMember` and `maxMember` of a PodGroup, a
/// batch Job's replicas (its tasks' together), `minAvailable` and `minSuccess`, and the
/// `scheduling.gangplank.dev/min-member` annotation of a batch/v1 Job. The largest training
/// runs use a few thousand pods (eight accelerators each); 10,000 leaves room above them.
pub const MAX_MEMBERS: u32 = 10_000;

/// The most tasks a batch Job may list. Volcano jobs have a handful (a master, workers, a
/// parameter server); each task is a pod template, so the list is also what makes the object
/// large.
pub const MAX_TASKS: u32 = 100;

/// The most restarts a batch Job's `maxRetry` (or a task's) may allow. Every restart deletes
/// and creates the job's pods again.
pub const MAX_RETRIES: u32 = 1_000;

/// The most sub-groups a gang may split into (a PodGroup's `subGroupPolicy`): the roles of a
/// disaggregated service (prefill, decode, a router) or the slices of a job are a handful;
/// each is matched against every member's labels in every pass.
pub const MAX_SUB_GROUPS: u32 = 16;

/// [`MAX_MEMBERS`] as the `i32` the API types hold.
pub const MAX_MEMBERS_I32: i32 = MAX_MEMBERS as i32;

/// Whether a gang of `min_member` is within [`MAX_MEMBERS`]: the model plans, claims and
/// holds placeholders only for such gangs.
pub fn gang_within_limit(min_member: u32) -> bool {
    min_member <= MAX_MEMBERS
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::admit::on_arrival;
    use crate::claims::{self, Settings};
    use crate::model::{GroupKey, Pod, PodGroup, Resources, State};
    use crate::policy::constraints::Constraints;
    use crate::policy::placement::Strategy;
    use crate::testing::{PodBuilder, cluster, decide_now, pod};

    /// One open queue `q`, one node of 8 CPUs, and a PodGroup of `min_member` admitted ahead
    /// of its pods, with one member pod.
    fn cluster_with_a_gang_of(min_member: u32) -> (State, GroupKey, Pod) {
        let mut s = cluster();
        let key = GroupKey::new("ns", "huge");
        s.apply_pod_group(PodGroup {
            min_resources: Resources::from([("cpu", i64::from(min_member))]),
            ahead: true,
            ..PodGroup::new(key.clone(), min_member, "q")
        });
        let pod = pod("huge-0").in_group("huge").gated().marked();
        s.apply_pod(pod.clone());
        (s, key, pod)
    }

    #[test]
    fn a_gang_of_min_member_i32_max_with_one_pod_builds_nothing_per_member_and_waits_saying_why() {
        let (mut s, key, pod) = cluster_with_a_gang_of(i32::MAX.unsigned_abs());
        assert!(
            s.groups()[&key].owed().is_empty(),
            "no placeholders for a gang over the limit"
        );

        let d = decide_now(&s);
        assert!(d.admit.is_empty());
        let why = d
            .waiting
            .iter()
            .find(|w| w.group == key)
            .unwrap()
            .why
            .to_string();
        assert!(
            why.contains("minMember 2147483647 is more than Gangplank's largest gang (10000)"),
            "{why}"
        );

        let settings = Settings {
            strategy: Strategy::Binpack,
            max_hold: Duration::from_secs(60),
            bind_unmarked: false,
            hold_scheduler_gangs: false,
            gated_admission: false,
        };
        let now = Instant::now();
        let candidates = ["n1"];
        let verdict = claims::filter(
            &mut s,
            &pod,
            &Constraints::default(),
            &candidates,
            &settings,
            now,
        )
        .unwrap();
        assert!(verdict.passed.is_empty());
        assert!(
            verdict.unresolvable["n1"]
                .to_string()
                .contains("lower spec.minMember"),
            "{verdict:?}"
        );
        assert!(s.ledger().claims().is_empty(), "no claim is planned");

        // The door is open (nothing waits for room), yet the gang is not let in on arrival.
        let opened = decide_now(&s).door;
        on_arrival::open(&mut s, opened, now);
        assert!(s.ledger().door().is_some());
        let mut plain = PodGroup::new(key.clone(), i32::MAX.unsigned_abs(), "q");
        plain.schedule_timeout = Duration::from_secs(60);
        s.apply_pod_group(plain);
        s.delete_pod(&pod.uid);
        assert!(!on_arrival::admit(
            &mut s,
            &key,
            "huge-1",
            &pod.requests,
            now,
            0
        ));
    }

    #[test]
    fn a_gang_at_the_limit_admitted_ahead_has_one_placeholder_per_member() {
        let (s, key, _) = cluster_with_a_gang_of(MAX_MEMBERS);
        // One member came: a placeholder for each of the others.
        assert_eq!(s.groups()[&key].owed().len(), MAX_MEMBERS as usize - 1);
    }
}
