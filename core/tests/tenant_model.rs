//! The model against a tenant who does not play along: random sequences of PodGroup and pod
//! creations, relabelled pods (a label update that would move a pod to another group or
//! queue), admission passes with Gangplank's own gate removals, binds by a scheduler that
//! places only released pods where they fit, finished and deleted pods. After every step, no
//! queue holds more than its capability, every bound pod still counts in the queue it was
//! created in, and the model's usage of a queue covers what its bound pods request.
//!
//! Gate removals by anyone but Gangplank are not among the steps: the API server refuses them
//! (the ValidatingAdmissionPolicy `gangplank-pods`, tested end to end in the tenancy suite).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gangplank_core::admit::groups::{Groups, Unshown};
use gangplank_core::admit::{after_pass, on_arrival, plan};
use gangplank_core::model::names::ADMISSION_GATE;
use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, PodPhase, Queue, Resources, State};
use proptest::prelude::*;

/// Queues `a` (4 CPUs at most), `b` (6 CPUs at most) and `c` (no capability).
const QUEUES: [(&str, Option<i64>); 3] = [("a", Some(4_000)), ("b", Some(6_000)), ("c", None)];
const NODES: [&str; 2] = ["n1", "n2"];
const NODE_CPU: i64 = 8_000;

#[derive(Debug, Clone)]
enum Step {
    Group {
        group: u8,
        min: u32,
        queue: usize,
    },
    Pod {
        group: Option<u8>,
        queue: usize,
        cpu: i64,
    },
    Relabel {
        pod: usize,
        group: Option<u8>,
        queue: usize,
    },
    Pass,
    Bind {
        pod: usize,
    },
    Finish {
        pod: usize,
    },
    Delete {
        pod: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..4u8, 1..=3u32, 0..3usize).prop_map(|(group, min, queue)| Step::Group {
            group,
            min,
            queue
        }),
        (proptest::option::of(0..4u8), 0..3usize, 0..=3i64).prop_map(|(group, queue, cpu)| {
            Step::Pod {
                group,
                queue,
                cpu: cpu * 1_000,
            }
        }),
        (any::<usize>(), proptest::option::of(0..4u8), 0..3usize)
            .prop_map(|(pod, group, queue)| Step::Relabel { pod, group, queue }),
        Just(Step::Pass),
        Just(Step::Pass),
        any::<usize>().prop_map(|pod| Step::Bind { pod }),
        any::<usize>().prop_map(|pod| Step::Bind { pod }),
        any::<usize>().prop_map(|pod| Step::Finish { pod }),
        any::<usize>().prop_map(|pod| Step::Delete { pod }),
    ]
}

/// The world the tenant acts in, and the truth the model must keep: each pod's queue as created.
struct World {
    state: State,
    now: Instant,
    uids: Vec<String>,
    /// The queue each pod was created in (its group's, or its own label's).
    created_in: BTreeMap<String, String>,
    group_queue: BTreeMap<String, String>,
}

fn group_name(g: u8) -> String {
    format!("g{g}")
}

impl World {
    fn new() -> World {
        let mut state = State::default();
        for (name, cap) in QUEUES {
            let mut queue = Queue::new(name);
            if let Some(cap) = cap {
                queue.capability.set("cpu", cap);
            }
            state.apply_queue(queue);
        }
        for name in NODES {
            state.apply_node(Node {
                name: name.into(),
                allocatable: Resources::from([("cpu", NODE_CPU), ("pods", 110)]),
                labels: Default::default(),
                taints: vec![],
                unschedulable: false,
                not_ready: false,
            });
        }
        World {
            state,
            now: Instant::now(),
            uids: Vec::new(),
            created_in: BTreeMap::new(),
            group_queue: BTreeMap::new(),
        }
    }

    fn pod(&self, index: usize) -> Option<Pod> {
        if self.uids.is_empty() {
            return None;
        }
        let uid = &self.uids[index % self.uids.len()];
        self.state.pods().get(uid).map(|p| p.as_ref().clone())
    }

