//! Queue order ([`AdmissionPass`]): the order in which the admission pass considers waiting
//! groups over all queues. Between queues, weighted DRF over deserved shares (ascending
//! dominant share of allocated over deserved); inside a queue, priority, then the namespace's
//! share when configured, then age. Shares are updated as groups are picked. The reasons are
//! in `docs/decisions/queue-order.md`.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::ops::Range;

use crate::model::GroupKey;
use crate::model::resources::{ResourceId, Resources};

/// `allocated / deserved` for the resource where that fraction is largest. Compares by value
/// only (two shares on different resources with the same value are equal).
#[derive(Clone, Copy, Debug)]
pub struct DominantShare {
    /// The amount held of the dominant resource.
    pub allocated: i64,
    /// The amount deserved of it; zero with a positive `allocated` means unbounded.
    pub deserved: i64,
    /// The dominant resource; `None` when nothing is held.
    pub resource: Option<ResourceId>,
}

impl DominantShare {
    /// Nothing held.
    pub const ZERO: DominantShare = DominantShare {
        allocated: 0,
        deserved: 1,
        resource: None,
    };

    /// The dominant share of `allocated` over `deserved`; ties between resources go to the
    /// lowest resource id.
    pub fn of(allocated: &Resources, deserved: &Resources) -> DominantShare {
        let mut best = DominantShare::ZERO;
        for (id, held) in allocated.ids() {
            if held <= 0 || id.is_marker() {
                continue;
            }
            let candidate = DominantShare {
                allocated: held,
                deserved: deserved.amount(id).max(0),
                resource: Some(id),
            };
            if candidate > best {
                best = candidate;
            }
        }
        best
    }

    /// Holds some of a resource it deserves none of.
    pub fn is_unbounded(&self) -> bool {
        self.deserved <= 0 && self.allocated > 0
    }

    /// For reports and metrics only; infinite when unbounded.
    pub fn as_f64(&self) -> f64 {
        match self.value() {
            Value::Nothing => 0.0,
            Value::Fraction(held, deserved) => held as f64 / deserved as f64,
            Value::Unbounded => f64::INFINITY,
        }
    }

    /// The value, whatever the fields hold (nothing held is zero, whatever is deserved).
    fn value(&self) -> Value {
        if self.allocated <= 0 {
            Value::Nothing
        } else if self.deserved <= 0 {
            Value::Unbounded
        } else {
            Value::Fraction(i128::from(self.allocated), i128::from(self.deserved))
        }
    }
}

/// A share's value; variants in ascending order.
enum Value {
    Nothing,
    /// `held / deserved`, both positive.
    Fraction(i128, i128),
    Unbounded,
}

impl Ord for DominantShare {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.value(), other.value()) {
            (Value::Fraction(a, b), Value::Fraction(c, d)) => (a * d).cmp(&(c * b)),
            (mine, theirs) => mine.rank().cmp(&theirs.rank()),
        }
    }
}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Nothing => 0,
            Value::Fraction(..) => 1,
            Value::Unbounded => 2,
        }
    }
}

impl PartialOrd for DominantShare {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for DominantShare {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for DominantShare {}

/// `cpu at 0.50 of deserved`, `nvidia.com/gpu held with none deserved`, `nothing held`.
impl fmt::Display for DominantShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.resource {
            None => f.write_str("nothing held"),
            Some(id) if self.is_unbounded() => write!(f, "{} held with none deserved", id.name()),
            Some(id) => write!(f, "{} at {:.2} of deserved", id.name(), self.as_f64()),
        }
    }
}

/// A group waiting for admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingGroup<K = GroupKey> {
    /// Unique; the last tie-breaker.
    pub key: K,
    pub namespace: String,
    /// What admitting the whole group adds to its queue's allocation.
    pub requests: Resources,
    pub priority: i32,
    /// Creation time (any monotone unit, e.g. Unix seconds); older goes first.
    pub created: i64,
}

/// One queue at the start of a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueSnapshot<K = GroupKey> {
    pub name: String,
    /// Queue priority: only breaks ties between equal shares.
    pub priority: i32,
    /// What the queue's admitted groups hold.
    pub allocated: Resources,
    /// What its own groups deserve ([`super::fair_share::Share::own`]).
    pub deserved: Resources,
    /// What its admitted groups hold per namespace; read only with namespace fair share.
    /// A namespace not listed holds nothing.
    pub namespace_allocated: BTreeMap<String, Resources>,
    /// Order its groups of equal priority by namespace share (as [`Options`] does for every
    /// queue).
    pub namespace_fair_share: bool,
    /// In any order.
    pub waiting: Vec<WaitingGroup<K>>,
}

