//! The cluster model: plain Rust values, no kube or axum types.
//!
//! These are what the policy code reads. They hold only the fields scheduling decisions need,
//! which keeps memory near the design's budget (5,000 nodes and 100,000 pods under 300 MiB) and
//! lets tests and benchmarks build a cluster in a few lines.

use std::collections::BTreeMap;
use std::sync::Arc;

pub use super::resources::{ResourceId, Resources};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// An effect this version does not know; kept so it is not silently ignored.
    Other(String),
}

impl TaintEffect {
    /// Whether a taint with this effect keeps untolerating pods off the node.
    pub fn blocks_scheduling(&self) -> bool {
        matches!(self, TaintEffect::NoSchedule | TaintEffect::NoExecute)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: TaintEffect,
}

/// A node as scheduling sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub allocatable: Resources,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Its `Ready` condition says `False` or `Unknown` (the kubelet stopped reporting, or
    /// reports the node unhealthy).
    pub not_ready: bool,
}

/// Prefix of the taints the node controllers put on unhealthy nodes (`not-ready`,
/// `unreachable`, `memory-pressure`, `disk-pressure`, `pid-pressure`, `network-unavailable`,
/// `unschedulable`, ...).
pub const NODE_CONDITION_TAINT_PREFIX: &str = "node.kubernetes.io/";

impl Node {
    /// Whether new pods may start here, as admission, fair share and reclaim count capacity:
    /// not cordoned, not NotReady, and no node-condition taint that keeps pods off. Other
    /// taints (a GPU pool's dedication, say) do not stop the node counting: the pods meant for
    /// it tolerate them.
    pub fn takes_new_pods(&self) -> bool {
        !self.unschedulable
            && !self.not_ready
            && !self.taints.iter().any(|t| {
                t.key.starts_with(NODE_CONDITION_TAINT_PREFIX)
                    && matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
            })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    /// The phase the API names (`status.phase`); a pod without one yet has just been created,
    /// and is Pending.
    pub fn of(phase: Option<&str>) -> PodPhase {
        match phase {
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some("Unknown") => PodPhase::Unknown,
            _ => PodPhase::Pending,
        }
    }

    /// The API's name of the phase.
    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }

    /// Succeeded and failed pods hold no resources on their node.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// A pod as scheduling sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`: set once the pod is bound.
    pub node_name: Option<String>,
    pub phase: PodPhase,
    /// What the pod holds on its node: its spec's requests (as the adapter's
    /// `gangplank::cache::convert::pod_requests` reads them) plus one `pods`.
    pub requests: Resources,
    /// The PodGroup the pod's labels or annotations name (aliases included, see
    /// `gangplank::api::labels::pod_group_of`), when the pod belongs to a gang.
    pub pod_group: Option<String>,
    /// The queue the pod's own labels or annotations name (`gangplank::api::labels::queue_of`);
    /// the group's and the namespace's defaults are applied by their readers.
    pub queue: Option<String>,
    /// `spec.priority`, resolved by the API server from the priority class; 0 when unset.
    pub priority: i32,
    /// `spec.schedulingGates` by name: while any is left the scheduler does not see the pod.
    pub scheduling_gates: Vec<String>,
    /// The pod carries Gangplank's record that it admitted it
    /// ([`crate::model::names::ADMITTED_ANNOTATION`]).
    pub admission_recorded: bool,
    /// `metadata.annotations` is not empty (the admission loop's release patch adds its record
    /// to them, or creates them).
    pub annotated: bool,
    /// `metadata.creationTimestamp` in seconds since the Unix epoch (0 when unknown): the age
    /// that orders waiting groups.
    pub created: i64,
    /// `status.startTime` in seconds since the Unix epoch: when the kubelet accepted the pod.
    /// With its group's expected runtime, when its room is expected back (backfill).
    pub started: Option<i64>,
    /// The gang size the pod's annotation `scheduling.gangplank.dev/min-member` asks for (a
    /// positive integer; on the leader of a LeaderWorkerSet replica, LWS's size annotation),
    /// so that the controller can create a missing PodGroup for pods that name a group nobody
    /// created.
    pub min_member: Option<u32>,
    /// `metadata.deletionTimestamp` is set: the pod is going away (evicted or deleted) and is
    /// not a candidate for reclaim again.
    pub deleting: bool,
    /// Its condition `DisruptionTarget` is True: it was ended to make room (an eviction for
    /// reclaim or preemption, a node going away), so a Failed phase is no failure of its own.
    pub disrupted: bool,
    /// A container names the marker resource `scheduling.gangplank.dev/managed`, at any amount
    /// (Gangplank's mutating webhook put it there): the only pods the extender binds, unless
    /// told otherwise.
    pub marked: bool,
    /// `spec.nodeSelector`: admission keeps a gang with a `topologyKey` in the domain a member
    /// already names, and adds the chosen domain to it when releasing.
    pub node_selector: BTreeMap<String, String>,
    /// `metadata.labels`, kept for a member of a group only: they split a gang into the
    /// instances of its sub-groups ([`crate::model::sub_groups`]).
    pub labels: Arc<BTreeMap<String, String>>,
    /// The workload that controls the pod, when the adapter groups pods by its kind (a Kubeflow
    /// training job, a RayCluster): the controller sizes a missing PodGroup from it.
    pub workload: Option<Arc<Workload>>,
    /// `spec.schedulerName` when it names another scheduler than `default-scheduler`.
    pub scheduler: Option<Arc<str>>,
    /// The pod's controller (ownerReference with `controller: true`), kept only for a pod that
    /// asks for its PodGroup by annotation ([`Pod::min_member`]) and belongs to no
    /// [`Pod::workload`]: the PodGroup made for it is owned by that controller. The leader of a
    /// LeaderWorkerSet replica names itself: the replica lives as long as its leader.
    pub controller: Option<Arc<Workload>>,
    /// The LeaderWorkerSet whose replica this pod leads (a leader that asks for its PodGroup by
    /// LWS's size annotation): the controller reads its startup policy to size that PodGroup.
    pub leader_worker_set: Option<Arc<str>>,
    /// The group this pod stands in for, when it is one of Gangplank's stand-in pods (label
    /// `scheduling.gangplank.dev/stand-in`, annotation `scheduling.gangplank.dev/stand-in-for`):
    /// room asked of a node autoscaler for that gang ([`crate::model::growth`]). The state
    /// believes it only in Gangplank's own namespace.
    pub stand_in_for: Option<GroupKey>,
}

/// The name of the scheduler a pod that names none gets.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// The scheduler names the cluster's schedulers serve, as the operator lists them; no list:
/// every name. A pod that names another is placed by nobody, so admission never lets its gang
/// hold room (see `crate::admit::plan`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedulers(Option<Arc<std::collections::BTreeSet<String>>>);

impl Schedulers {
    /// Exactly `names`.
    pub fn only(names: impl IntoIterator<Item = String>) -> Schedulers {
        Schedulers(Some(Arc::new(names.into_iter().collect())))
    }

    /// The name `pod` asks for, unless a scheduler serves it.
    pub fn unserved<'p>(&self, pod: &'p Pod) -> Option<&'p str> {
        self.unserved_name(pod.scheduler.as_deref())
    }

    /// `name` (`None`: [`DEFAULT_SCHEDULER`]), unless a scheduler serves it.
    pub fn unserved_name<'n>(&self, name: Option<&'n str>) -> Option<&'n str> {
        let name = name.filter(|n| !n.is_empty()).unwrap_or(DEFAULT_SCHEDULER);
        let served = self.0.as_ref().is_none_or(|names| names.contains(name));
        (!served).then_some(name)
    }
}

/// An object that controls pods, as their ownerReference names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// Prefix of a placeholder's UID; no API object's UID has it.
const PLACEHOLDER_UID: &str = "placeholder:";

