//! Admissions with room kept for members to come, made pass after pass in a burst while the
//! watch lags: the admission loop's record of them ([`Kept`]) and the members that came gated
//! into their room ([`Decision::into_kept_room`]).

use std::collections::{BTreeSet, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::admit::groups::{Groups, Unshown};

const CAP: i64 = 40_000;
const MEMBER: i64 = 4_000;

/// A queue capped at 40 CPUs on a node of 64.
fn capped_cluster() -> State {
    let mut s = State::default();
    let mut q = Queue::new("q");
    q.capability.set("cpu", CAP);
    s.apply_queue(q);
    s.apply_node(node("n1", 64_000));
    s
}

/// A replica's PodGroup: `minMember` 1 and `minResources` for `size` members of 4 CPUs, as
/// Gangplank makes it for a LeaderWorkerSet started `LeaderReady`, or (`ahead`) as it makes it
/// for LWS's Volcano PodGroup, admitted ahead of its members.
fn replica(name: &str, size: i64, ahead: bool) -> PodGroup {
    PodGroup {
        min_resources: Resources::from([("cpu", size * MEMBER)]),
        ahead,
        created: NOW,
        ..pod_group(name, 1, "q")
    }
}

/// Member `i` of the replica `name` (its leader first), gated as the webhook creates it while
/// its snapshot does not show the group's admission.
fn member(name: &str, i: usize) -> Pod {
    pod(format!("{name}-{i}"))
        .in_group(name)
        .in_queue("q")
        .cpu(MEMBER)
        .gated()
        .created(NOW + i as i64)
}

/// One step of the burst.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The controller creates replica `n`'s PodGroup.
    Group(usize),
    /// Replica `n`'s next member is created.
    Member(usize),
    /// The watch delivers the oldest pod change it holds.
    PodShown,
    /// The watch delivers the oldest PodGroup change it holds.
    GroupShown,
    /// The scheduler binds the oldest released pod.
    Bind,
    /// An admission pass, carried out as the admission loop does; its annotation writes fail
    /// when `false`.
    Pass(bool),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        (0usize..4).prop_map(Step::Group),
        (0usize..4).prop_map(Step::Member),
        Just(Step::PodShown),
        Just(Step::GroupShown),
        Just(Step::Bind),
        any::<bool>().prop_map(Step::Pass),
    ];
    prop::collection::vec(step, 0..80)
}

/// The API server's objects, the watch's changes not delivered yet, the cache and the
/// admission loop's own records, for four replicas of the sizes given.
struct Burst {
    sizes: [(i64, bool); 4],
    groups: [Option<PodGroup>; 4],
    pods: Vec<Pod>,
    pod_changes: VecDeque<Pod>,
    group_changes: VecDeque<PodGroup>,
    cache: State,
    released: BTreeSet<String>,
    kept: Kept,
}

impl Burst {
    fn new(sizes: [(i64, bool); 4]) -> Burst {
        Burst {
            sizes,
            groups: Default::default(),
            pods: Vec::new(),
            pod_changes: VecDeque::new(),
            group_changes: VecDeque::new(),
            cache: capped_cluster(),
            released: BTreeSet::new(),
            kept: Kept::new(),
        }
    }