impl<K> QueueSnapshot<K> {
    /// An empty queue named `name` deserving `deserved`.
    pub fn new(name: impl Into<String>, deserved: Resources) -> Self {
        QueueSnapshot {
            name: name.into(),
            priority: 0,
            allocated: Resources::new(),
            deserved,
            namespace_allocated: BTreeMap::new(),
            namespace_fair_share: false,
            waiting: Vec::new(),
        }
    }
}

/// How a pass orders groups inside a queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Between groups of equal priority in one queue, the namespace holding the smaller
    /// share of the queue goes first.
    pub namespace_fair_share: bool,
}

/// One group in the admission order, with the shares that put it there.
#[derive(Debug)]
pub struct Pick<'a, K = GroupKey> {
    pub queue: &'a QueueSnapshot<K>,
    pub group: &'a WaitingGroup<K>,
    /// The queue's dominant share when the group was picked (before counting it).
    pub queue_share: DominantShare,
    /// The namespace's dominant share of the queue when picked; `None` without namespace fair
    /// share.
    pub namespace_share: Option<DominantShare>,
}

impl<K> Clone for Pick<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Pick<'_, K> {}

/// The admission order of every waiting group of `queues`, each counted against its queue
/// (and namespace) as if admitted.
pub fn admission_order<K: Ord>(queues: &[QueueSnapshot<K>], options: Options) -> Vec<Pick<'_, K>> {
    let total = queues.iter().map(|q| q.waiting.len()).sum();
    let mut order = Vec::with_capacity(total);
    order.extend(AdmissionPass::new(queues, options));
    order
}

/// One ordering pass, group by group (an [`Iterator`] of [`Pick`]s).
pub struct AdmissionPass<'a, K = GroupKey> {
    queues: Vec<Cursor<'a, K>>,
    /// Queues with groups left, the lowest rank on top.
    heap: BinaryHeap<Reverse<Rank<'a>>>,
    last: Option<Last<'a, K>>,
}

/// Where a queue stands between queues: share, then priority descending, then name (then its
/// index, for completeness).
type Rank<'a> = (DominantShare, Reverse<i32>, &'a str, usize);

struct Last<'a, K> {
    queue: usize,
    bucket: usize,
    group: &'a WaitingGroup<K>,
    skipped: bool,
}

impl<'a, K: Ord> AdmissionPass<'a, K> {
    pub fn new(queues: &'a [QueueSnapshot<K>], options: Options) -> Self {
        let cursors: Vec<Cursor<'a, K>> = queues
            .iter()
            .map(|q| Cursor::new(q, options.namespace_fair_share || q.namespace_fair_share))
            .collect();
        let heap = cursors
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.ready.is_empty())
            .map(|(i, c)| Reverse(c.rank(i)))
            .collect();
        AdmissionPass {
            queues: cursors,
            heap,
            last: None,
        }
    }

    /// The group last returned was not admitted: its requests do not count against its queue
    /// or namespace for the rest of the pass. Does nothing before the first pick.
    pub fn skip_last(&mut self) {
        if let Some(last) = &mut self.last {
            last.skipped = true;
        }
    }

    /// Counts the last pick (unless skipped) and puts its queue back in line.
    fn settle_last(&mut self) {
        let Some(last) = self.last.take() else {
            return;
        };
        let cursor = &mut self.queues[last.queue];
        if !last.skipped {
            cursor.allocated.add(&last.group.requests);
            cursor.share = DominantShare::of(&cursor.allocated, &cursor.snapshot.deserved);
            if cursor.by_namespace {
                let ns = cursor.buckets[last.bucket].namespace;
                cursor.namespace_allocated[ns].add(&last.group.requests);
            }
        }
        cursor.requeue(last.bucket);
        if !cursor.ready.is_empty() {
            self.heap.push(Reverse(cursor.rank(last.queue)));
        }
    }
}

impl<'a, K: Ord> Iterator for AdmissionPass<'a, K> {
    type Item = Pick<'a, K>;