impl Pod {
    /// Placeholder `index` of `group`: room its `minResources` keep for a member still to
    /// come ([`crate::model::owed`]), gated, asking `piece`, as old as the PodGroup.
    pub fn placeholder(group: &PodGroup, index: u32, piece: &Resources) -> Pod {
        Pod {
            uid: format!("{PLACEHOLDER_UID}{}/{index}", group.key),
            namespace: group.key.namespace.to_string(),
            name: group.key.name.to_string(),
            requests: piece.clone(),
            pod_group: Some(group.key.name.to_string()),
            scheduling_gates: vec![crate::model::names::ADMISSION_GATE.to_owned()],
            created: group.created,
            ..Pod::default()
        }
    }

    /// It stands for a member not created yet ([`Pod::placeholder`]).
    pub fn is_placeholder(&self) -> bool {
        self.uid.starts_with(PLACEHOLDER_UID)
    }

    /// Gangplank's admission gate is still on the pod.
    pub fn awaits_admission(&self) -> bool {
        self.scheduling_gates
            .iter()
            .any(|g| g == crate::model::names::ADMISSION_GATE)
    }
}

/// Names a pod group: PodGroups are namespaced, and a pod joins the group of its namespace.
///
/// The names are shared (`Arc<str>`): every admission pass copies the key of each waiting
/// group into its decision, twice for a group short of room, and a copy that allocates cost
/// a fifth of a pass over 10,000 groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl GroupKey {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        GroupKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The group `pod` belongs to, if any.
    pub fn of(pod: &Pod) -> Option<GroupKey> {
        pod.pod_group
            .as_ref()
            .map(|name| GroupKey::new(pod.namespace.clone(), name.clone()))
    }

    /// The key of `pod` as a group of one (a pod of a queue in no group), where admission,
    /// reclaim and the controller need a key: its namespace and UID, which no PodGroup has.
    pub fn lone(pod: &Pod) -> GroupKey {
        GroupKey::new(pod.namespace.as_str(), pod.uid.as_str())
    }
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A PodGroup as scheduling sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    pub key: GroupKey,
    /// Pods that must be placed together before any is bound.
    pub min_member: u32,
    /// Elastic upper bound; members beyond it are refused. `None`: no bound.
    pub max_member: Option<u32>,
    pub queue: String,
    /// How long the gang may go with no member placed before its placed members are released.
    pub schedule_timeout: std::time::Duration,
    pub min_resources: Resources,
    /// `maxWaitSeconds`: how long the group may wait for admission before it jumps the
    /// fair-share order (the queue's bound applies when `None`).
    pub max_wait: Option<std::time::Duration>,
    /// `expectedRuntimeSeconds`: how long the gang runs once started, when its owner says;
    /// lets it backfill room reserved for a larger group (see `crate::admit::plan`).
    pub expected_runtime: Option<std::time::Duration>,
    /// `topologyKey`: a node label whose value every member's node must share (see
    /// `crate::admit::plan`).
    pub topology_key: Option<String>,
    /// `preferredTopologyKey`: the narrowest level the gang would rather run in, tried before
    /// wider ones (see [`crate::model::Levels`]).
    pub preferred_topology_key: Option<String>,
    /// Admitted before its members exist: made for a Volcano PodGroup, whose operator creates
    /// the pods only once the PodGroup leaves `Pending`, or for a batch Job, whose controller
    /// creates them only once the group is admitted. While fewer than `minMember` members
    /// came, admission sees placeholders for the rest ([`crate::model::owed`]) and counts them
    /// as members.
    pub ahead: bool,
    /// Its members come in stages (a TrainJob's initializers, then its trainer nodes): those of
    /// a later stage are created only once an earlier one finished, so the room its admission
    /// keeps for members still to come (its placeholders, [`crate::model::owed`]) counts
    /// towards the quorum its binds wait for ([`crate::claims::quorum_count`]). Admitted ahead.
    pub in_stages: bool,
    /// When the admission pass last admitted the group with room kept for members still to
    /// come (placeholders, [`crate::model::owed`]), as recorded on the PodGroup (Unix
    /// seconds): that room is kept until the group's schedule timeout has passed since.
    pub admitted_at: Option<i64>,
    /// When the PodGroup was created (Unix seconds): its placeholders' age in the line.
    pub created: i64,
    /// The stock scheduler places the gang all or nothing itself: the group was made for a
    /// Workload API PodGroup of a gang policy, whose pods the scheduler's PodGroup cycle
    /// places on one snapshot and binds once all pass its Permit. The bind verb then binds
    /// each member at once instead of holding it for quorum (`docs/gangs.md`).
    pub placed_whole_by_scheduler: bool,
    /// `subGroups`: the gang's members in instances, each needed whole, and how many whole
    /// instances of each it needs to start ([`crate::model::sub_groups`]); empty for most.
    pub sub_groups: Vec<crate::model::sub_groups::SubGroup>,
}