    fn apply(&mut self, step: &Step) {
        self.now += Duration::from_millis(100);
        match *step {
            Step::Group { group, min, queue } => {
                let name = group_name(group);
                if self.group_queue.contains_key(&name) {
                    return;
                }
                let queue = QUEUES[queue].0;
                self.group_queue.insert(name.clone(), queue.into());
                self.state.apply_pod_group(PodGroup {
                    schedule_timeout: Duration::from_secs(60),
                    ..PodGroup::new(GroupKey::new("ns", name.as_str()), min, queue)
                });
            }
            Step::Pod { group, queue, cpu } => {
                // A pod names a group only once the group exists, as the webhook requires.
                let group = group
                    .map(group_name)
                    .filter(|g| self.group_queue.contains_key(g));
                let true_queue = match &group {
                    Some(g) => self.group_queue[g].clone(),
                    None => QUEUES[queue].0.to_owned(),
                };
                let uid = format!("p{}", self.uids.len());
                let requests = Resources::from([("cpu", cpu), ("pods", 1)]);
                let key = group.as_deref().map(|g| GroupKey::new("ns", g));
                // The mutating webhook: ungated only when admitted on arrival.
                let arrived = key.as_ref().is_some_and(|key| {
                    on_arrival::admit(&mut self.state, key, &uid, &requests, self.now, 0)
                });
                self.state.apply_pod(Pod {
                    uid: uid.clone(),
                    namespace: "ns".into(),
                    name: uid.clone(),
                    queue: group.is_none().then(|| true_queue.clone()),
                    pod_group: group,
                    scheduling_gates: if arrived {
                        vec![]
                    } else {
                        vec![ADMISSION_GATE.into()]
                    },
                    requests,
                    ..Default::default()
                });
                self.created_in.insert(uid.clone(), true_queue);
                self.uids.push(uid);
            }
            Step::Relabel { pod, group, queue } => {
                let Some(p) = self.pod(pod) else { return };
                self.state.apply_pod(Pod {
                    pod_group: group.map(group_name),
                    queue: Some(QUEUES[queue].0.to_owned()),
                    ..p
                });
            }
            Step::Pass => {
                let decision = decide(&self.state);
                after_pass::record(&mut self.state, None, &decision, self.now);
                for admission in &decision.admit {
                    for p in &admission.pods {
                        let pod = self.state.pods()[&p.uid].as_ref().clone();
                        self.state.apply_pod(Pod {
                            scheduling_gates: vec![],
                            ..pod
                        });
                    }
                }
            }
            Step::Bind { pod } => {
                let Some(p) = self.pod(pod) else { return };
                if p.awaits_admission() || p.node_name.is_some() || p.phase.is_terminal() {
                    return;
                }
                let Some(node) = NODES
                    .iter()
                    .find(|n| self.used_on(n) + p.requests.get("cpu") <= NODE_CPU)
                else {
                    return;
                };
                self.state.apply_pod(Pod {
                    node_name: Some((*node).into()),
                    phase: PodPhase::Running,
                    ..p
                });
            }
            Step::Finish { pod } => {
                let Some(p) = self.pod(pod) else { return };
                self.state.apply_pod(Pod {
                    phase: PodPhase::Succeeded,
                    ..p
                });
            }
            Step::Delete { pod } => {
                let Some(p) = self.pod(pod) else { return };
                self.state.delete_pod(&p.uid);
            }
        }
    }

    fn bound(&self) -> impl Iterator<Item = &Pod> {
        self.state
            .pods()
            .values()
            .map(|p| p.as_ref())
            .filter(|p| p.node_name.is_some() && !p.phase.is_terminal())
    }

    fn used_on(&self, node: &str) -> i64 {
        self.bound()
            .filter(|p| p.node_name.as_deref() == Some(node))
            .map(|p| p.requests.get("cpu"))
            .sum()
    }

    /// What the bound pods created in `queue` request.
    fn bound_in(&self, queue: &str) -> i64 {
        self.bound()
            .filter(|p| self.created_in[&p.uid] == queue)
            .map(|p| p.requests.get("cpu"))
            .sum()
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for pod in self.bound() {
            let created_in = &self.created_in[&pod.uid];
            let counted_in = match &pod.pod_group {
                Some(g) => &self.group_queue[g.as_str()],
                None => pod.queue.as_ref().expect("a queue-only pod"),
            };
            prop_assert_eq!(counted_in, created_in, "pod {} moved queues", pod.uid);
        }
        let decision = decide(&self.state);
        for (queue, capability) in QUEUES {
            let bound = self.bound_in(queue);
            if let Some(capability) = capability {
                prop_assert!(bound <= capability, "{queue} holds {bound} of {capability}");
            }
            let allocated = decision.queues[queue].allocated.get("cpu");
            prop_assert!(
                allocated >= bound,
                "{queue}: the model counts {allocated}, its bound pods request {bound}"
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_step_a_tenant_takes_moves_usage_or_passes_a_queues_capability(
        steps in proptest::collection::vec(step(), 1..60)
    ) {
        let mut world = World::new();
        for step in &steps {
            world.apply(step);
            world.check()?;
        }
    }
}

/// The admission pass on `state` at the wall clock's now, as the admission loop runs it.
fn decide(state: &State) -> plan::Decision {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    plan::decide(state, &Groups::of(state, Unshown::none(), now), now)
}