    fn next(&mut self) -> Option<Pick<'a, K>> {
        self.settle_last();
        loop {
            let Reverse((_, _, _, qi)) = self.heap.pop()?;
            let cursor = &mut self.queues[qi];
            let Some(Reverse(head)) = cursor.ready.pop() else {
                continue;
            };
            let bucket = &mut cursor.buckets[head.bucket];
            let group = cursor.groups[bucket.next];
            bucket.next += 1;
            self.last = Some(Last {
                queue: qi,
                bucket: head.bucket,
                group,
                skipped: false,
            });
            return Some(Pick {
                queue: cursor.snapshot,
                group,
                queue_share: cursor.share,
                namespace_share: cursor.by_namespace.then_some(head.share),
            });
        }
    }
}

/// One queue's state during a pass.
struct Cursor<'a, K> {
    snapshot: &'a QueueSnapshot<K>,
    allocated: Resources,
    share: DominantShare,
    /// Waiting groups by priority descending, namespace (with namespace fair share), age, key.
    groups: Vec<&'a WaitingGroup<K>>,
    /// Runs of `groups` of one priority (and namespace, with namespace fair share).
    buckets: Vec<Bucket>,
    /// Runs of `buckets` of one priority, highest first.
    bands: Vec<Range<usize>>,
    band: usize,
    /// The current band's buckets that have groups left, best head on top.
    ready: BinaryHeap<Reverse<Head<'a, K>>>,
    /// Per namespace index (one entry without namespace fair share).
    namespace_allocated: Vec<Resources>,
    /// Namespace fair share applies to this queue.
    by_namespace: bool,
}

struct Bucket {
    next: usize,
    end: usize,
    namespace: usize,
}

/// A bucket's next group, ranked by namespace share, age, key.
struct Head<'a, K> {
    share: DominantShare,
    created: i64,
    key: &'a K,
    bucket: usize,
}

impl<K: Ord> Ord for Head<'_, K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.share
            .cmp(&other.share)
            .then(self.created.cmp(&other.created))
            .then_with(|| self.key.cmp(other.key))
            .then(self.bucket.cmp(&other.bucket))
    }
}

impl<K: Ord> PartialOrd for Head<'_, K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> PartialEq for Head<'_, K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Head<'_, K> {}