impl PodGroup {
    /// A gang of `min_member` in `queue`, with every optional setting unset and the API's
    /// default schedule timeout.
    pub fn new(key: GroupKey, min_member: u32, queue: impl Into<String>) -> Self {
        PodGroup {
            key,
            min_member,
            max_member: None,
            queue: queue.into(),
            schedule_timeout: std::time::Duration::from_secs(
                crate::model::names::DEFAULT_SCHEDULE_TIMEOUT_SECONDS
                    .unsigned_abs()
                    .into(),
            ),
            min_resources: Resources::new(),
            max_wait: None,
            expected_runtime: None,
            topology_key: None,
            preferred_topology_key: None,
            ahead: false,
            in_stages: false,
            admitted_at: None,
            created: 0,
            placed_whole_by_scheduler: false,
            sub_groups: Vec::new(),
        }
    }

    /// Its admission with room kept for members still to come ([`PodGroup::admitted_at`])
    /// holds at `now` (Unix seconds): made, and its schedule timeout has not passed since.
    pub fn admission_holds_at(&self, now: i64) -> bool {
        self.admitted_at
            .is_some_and(|at| PodGroup::admission_holds(at, now, self.schedule_timeout))
    }

    /// Whether an admission made at `admitted_at` still holds at `now` (Unix seconds) for a
    /// group whose schedule timeout is `timeout`.
    pub fn admission_holds(admitted_at: i64, now: i64, timeout: std::time::Duration) -> bool {
        let timeout = i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX);
        now <= admitted_at.saturating_add(timeout)
    }
}

/// A Queue as admission and the controller see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub name: String,
    /// At least 1.
    pub weight: u32,
    /// Hard maximum per resource; a resource not listed is not bounded.
    pub capability: super::resources::Capability,
    /// Reserved minimum per resource.
    pub guarantee: Resources,
    pub parent: Option<String>,
    /// Breaks ties between queues of equal share; higher first.
    pub priority: i32,
    /// `spec.state` is `Open`: a closed queue admits nothing new.
    pub open: bool,
    /// Others may reclaim what it borrowed.
    pub reclaimable: bool,
    /// `maxWaitSeconds`: how long its groups may wait for admission before they jump the
    /// fair-share order; a group's own bound takes precedence.
    pub max_wait: Option<std::time::Duration>,
    /// `namespaceFairShare`: inside the queue, between groups of equal priority, the namespace
    /// holding less of the queue goes first.
    pub namespace_fair_share: bool,
}

impl Queue {
    /// An open queue of weight 1 with no bounds (what `spec: {}` gives).
    pub fn new(name: impl Into<String>) -> Self {
        Queue {
            name: name.into(),
            weight: 1,
            capability: super::resources::Capability::unbounded(),
            guarantee: Resources::new(),
            parent: None,
            priority: 0,
            open: true,
            reclaimable: true,
            max_wait: None,
            namespace_fair_share: false,
        }
    }
}
