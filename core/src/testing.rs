//! Helpers for the core's unit tests, the one place for their builders: pods, nodes,
//! PodGroups, gangs and the small cluster most admission tests start from; the clock the
//! production callers pass in; and the admission pass on the group facts of a state as the
//! admission loop derives them. Builders specific to one subject stay beside its tests
//! (`claims::testing` for the claims' filter, a policy's own input types in its module).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::admit::groups::{Groups, Unshown};
use crate::admit::kept::Kept;
use crate::admit::plan::{Decision, decide};
use crate::model::names::ADMISSION_GATE;
use crate::model::{GroupKey, Node, Pod, PodGroup, PodPhase, Queue, Resources, State};

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The pass now, with nothing released that the cache still shows gated.
pub fn decide_now(state: &State) -> Decision {
    decide_at(state, &|_| false, unix_now())
}

/// The pass now, counting the pods for which `released(uid)` is true as released.
pub fn decide_after(state: &State, released: &dyn Fn(&str) -> bool) -> Decision {
    decide_at(state, released, unix_now())
}

/// The pass at `now`, counting the pods for which `released(uid)` is true as released.
pub fn decide_at(state: &State, released: &dyn Fn(&str) -> bool, now: i64) -> Decision {
    let unshown = Unshown {
        released,
        ..Unshown::none()
    };
    decide(state, &Groups::of(state, unshown, now), now)
}

/// The pass at `now`, counting the admissions with room kept that `kept` records as holding
/// (the admission loop's record of those the snapshot does not show yet).
pub fn decide_kept(state: &State, kept: &Kept, now: i64) -> Decision {
    let unshown = Unshown {
        kept,
        ..Unshown::none()
    };
    decide(state, &Groups::of(state, unshown, now), now)
}

/// The pod `uid` (its name too) in namespace `ns`: pending, unbound, in no group or queue, not
/// gated, asking for 1 CPU and one `pods`. [`PodBuilder`] changes what a test needs.
pub fn pod(uid: impl Into<String>) -> Pod {
    let uid = uid.into();
    Pod {
        namespace: "ns".into(),
        name: uid.clone(),
        uid,
        requests: Resources::from([("cpu", 1_000), ("pods", 1)]),
        ..Default::default()
    }
}

/// Changes to a [`pod`], one field each, chained: `pod("a").in_group("g").gated().cpu(2_000)`.
pub trait PodBuilder {
    /// A member of the PodGroup `group` (in its namespace).
    fn in_group(self, group: &str) -> Self;
    /// Naming the queue `queue` itself.
    fn in_queue(self, queue: &str) -> Self;
    /// Behind Gangplank's admission gate.
    fn gated(self) -> Self;
    /// Asking for `millis` millicores (its other requests kept).
    fn cpu(self, millis: i64) -> Self;
    /// Asking for `requests`, and nothing else.
    fn requests(self, requests: Resources) -> Self;
    /// Created at `at` (Unix seconds).
    fn created(self, at: i64) -> Self;
    /// Bound to `node`, its phase unchanged.
    fn bound_to(self, node: &str) -> Self;
    /// Bound to `node` and running.
    fn running_on(self, node: &str) -> Self;
    /// Of priority `priority`.
    fn priority(self, priority: i32) -> Self;
    /// Carrying Gangplank's marker resource (the filter sees it).
    fn marked(self) -> Self;
    /// With the label `key: value` (its other labels kept).
    fn labeled(self, key: &str, value: &str) -> Self;
}

impl PodBuilder for Pod {
    fn in_group(self, group: &str) -> Self {
        Pod {
            pod_group: Some(group.into()),
            ..self
        }
    }
    fn in_queue(self, queue: &str) -> Self {
        Pod {
            queue: Some(queue.into()),
            ..self
        }
    }
    fn gated(self) -> Self {
        Pod {
            scheduling_gates: vec![ADMISSION_GATE.into()],
            ..self
        }
    }
    fn cpu(mut self, millis: i64) -> Self {
        self.requests.set("cpu", millis);
        self
    }
    fn requests(self, requests: Resources) -> Self {
        Pod { requests, ..self }
    }
    fn created(self, at: i64) -> Self {
        Pod {
            created: at,
            ..self
        }
    }
    fn bound_to(self, node: &str) -> Self {
        Pod {
            node_name: Some(node.into()),
            ..self
        }
    }
    fn running_on(self, node: &str) -> Self {
        Pod {
            phase: PodPhase::Running,
            ..self.bound_to(node)
        }
    }
    fn priority(self, priority: i32) -> Self {
        Pod { priority, ..self }
    }
    fn marked(self) -> Self {
        Pod {
            marked: true,
            ..self
        }
    }
    fn labeled(mut self, key: &str, value: &str) -> Self {
        std::sync::Arc::make_mut(&mut self.labels).insert(key.into(), value.into());
        self
    }
}

/// The ready, untainted node `name` of `cpu` millicores with room for 110 pods.
pub fn node(name: impl Into<String>, cpu: i64) -> Node {
    node_of(name, Resources::from([("cpu", cpu), ("pods", 110)]))
}

/// The ready, untainted node `name` of `allocatable`.
pub fn node_of(name: impl Into<String>, allocatable: Resources) -> Node {
    Node {
        name: name.into(),
        allocatable,
        ..Default::default()
    }
}

/// The PodGroup `ns/name` of `min` members in `queue`, with a schedule timeout of 60 seconds.
pub fn pod_group(name: &str, min: u32, queue: &str) -> PodGroup {
    PodGroup {
        schedule_timeout: Duration::from_secs(60),
        ..PodGroup::new(GroupKey::new("ns", name), min, queue)
    }
}

/// The group `name` of `count` gated pods (`name-0`, `name-1`, ...) of `cpu` millicores in
/// `queue`, created at `created`; the pods name the queue `q` themselves.
pub fn gang(s: &mut State, name: &str, queue: &str, count: u32, cpu: i64, created: i64) {
    s.apply_pod_group(pod_group(name, count, queue));
    for i in 0..count {
        s.apply_pod(
            pod(format!("{name}-{i}"))
                .in_group(name)
                .in_queue("q")
                .gated()
                .cpu(cpu)
                .created(created),
        );
    }
}

/// One open queue `q` and one node `n1` of 8 CPUs.
pub fn cluster() -> State {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    s.apply_node(node("n1", 8_000));
    s
}