impl<'a, K: Ord> Cursor<'a, K> {
    fn new(snapshot: &'a QueueSnapshot<K>, by_namespace: bool) -> Self {
        let mut groups: Vec<&WaitingGroup<K>> = snapshot.waiting.iter().collect();
        groups.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| {
                    if by_namespace {
                        a.namespace.cmp(&b.namespace)
                    } else {
                        Ordering::Equal
                    }
                })
                .then(a.created.cmp(&b.created))
                .then_with(|| a.key.cmp(&b.key))
        });

        let mut namespaces: BTreeMap<&str, usize> = BTreeMap::new();
        let mut namespace_allocated = Vec::new();
        let mut buckets: Vec<Bucket> = Vec::new();
        let mut bands: Vec<Range<usize>> = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            let namespace = if by_namespace {
                *namespaces.entry(g.namespace.as_str()).or_insert_with(|| {
                    namespace_allocated.push(
                        snapshot
                            .namespace_allocated
                            .get(&g.namespace)
                            .cloned()
                            .unwrap_or_default(),
                    );
                    namespace_allocated.len() - 1
                })
            } else {
                0
            };
            let same_band = i > 0 && groups[i - 1].priority == g.priority;
            if same_band && buckets.last().is_some_and(|b| b.namespace == namespace) {
                if let Some(b) = buckets.last_mut() {
                    b.end = i + 1;
                }
                continue;
            }
            if !same_band {
                bands.push(buckets.len()..buckets.len());
            }
            buckets.push(Bucket {
                next: i,
                end: i + 1,
                namespace,
            });
            if let Some(band) = bands.last_mut() {
                band.end = buckets.len();
            }
        }
        if namespace_allocated.is_empty() {
            namespace_allocated.push(Resources::new());
        }

        let allocated = snapshot.allocated.clone();
        let mut cursor = Cursor {
            snapshot,
            share: DominantShare::of(&allocated, &snapshot.deserved),
            allocated,
            groups,
            buckets,
            bands,
            band: 0,
            ready: BinaryHeap::new(),
            namespace_allocated,
            by_namespace,
        };
        cursor.open_band();
        cursor
    }

    /// Where the queue stands between queues.
    fn rank(&self, index: usize) -> Rank<'a> {
        (
            self.share,
            Reverse(self.snapshot.priority),
            self.snapshot.name.as_str(),
            index,
        )
    }

    fn head(&self, bucket: usize) -> Head<'a, K> {
        let b = &self.buckets[bucket];
        let group = self.groups[b.next];
        Head {
            share: DominantShare::of(
                &self.namespace_allocated[b.namespace],
                &self.snapshot.deserved,
            ),
            created: group.created,
            key: &group.key,
            bucket,
        }
    }

    /// Puts the current band's buckets in line.
    fn open_band(&mut self) {
        if let Some(band) = self.bands.get(self.band).cloned() {
            for bucket in band {
                let head = self.head(bucket);
                self.ready.push(Reverse(head));
            }
        }
    }

    /// Puts `bucket` back in line if it has groups left; moves to the next band when the
    /// current one is done.
    fn requeue(&mut self, bucket: usize) {
        if self.buckets[bucket].next < self.buckets[bucket].end {
            let head = self.head(bucket);
            self.ready.push(Reverse(head));
        }
        if self.ready.is_empty() {
            self.band += 1;
            self.open_band();
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn cpu(millis: i64) -> Resources {
        Resources::from([("cpu", millis)])
    }

    fn group(namespace: &str, name: &str, cpu_millis: i64) -> WaitingGroup {
        WaitingGroup {
            key: GroupKey::new(namespace, name),
            namespace: namespace.into(),
            requests: cpu(cpu_millis),
            priority: 0,
            created: 0,
        }
    }

    fn with(priority: i32, created: i64, g: WaitingGroup) -> WaitingGroup {
        WaitingGroup {
            priority,
            created,
            ..g
        }
    }

    fn queue(name: &str, deserved: i64, waiting: Vec<WaitingGroup>) -> QueueSnapshot {
        QueueSnapshot {
            waiting,
            ..QueueSnapshot::new(name, cpu(deserved))
        }
    }

    fn names(order: &[Pick<'_>]) -> Vec<String> {
        order.iter().map(|p| p.group.key.name.to_string()).collect()
    }

    fn queues_of(order: &[Pick<'_>]) -> String {
        order.iter().map(|p| p.queue.name.as_str()).collect()
    }

    #[test]
    fn dominant_share_is_the_largest_fraction_over_resources() {
        let allocated = Resources::from([("cpu", 5_000), ("memory", 3)]);
        let deserved = Resources::from([("cpu", 10_000), ("memory", 4)]);
        let share = DominantShare::of(&allocated, &deserved);
        assert_eq!(share.resource, Some(ResourceId::MEMORY));
        assert_eq!(share.as_f64(), 0.75);
        assert_eq!(share.to_string(), "memory at 0.75 of deserved");
        assert_eq!(
            DominantShare::of(&Resources::new(), &deserved),
            DominantShare::ZERO
        );
        assert_eq!(DominantShare::ZERO.to_string(), "nothing held");
    }

    #[test]
    fn holding_nothing_is_a_zero_share_whatever_is_deserved() {
        let nothing = DominantShare {
            allocated: 0,
            deserved: 0,
            resource: None,
        };
        assert_eq!(nothing, DominantShare::ZERO);
        assert_eq!(nothing.as_f64(), 0.0);
        assert!(!nothing.is_unbounded());
        assert!(nothing < DominantShare::of(&cpu(1), &cpu(1_000_000)));
    }

    #[test]
    fn holding_a_resource_deserved_not_at_all_ranks_after_any_fraction() {
        let gpu_held = DominantShare::of(
            &Resources::from([("nvidia.com/gpu", 1)]),
            &Resources::from([("cpu", 1_000)]),
        );
        assert!(gpu_held.is_unbounded());
        let far_over = DominantShare::of(&cpu(1_000_000), &cpu(1));
        assert!(far_over < gpu_held);
        assert_eq!(
            gpu_held.to_string(),
            "nvidia.com/gpu held with none deserved"
        );
    }

    #[test]
    fn the_queue_furthest_below_its_deserved_share_goes_first() {
        let mut busy = queue("a-busy", 10_000, vec![group("x", "busy-job", 1_000)]);
        busy.allocated = cpu(8_000);
        let mut idle = queue("b-idle", 10_000, vec![group("y", "idle-job", 1_000)]);
        idle.allocated = cpu(2_000);
        let queues = [busy, idle];
        let order = admission_order(&queues, Options::default());
        assert_eq!(names(&order), ["idle-job", "busy-job"]);
        assert_eq!(order[0].queue_share.as_f64(), 0.2);
        assert_eq!(order[1].queue_share.as_f64(), 0.8);
    }

    #[test]
    fn one_pass_alternates_between_equal_queues_instead_of_draining_one() {
        let a = queue(
            "a",
            10_000,
            (0..3)
                .map(|i| group("x", &format!("a{i}"), 2_000))
                .collect(),
        );
        let b = queue(
            "b",
            10_000,
            (0..3)
                .map(|i| group("y", &format!("b{i}"), 2_000))
                .collect(),
        );
        let queues = [a, b];
        let order = admission_order(&queues, Options::default());
        assert_eq!(queues_of(&order), "ababab");
    }

    #[test]
    fn a_queue_deserving_twice_as_much_is_picked_twice_as_often() {
        let jobs = |q: &str| {
            (0..8)
                .map(|i| group(q, &format!("{q}{i}"), 1_000))
                .collect()
        };
        let queues = [queue("a", 20_000, jobs("a")), queue("b", 10_000, jobs("b"))];
        let order = admission_order(&queues, Options::default());
        assert_eq!(&queues_of(&order)[..9], "abaabaaba");
    }

    #[test]
    fn each_pick_reports_its_queues_share_before_the_group_is_counted() {
        let a = queue(
            "a",
            10_000,
            vec![group("x", "first", 5_000), group("x", "second", 5_000)],
        );
        let queues = [a];
        let order = admission_order(&queues, Options::default());
        let shares: Vec<f64> = order.iter().map(|p| p.queue_share.as_f64()).collect();
        assert_eq!(shares, [0.0, 0.5]);
    }

    #[test]
    fn equal_shares_go_to_the_higher_priority_queue_then_by_name() {
        let mut low = queue("a-low", 10_000, vec![group("x", "low", 1_000)]);
        low.priority = 1;
        let mut high = queue("c-high", 10_000, vec![group("x", "high", 1_000)]);
        high.priority = 5;
        let also_low = queue("b-low", 10_000, vec![group("x", "also-low", 1_000)]);
        let mut zero = queue("d-zero", 10_000, vec![group("x", "zero", 1_000)]);
        zero.priority = 1;
        let queues = [zero, also_low, low, high];
        let order = admission_order(&queues, Options::default());
        assert_eq!(names(&order), ["high", "low", "zero", "also-low"]);
    }

    #[test]
    fn inside_a_queue_higher_priority_goes_first_then_the_oldest_then_by_name() {
        let q = queue(
            "q",
            100_000,
            vec![
                with(0, 10, group("x", "old-low", 1_000)),
                with(0, 20, group("x", "young-low-b", 1_000)),
                with(0, 20, group("x", "young-low-a", 1_000)),
                with(9, 30, group("x", "youngest-high", 1_000)),
                with(9, 25, group("y", "young-high", 1_000)),
            ],
        );
        let queues = [q];
        let order = admission_order(&queues, Options::default());
        assert_eq!(
            names(&order),
            [
                "young-high",
                "youngest-high",
                "old-low",
                "young-low-a",
                "young-low-b"
            ]
        );
    }

    #[test]
    fn namespace_fair_share_takes_turns_between_namespaces_of_one_priority() {
        let waiting = vec![
            with(0, 1, group("x", "x1", 1_000)),
            with(0, 2, group("x", "x2", 1_000)),
            with(0, 3, group("x", "x3", 1_000)),
            with(0, 4, group("y", "y1", 1_000)),
        ];
        let plain = queue("q", 10_000, waiting.clone());
        let order = admission_order(std::slice::from_ref(&plain), Options::default());
        assert_eq!(names(&order), ["x1", "x2", "x3", "y1"]);
        assert!(order.iter().all(|p| p.namespace_share.is_none()));

        let by_namespace = Options {
            namespace_fair_share: true,
        };
        let order = admission_order(std::slice::from_ref(&plain), by_namespace);
        assert_eq!(names(&order), ["x1", "y1", "x2", "x3"]);
        assert_eq!(order[2].namespace_share.map(|s| s.as_f64()), Some(0.1));

        // What a namespace already holds counts: y is behind, so it goes first.
        let mut held = plain;
        held.namespace_allocated.insert("x".into(), cpu(3_000));
        let queues = [held];
        let order = admission_order(&queues, by_namespace);
        assert_eq!(names(&order), ["y1", "x1", "x2", "x3"]);
    }

    #[test]
    fn priority_still_beats_namespace_share() {
        let mut q = queue(
            "q",
            10_000,
            vec![
                with(5, 9, group("x", "x-high", 1_000)),
                with(0, 1, group("y", "y-low", 1_000)),
            ],
        );
        q.namespace_allocated.insert("x".into(), cpu(9_000));
        let queues = [q];
        let by_namespace = Options {
            namespace_fair_share: true,
        };
        let order = admission_order(&queues, by_namespace);
        assert_eq!(names(&order), ["x-high", "y-low"]);
    }

    #[test]
    fn a_group_that_was_not_admitted_does_not_count_against_its_queue() {
        let a = queue(
            "a",
            10_000,
            vec![
                with(0, 1, group("x", "too-big", 9_000)),
                with(0, 2, group("x", "small", 1_000)),
            ],
        );
        let b = queue("b", 10_000, vec![group("y", "other", 1_000)]);
        let queues = [a, b];

        let counted = admission_order(&queues, Options::default());
        assert_eq!(names(&counted), ["too-big", "other", "small"]);

        let mut pass = AdmissionPass::new(&queues, Options::default());
        pass.skip_last(); // Before the first pick: nothing to skip.
        let first = pass.next().unwrap();
        assert_eq!(&*first.group.key.name, "too-big");
        pass.skip_last();
        let rest: Vec<String> = pass.map(|p| p.group.key.name.to_string()).collect();
        assert_eq!(rest, ["small", "other"]);
    }

    #[test]
    fn group_requests_for_a_resource_the_queue_deserves_none_of_send_it_to_the_back() {
        let mut gpu_job = group("x", "gpu-job", 1_000);
        gpu_job.requests.set("nvidia.com/gpu", 1);
        let a = queue(
            "a",
            10_000,
            vec![gpu_job, with(0, 1, group("x", "a-cpu", 1_000))],
        );
        let b = queue(
            "b",
            10_000,
            (0..3)
                .map(|i| group("y", &format!("b{i}"), 3_000))
                .collect(),
        );
        let queues = [a, b];
        let order = admission_order(&queues, Options::default());
        assert_eq!(names(&order), ["gpu-job", "b0", "b1", "b2", "a-cpu"]);
        assert!(order[4].queue_share.is_unbounded());
    }

    #[test]
    fn queues_with_nothing_waiting_take_no_turn() {
        let empty: QueueSnapshot = QueueSnapshot::new("empty", cpu(1));
        let queues = [empty];
        let order = admission_order(&queues, Options::default());
        assert!(order.is_empty());
        assert!(admission_order::<GroupKey>(&[], Options::default()).is_empty());
    }

    mod properties {
        use std::collections::BTreeSet;

        use proptest::prelude::*;

        use super::*;

        /// Up to six queues of up to twelve groups; deserved and requests over cpu and gpu.
        fn queues() -> impl Strategy<Value = Vec<QueueSnapshot>> {
            let group = (0usize..3, 0i64..4_000, 0i64..3, -1i32..2, 0i64..5);
            let queue = (
                0i64..20_000,
                0i64..8,
                0i64..10_000,
                0i64..4,
                -1i32..2,
                prop::collection::vec(group, 0..12),
                prop::collection::vec(0i64..3_000, 3),
            );
            prop::collection::vec(queue, 1..6).prop_map(|specs| {
                specs
                    .into_iter()
                    .enumerate()
                    .map(|(qi, (dc, dg, ac, ag, priority, groups, ns_held))| {
                        let mut q = QueueSnapshot::new(
                            format!("q{qi}"),
                            Resources::from([("cpu", dc), ("nvidia.com/gpu", dg)]),
                        );
                        q.priority = priority;
                        q.allocated = Resources::from([("cpu", ac), ("nvidia.com/gpu", ag)]);
                        for (n, held) in ns_held.into_iter().enumerate() {
                            q.namespace_allocated.insert(format!("ns{n}"), cpu(held));
                        }
                        q.waiting = groups
                            .into_iter()
                            .enumerate()
                            .map(|(gi, (ns, c, g, priority, created))| WaitingGroup {
                                key: GroupKey::new(format!("ns{ns}"), format!("q{qi}-g{gi}")),
                                namespace: format!("ns{ns}"),
                                requests: Resources::from([("cpu", c), ("nvidia.com/gpu", g)]),
                                priority,
                                created,
                            })
                            .collect();
                        q
                    })
                    .collect()
            })
        }

        fn shuffled(queues: Vec<QueueSnapshot>) -> impl Strategy<Value = Vec<QueueSnapshot>> {
            let each: Vec<_> = queues
                .into_iter()
                .map(|q| {
                    Just(q.waiting.clone())
                        .prop_shuffle()
                        .prop_map(move |waiting| QueueSnapshot {
                            waiting,
                            ..q.clone()
                        })
                })
                .collect();
            each.prop_shuffle()
        }

        fn summary(order: &[Pick<'_>]) -> Vec<(String, GroupKey, f64, Option<f64>)> {
            order
                .iter()
                .map(|p| {
                    (
                        p.queue.name.clone(),
                        p.group.key.clone(),
                        p.queue_share.as_f64(),
                        p.namespace_share.map(|s| s.as_f64()),
                    )
                })
                .collect()
        }

        proptest! {
            #[test]
            fn the_order_does_not_depend_on_how_queues_and_groups_are_listed(
                (queues, reordered) in queues()
                    .prop_flat_map(|q| (Just(q.clone()), shuffled(q))),
                by_namespace in any::<bool>(),
            ) {
                let options = Options { namespace_fair_share: by_namespace };
                let once = summary(&admission_order(&queues, options));
                prop_assert_eq!(&once, &summary(&admission_order(&queues, options)));
                prop_assert_eq!(&once, &summary(&admission_order(&reordered, options)));
            }

            #[test]
            fn every_waiting_group_is_ordered_exactly_once_and_priority_first_within_its_queue(
                queues in queues(),
                by_namespace in any::<bool>(),
            ) {
                let options = Options { namespace_fair_share: by_namespace };
                let order = admission_order(&queues, options);
                let keys: BTreeSet<&GroupKey> = order.iter().map(|p| &p.group.key).collect();
                let total: usize = queues.iter().map(|q| q.waiting.len()).sum();
                prop_assert_eq!(order.len(), total);
                prop_assert_eq!(keys.len(), total);
                for q in &queues {
                    let picks: Vec<&Pick<'_>> =
                        order.iter().filter(|p| p.queue.name == q.name).collect();
                    for pair in picks.windows(2) {
                        prop_assert!(pair[0].group.priority >= pair[1].group.priority);
                        prop_assert!(pair[0].queue_share <= pair[1].queue_share);
                    }
                }
            }

            #[test]
            fn each_pick_goes_to_a_queue_with_the_lowest_share_among_those_still_waiting(
                queues in queues(),
                by_namespace in any::<bool>(),
                skips in prop::collection::vec(any::<bool>(), 64),
            ) {
                let options = Options { namespace_fair_share: by_namespace };
                let mut allocated: BTreeMap<&str, Resources> =
                    queues.iter().map(|q| (q.name.as_str(), q.allocated.clone())).collect();
                let mut left: BTreeMap<&str, usize> =
                    queues.iter().map(|q| (q.name.as_str(), q.waiting.len())).collect();
                let mut pass = AdmissionPass::new(&queues, options);
                let mut n = 0;
                while let Some(pick) = pass.next() {
                    let share = |q: &QueueSnapshot| DominantShare::of(&allocated[q.name.as_str()], &q.deserved);
                    let mine = share(pick.queue);
                    prop_assert_eq!(mine, pick.queue_share);
                    for other in queues.iter().filter(|q| left[q.name.as_str()] > 0) {
                        let theirs = share(other);
                        prop_assert!(
                            mine < theirs
                                || (mine == theirs && (Reverse(pick.queue.priority), &pick.queue.name)
                                    <= (Reverse(other.priority), &other.name)),
                            "picked {} at {} while {} waits at {}", pick.queue.name, mine, other.name, theirs
                        );
                    }
                    *left.get_mut(pick.queue.name.as_str()).unwrap() -= 1;
                    if skips[n % skips.len()] {
                        pass.skip_last();
                    } else {
                        allocated.get_mut(pick.queue.name.as_str()).unwrap().add(&pick.group.requests);
                    }
                    n += 1;
                }
            }
        }
    }
}