    fn name(n: usize) -> &'static str {
        ["a", "b", "c", "d"][n]
    }

    fn step(&mut self, step: Step) {
        match step {
            Step::Group(n) if self.groups[n].is_none() => {
                let (size, ahead) = self.sizes[n];
                self.write_group(replica(Self::name(n), size, ahead));
            }
            Step::Member(n) => self.create_member(n),
            Step::PodShown => {
                if let Some(p) = self.pod_changes.pop_front() {
                    self.cache.apply_pod(p);
                }
            }
            Step::GroupShown => {
                if let Some(g) = self.group_changes.pop_front() {
                    self.cache.apply_pod_group(g);
                }
            }
            Step::Bind => self.bind(),
            Step::Pass(writes) => self.pass(writes),
            Step::Group(_) => {}
        }
    }

    fn write_group(&mut self, group: PodGroup) {
        let n = ["a", "b", "c", "d"]
            .iter()
            .position(|&name| *group.key.name == *name)
            .unwrap();
        self.groups[n] = Some(group.clone());
        self.group_changes.push_back(group);
    }

    fn write_pod(&mut self, pod: Pod) {
        match self.pods.iter_mut().find(|p| p.uid == pod.uid) {
            Some(p) => *p = pod.clone(),
            None => self.pods.push(pod.clone()),
        }
        self.pod_changes.push_back(pod);
    }

    /// Replica `n`'s next member, within its size: LWS makes no more.
    fn create_member(&mut self, n: usize) {
        let name = Self::name(n);
        let made = self
            .pods
            .iter()
            .filter(|p| p.pod_group.as_deref() == Some(name));
        let i = made.count();
        if i < self.sizes[n].0 as usize {
            self.write_pod(member(name, i));
        }
    }

    fn bind(&mut self) {
        let released = self
            .pods
            .iter()
            .find(|p| !p.awaits_admission() && p.node_name.is_none());
        if let Some(p) = released.cloned() {
            self.write_pod(p.running_on("n1"));
        }
    }

    /// A pass on the cache as the admission loop runs it: its records first, then its
    /// releases and annotations (which fail unless `writes`).
    fn pass(&mut self, writes: bool) {
        self.kept.forget_shown(&self.cache, NOW);
        let released = &self.released;
        let unshown = Unshown {
            released: &|uid| released.contains(uid),
            kept: &self.kept,
        };
        let d = decide(&self.cache, &Groups::of(&self.cache, unshown, NOW), NOW);
        let admitted = d.admit.iter().flat_map(|a| &a.pods);
        for uid in admitted.chain(&d.into_kept_room).map(|p| p.uid.clone()) {
            let mut pod = self.pods.iter().find(|p| p.uid == uid).unwrap().clone();
            pod.scheduling_gates.clear();
            self.write_pod(pod);
            self.released.insert(uid);
        }
        self.kept.note(d.admitted_with_room_kept(), NOW);
        for (key, at) in self.kept.unwritten().into_iter().filter(|_| writes) {
            let n = ["a", "b", "c", "d"]
                .iter()
                .position(|&name| *key.name == *name);
            let group = self.groups[n.unwrap()].clone().unwrap();
            self.write_group(PodGroup {
                admitted_at: Some(at),
                ..group
            });
            self.kept.written(&key);
        }
    }

    /// The room the API shows kept for the queue: of each replica admitted (its annotation
    /// written or a member's gate removed), its `minResources` or what its released members
    /// ask, whichever is more.
    fn kept_room(&self) -> i64 {
        (0..4)
            .filter_map(|n| {
                let group = self.groups[n].as_ref()?;
                let name = Self::name(n);
                let released: i64 = self
                    .pods
                    .iter()
                    .filter(|p| p.pod_group.as_deref() == Some(name) && !p.awaits_admission())
                    .map(|p| p.requests.get("cpu"))
                    .sum();
                let admitted = group.admitted_at.is_some() || released > 0;
                admitted.then(|| released.max(group.min_resources.get("cpu")))
            })
            .sum()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_burst_of_admissions_with_room_kept_never_keeps_more_than_the_queue_s_capability(
        sizes in prop::array::uniform4((1i64..=4, any::<bool>())),
        steps in steps(),
    ) {
        let mut burst = Burst::new(sizes);
        for (i, &step) in steps.iter().enumerate() {
            burst.step(step);
            let kept = burst.kept_room();
            prop_assert!(kept <= CAP, "{kept} kept after {:?}", &steps[..=i]);
        }
    }
}

#[test]
fn three_replicas_admitted_ahead_in_a_burst_keep_two_replicas_room_under_a_cap_of_two() {
    // The run: three replicas of 16 CPUs under a cap of 40. b and d are admitted
    // ahead of their leaders, which then come gated (the webhook has not seen the
    // admissions); a's PodGroup and leader come before any annotation is shown.
    let mut burst = Burst::new([(4, false), (4, true), (4, false), (4, true)]);
    // b's and d's PodGroups shown; a's created, not shown yet.
    for step in [
        Step::Group(1),
        Step::Group(3),
        Step::GroupShown,
        Step::GroupShown,
    ] {
        burst.step(step);
    }
    burst.step(Step::Group(0));
    burst.step(Step::Pass(true));
    assert_eq!(burst.kept_room(), 32_000, "b and d admitted ahead");
    // The three leaders created gated and shown, and a's PodGroup; not the annotations.
    for step in [Step::Member(1), Step::Member(3), Step::Member(0)] {
        burst.step(step);
    }
    for step in [
        Step::PodShown,
        Step::PodShown,
        Step::PodShown,
        Step::GroupShown,
    ] {
        burst.step(step);
    }
    let released = &burst.released;
    let unshown = Unshown {
        released: &|uid| released.contains(uid),
        kept: &burst.kept,
    };
    let d = decide(&burst.cache, &Groups::of(&burst.cache, unshown, NOW), NOW);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    // Before: the leaders waited as candidates of 4 CPUs each, b and d held 12 each, and a's
    // 16 fitted under the cap beside them.
    let leaders: Vec<&str> = d.into_kept_room.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        leaders,
        ["b-0", "d-0"],
        "released into the room kept for them"
    );
    assert_eq!(d.in_flight.get("cpu"), 32_000);
    assert_eq!(
        reason(&d, "a"),
        Reason::CapabilityReached,
        "{}",
        why(&d, "a")
    );
}
