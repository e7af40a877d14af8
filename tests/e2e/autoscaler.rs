//! The node autoscaler on the local control plane: Karpenter with its kwok provider, as
//! `e2e/up --autoscaler karpenter` runs it (the NodePool `default` of
//! e2e/autoscaler/karpenter/nodepool.yaml and the instance types beside it), and Gangplank
//! growing the cluster for gangs through it (`--node-autoscaling true --growth-timeout 30`, as
//! e2e/up starts it beside Karpenter): stand-in pods that Karpenter provisions for, then the gang
//! admitted whole on the new room. Run them on a cluster of their own
//! (`e2e/test --autoscaler karpenter --nodes 2 -- autoscaler::`, as `./test.sh` does): Karpenter
//! provisions for every pod pending for want of room, which the rest of the suite expects to
//! wait. On a cluster started without Karpenter they fail, saying so; `e2e/test` leaves them
//! out of such a run, and says it did.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use gangplank::api::labels::ADMISSION_GATE;
use gangplank::api::{PodGroup, Queue, QueueSpec};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use serde_json::json;

use crate::queues::{QueueGuard, create_gang, create_queue, delete_queue, not_admitted};
use crate::support::{Cluster, TestNamespace, eventually, managed_pod, pod, pod_group, running};

/// The CPUs the largest instance type the NodePool offers (gpu-8x, 96 CPUs, less the 100m kwok
/// reserves for the kubelet) leaves to pods: a pod may ask for more than any node of the cluster
/// has, up to this.
const LARGEST_INSTANCE_CPU_MILLIS: i64 = 95_900;

/// Gangplank's namespace under e2e/up, where it creates the stand-ins.
const GANGPLANK_NAMESPACE: &str = "gangplank-system";
/// The label of every stand-in pod, and the annotation naming the PodGroup it stands in for.
const STAND_IN_LABEL: &str = "scheduling.gangplank.dev/stand-in";
const STAND_IN_FOR_ANNOTATION: &str = "scheduling.gangplank.dev/stand-in-for";
/// Gangplank's `--growth-timeout` when e2e/up runs it beside Karpenter.
const GROWTH_TIMEOUT_SECONDS: u64 = 30;

/// Whole cores more than half of what the largest instance type leaves to pods: no two pods of
/// this size fit on one node of any type the NodePool offers.
const WHOLE_NODE_CPU: i64 = LARGEST_INSTANCE_CPU_MILLIS / 2 / 1000 + 1;

fn karpenter_api(client: &Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("karpenter.sh", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Whether e2e/up started Karpenter: its NodePool `default` is there (on a cluster without
/// Karpenter, the NodePool API itself is not served).
async fn karpenter_runs(client: &Client) -> bool {
    match karpenter_api(client, "NodePool").get_opt("default").await {
        Ok(found) => found.is_some(),
        Err(kube::Error::Api(status)) if status.code == 404 => false,
        Err(e) => panic!("failed to look for the NodePool default: {e}"),
    }
}

/// The cluster, which e2e/up started with Karpenter beside it: a test of growth cannot pass
/// without it.
async fn karpenter_cluster() -> Cluster {
    let cluster = Cluster::connect().await;
    assert!(
        karpenter_runs(&cluster.client).await,
        "Karpenter does not run: bring the cluster up with e2e/up --autoscaler karpenter"
    );
    cluster
}

fn cpu_millis(quantity: &Quantity) -> i64 {
    let text = &quantity.0;
    match text.strip_suffix('m') {
        Some(millis) => millis.parse().unwrap(),
        None => (text.parse::<f64>().unwrap() * 1000.0).round() as i64,
    }
}

/// The most CPU any node of the cluster has for pods, in millicores.
async fn largest_node_cpu_millis(nodes: &Api<Node>) -> i64 {
    let list = nodes.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .filter_map(|n| n.status.as_ref()?.allocatable.as_ref()?.get("cpu"))
        .map(cpu_millis)
        .max()
        .expect("the cluster has no node with allocatable CPU")
}

/// The NodeClaim Karpenter made for `node`. Karpenter writes the node's name into its
/// NodeClaim's status when it sees the node register, which can come after a pod is bound
/// there, so this waits up to 30 s for it.
async fn node_claim_of(claims: &Api<DynamicObject>, node: &str) -> DynamicObject {
    eventually(
        &format!("a NodeClaim to name the node {node}"),
        30,
        || async {
            let list = claims.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .find(|c| c.data["status"]["nodeName"].as_str() == Some(node))
        },
    )
    .await
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_larger_than_every_node_makes_karpenter_add_one_that_goes_when_the_pod_does() {
    let cluster = karpenter_cluster().await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    let claims = karpenter_api(&cluster.client, "NodeClaim");
    no_node_claims_left(&claims).await;
    let ns = cluster.namespace("autoscaler").await;
    let pods = ns.api::<Pod>();

    // A whole CPU more than any node has (so no node of today's can take it), with a full
    // node's GPUs: only the NodePool's gpu-8x fits it.
    let cpu = largest_node_cpu_millis(&nodes).await / 1000 + 1;
    assert!(
        cpu * 1000 <= LARGEST_INSTANCE_CPU_MILLIS,
        "this test needs nodes of fewer CPUs than Karpenter's largest instance type (gpu-8x, 96 CPUs), not {}",
        cpu - 1
    );
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "larger"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpu.to_string(), "nvidia.com/gpu": "8"},
                    "limits": {"nvidia.com/gpu": "8"}}}]}
        })),
    )
    .await
    .unwrap();

    let larger = running(&pods, "larger", 120).await;
    let node_name = larger.spec.unwrap().node_name.unwrap();
    let node = nodes.get(&node_name).await.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("karpenter.sh/nodepool").map(String::as_str),
        Some("default"),
        "the pod ran on {node_name}, not on a node of the NodePool default"
    );
    assert_eq!(
        labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("gpu-8x")
    );
    let claim = node_claim_of(&claims, &node_name).await;
    let claim_name = claim.metadata.name.unwrap();

    pods.delete("larger", &DeleteParams::default())
        .await
        .unwrap();
    // Consolidation: 5 s after the node empties (the NodePool's consolidateAfter), then
    // Karpenter's own 15 s check that the node is still empty, then the drain.
    eventually(
        &format!("Karpenter to remove the empty node {node_name} and its NodeClaim {claim_name}"),
        180,
        || async {
            let node_gone = nodes.get_opt(&node_name).await.unwrap().is_none();
            let claim_gone = claims.get_opt(&claim_name).await.unwrap().is_none();
            (node_gone && claim_gone).then_some(())
        },
    )
    .await;
    ns.delete().await;
}

/// Waits until the NodePool holds no NodeClaim: nodes an earlier test left for Karpenter to
/// remove (35 to 45 s after their last pod went) would take this test's pods.
async fn no_node_claims_left(claims: &Api<DynamicObject>) {
    let of_the_pool = ListParams::default().labels("karpenter.sh/nodepool=default");
    eventually(
        "the NodePool default to hold no NodeClaim left by an earlier test",
        180,
        || async {
            let list = claims.list(&of_the_pool).await.unwrap();
            list.items.is_empty().then_some(())
        },
    )
    .await;
}

/// The NodePool `default`'s limit of `nvidia.com/gpu`.
async fn node_pool_gpu_limit(client: &Client) -> i64 {
    let pool = karpenter_api(client, "NodePool")
        .get("default")
        .await
        .unwrap();
    let limit = pool.data["spec"]["limits"]["nvidia.com/gpu"].as_str();
    limit.and_then(|l| l.parse().ok()).unwrap_or_else(|| {
        panic!("the NodePool default has no whole nvidia.com/gpu limit: {limit:?}")
    })
}

/// Names of the stand-in pods Gangplank has for PodGroup `group` of `namespace`.
async fn stand_ins_for(client: &Client, namespace: &str, group: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), GANGPLANK_NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels(&format!("{STAND_IN_LABEL}=true")))
        .await
        .unwrap();
    let group = format!("{namespace}/{group}");
    list.items
        .into_iter()
        .filter(|p| {
            let annotations = p.metadata.annotations.as_ref();
            annotations.and_then(|a| a.get(STAND_IN_FOR_ANNOTATION)) == Some(&group)
        })
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// The messages of the `FailedScheduling` Events Karpenter wrote about the pods `names` of
/// Gangplank's namespace.
async fn karpenter_said_about(client: &Client, names: &BTreeSet<String>) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), GANGPLANK_NAMESPACE);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .filter(|e| {
            let source = e.source.as_ref().and_then(|s| s.component.as_deref());
            source == Some("karpenter") || e.reporting_component.as_deref() == Some("karpenter")
        })
        .filter(|e| {
            let about = e.involved_object.name.as_ref();
            about.is_some_and(|name| names.contains(name))
        })
        .filter_map(|e| e.message)
        .collect()
}

/// Waits until Gangplank has deleted every stand-in of PodGroup `group` of `ns`.
async fn no_stand_ins_left(client: &Client, ns: &TestNamespace, group: &str) {
    eventually(
        &format!("the stand-ins of {group} to be gone from {GANGPLANK_NAMESPACE}"),
        30,
        || async {
            stand_ins_for(client, &ns.name, group)
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

/// A PodGroup `name` of `size` members in `queue`, each asking `cpu` cores and `gpus`
/// `nvidia.com/gpu`.
async fn create_gpu_gang(
    ns: &TestNamespace,
    queue: &str,
    name: &str,
    size: i64,
    cpu: i64,
    gpus: i64,
) {
    let mut group = pod_group(name, size as i32, None);
    group.spec.queue = Some(queue.to_owned());
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .unwrap_or_else(|e| panic!("failed to create PodGroup {name}: {e}"));
    let pods = ns.api::<Pod>();
    for i in 0..size {
        let mut member = managed_pod(&format!("{name}-{i}"), Some(name), cpu as u32, json!({}));
        let resources = member.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        for list in [resources.requests.as_mut(), resources.limits.as_mut()] {
            list.unwrap()
                .insert("nvidia.com/gpu".to_string(), Quantity(gpus.to_string()));
        }
        pods.create(&PostParams::default(), &member)
            .await
            .unwrap_or_else(|e| panic!("failed to create pod {name}-{i}: {e}"));
    }
}

fn capability(of: &[(&str, i64)]) -> QueueSpec {
    QueueSpec {
        capability: of
            .iter()
            .map(|(resource, amount)| (resource.to_string(), Quantity(amount.to_string())))
            .collect(),
        ..QueueSpec::default()
    }
}

/// What a watch showed of one pod at one moment.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    bound: bool,
    gated: bool,
    /// For a stand-in: the PodGroup it stands in for, as `namespace/name`.
    stand_in_for: Option<String>,
    /// Deleted, and going.
    deleting: bool,
}

impl Seen {
    fn of(pod: &Pod) -> Seen {
        let spec = pod.spec.as_ref();
        let gates = spec
            .and_then(|s| s.scheduling_gates.as_deref())
            .unwrap_or_default();
        Seen {
            bound: spec.and_then(|s| s.node_name.as_ref()).is_some(),
            gated: gates.iter().any(|g| g.name == ADMISSION_GATE),
            stand_in_for: pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(STAND_IN_FOR_ANNOTATION).cloned()),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// A namespace's pods at one moment, by name.
type Moment = BTreeMap<String, Seen>;

/// Every moment a watch of pods showed, one per change it delivered, from a watch that listed
/// them before the test made any; records until dropped.
struct PodHistory {
    task: tokio::task::JoinHandle<()>,
    moments: Arc<Mutex<Vec<Moment>>>,
    /// Lists after the first: each one may have skipped changes.
    relists: Arc<Mutex<usize>>,
}

impl PodHistory {
    async fn record(pods: Api<Pod>, config: watcher::Config) -> PodHistory {
        let moments = Arc::<Mutex<Vec<Moment>>>::default();
        let relists = Arc::<Mutex<usize>>::default();
        let (listed, first_list) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let (moments, relists) = (moments.clone(), relists.clone());
            async move {
                let mut listed = Some(listed);
                let (mut now, mut listing) = (Moment::new(), Moment::new());
                let events = watcher(pods, config).default_backoff();
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
                    match event {
                        Ok(watcher::Event::Apply(p)) => {
                            now.insert(name(&p), Seen::of(&p));
                        }
                        Ok(watcher::Event::Delete(p)) => {
                            now.remove(&name(&p));
                        }
                        Ok(watcher::Event::Init) => {
                            listing.clear();
                            continue;
                        }
                        Ok(watcher::Event::InitApply(p)) => {
                            listing.insert(name(&p), Seen::of(&p));
                            continue;
                        }
                        Ok(watcher::Event::InitDone) => {
                            now = std::mem::take(&mut listing);
                            match listed.take() {
                                Some(listed) => _ = listed.send(()),
                                None => *relists.lock().unwrap() += 1,
                            }
                        }
                        // The backoff retries the watch.
                        Err(_) => continue,
                    }
                    moments.lock().unwrap().push(now.clone());
                }
            }
        });
        first_list
            .await
            .expect("the pod watch ended before its first list");
        PodHistory {
            task,
            moments,
            relists,
        }
    }

    /// `gang`'s members (pods named `<gang>-<i>`) at each moment, with the moment's index.
    fn of_gang(&self, gang: &str) -> Vec<(usize, Vec<(String, Seen)>)> {
        let prefix = format!("{gang}-");
        let moments = self.moments.lock().unwrap();
        moments
            .iter()
            .enumerate()
            .map(|(at, moment)| {
                let members = moment
                    .iter()
                    .filter(|(name, _)| name.starts_with(&prefix))
                    .map(|(name, seen)| (name.clone(), seen.clone()));
                (at, members.collect())
            })
            .collect()
    }

    /// The moments at which a member of `gang` was bound while another still carried the
    /// admission gate.
    fn partial(&self, gang: &str) -> Vec<Vec<(String, Seen)>> {
        self.of_gang(gang)
            .into_iter()
            .map(|(_, members)| members)
            .filter(|m| m.iter().any(|(_, s)| s.bound) && m.iter().any(|(_, s)| s.gated))
            .collect()
    }

    /// The index of the first moment at which `size` members of `gang` were bound.
    fn whole_at(&self, gang: &str, size: usize) -> Option<usize> {
        self.of_gang(gang)
            .into_iter()
            .find(|(_, m)| m.iter().filter(|(_, s)| s.bound).count() >= size)
            .map(|(at, _)| at)
    }

    /// The members of `gang` that carried the admission gate at any moment.
    fn ever_gated(&self, gang: &str) -> BTreeSet<String> {
        self.of_gang(gang)
            .into_iter()
            .flat_map(|(_, members)| members)
            .filter(|(_, s)| s.gated)
            .map(|(name, _)| name)
            .collect()
    }

    /// The members of `gang` that were bound at any moment.
    fn ever_bound(&self, gang: &str) -> BTreeSet<String> {
        self.of_gang(gang)
            .into_iter()
            .flat_map(|(_, members)| members)
            .filter(|(_, s)| s.bound)
            .map(|(name, _)| name)
            .collect()
    }

    /// The moments at which stand-ins not being deleted stood in for more than one PodGroup of
    /// `namespace`, with those groups: they grew the cluster at once.
    fn growing_at_once(&self, namespace: &str) -> Vec<BTreeSet<String>> {
        let prefix = format!("{namespace}/");
        let moments = self.moments.lock().unwrap();
        moments
            .iter()
            .map(|moment| {
                let asking = moment.values().filter(|s| !s.deleting);
                let groups = asking.filter_map(|s| s.stand_in_for.clone());
                groups
                    .filter(|g| g.starts_with(&prefix))
                    .collect::<BTreeSet<_>>()
            })
            .filter(|groups| groups.len() > 1)
            .collect()
    }

    /// Panics when the watch had to list again: the moments may then miss changes.
    fn assert_complete(&self) {
        let relists = *self.relists.lock().unwrap();
        assert_eq!(
            relists, 0,
            "the pod watch listed again {relists} times and may have missed changes"
        );
    }
}

impl Drop for PodHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_of_four_whole_node_pods_grows_the_cluster_binds_whole_never_partial_and_its_nodes_go_after_it()
 {
    let cluster = karpenter_cluster().await;
    let claims = karpenter_api(&cluster.client, "NodeClaim");
    no_node_claims_left(&claims).await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    assert!(
        WHOLE_NODE_CPU * 1000 > largest_node_cpu_millis(&nodes).await,
        "this test needs nodes of fewer than {WHOLE_NODE_CPU} CPUs"
    );
    let queue = create_queue(
        &cluster.client,
        "grow-whole",
        capability(&[("cpu", 4 * WHOLE_NODE_CPU)]),
    )
    .await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("grow-whole").await;
    let pods = ns.api::<Pod>();
    let history = PodHistory::record(pods.clone(), watcher::Config::default()).await;

    let submitted = tokio::time::Instant::now();
    create_gang(&ns, &queue, "whole", 4, WHOLE_NODE_CPU as u32, None, None).await;
    eventually("all four members of the gang bound", 120, || async {
        history.whole_at("whole", 4)
    })
    .await;
    eprintln!(
        "the gang of four was bound whole {:?} after it was submitted",
        submitted.elapsed()
    );
    history.assert_complete();
    assert_eq!(
        history.ever_gated("whole").len(),
        4,
        "the members did not all wait at the admission gate first"
    );
    assert_eq!(
        history.partial("whole"),
        Vec::<Vec<(String, Seen)>>::new(),
        "members of the gang were bound while others still waited at the admission gate"
    );

    let mut on = BTreeSet::new();
    for member in pods.list(&Default::default()).await.unwrap().items {
        let node_name = member.spec.unwrap().node_name.unwrap();
        let node = nodes.get(&node_name).await.unwrap();
        let pool = node
            .metadata
            .labels
            .unwrap_or_default()
            .remove("karpenter.sh/nodepool");
        assert_eq!(
            pool.as_deref(),
            Some("default"),
            "a member was bound on {node_name}, not on a node Karpenter added"
        );
        on.insert(node_name);
    }
    assert_eq!(on.len(), 4, "the four members share nodes: {on:?}");
    let mut made_for_it = Vec::new();
    for node in &on {
        let claim = node_claim_of(&claims, node).await;
        made_for_it.push(claim.metadata.name.unwrap());
    }
    no_stand_ins_left(&cluster.client, &ns, "whole").await;

    ns.delete().await;
    eventually(
        &format!("Karpenter to remove the gang's NodeClaims {made_for_it:?}"),
        180,
        || async {
            for claim in &made_for_it {
                if claims.get_opt(claim).await.unwrap().is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_beyond_the_node_pools_gpu_limit_waits_whole_then_fails_to_grow_saying_why_and_blocks_no_one()
 {
    let cluster = karpenter_cluster().await;
    no_node_claims_left(&karpenter_api(&cluster.client, "NodeClaim")).await;
    let nodes = Api::<Node>::all(cluster.client.clone());
    // Each member asks a CPU more than today's nodes have and a whole gpu-8x's GPUs, so needs a
    // gpu-8x of its own: one member more than the NodePool's GPU limit allows.
    let cpu = largest_node_cpu_millis(&nodes).await / 1000 + 1;
    let members = node_pool_gpu_limit(&cluster.client).await / 8 + 1;
    let small_cpu = 2;
    let queue = create_queue(
        &cluster.client,
        "grow-beyond",
        capability(&[
            ("cpu", members * cpu + 2 * small_cpu),
            ("nvidia.com/gpu", members * 8),
        ]),
    )
    .await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("grow-beyond").await;
    let groups = ns.api::<PodGroup>();
    let history = PodHistory::record(ns.api::<Pod>(), watcher::Config::default()).await;

    create_gpu_gang(&ns, &queue, "beyond", members, cpu, 8).await;
    let asked = eventually(
        "the gang beyond the limit to wait for growth",
        30,
        || async {
            let (reason, message) = not_admitted(&groups, "beyond").await?;
            (reason == "WaitingForGrowth").then_some(message)
        },
    )
    .await;
    let waiting_since = tokio::time::Instant::now();
    assert!(
        asked.contains(&members.to_string()),
        "the wait for growth does not say how many stand-ins were asked for the {members} members: {asked}"
    );
    let stand_in_names: BTreeSet<String> =
        eventually("the stand-ins of the gang beyond the limit", 30, || async {
            let names = stand_ins_for(&cluster.client, &ns.name, "beyond").await;
            (names.len() == members as usize).then(|| names.into_iter().collect())
        })
        .await;

    create_gang(&ns, &queue, "small", 2, small_cpu as u32, None, None).await;
    eventually(
        "the small gang of the same queue bound whole",
        60,
        || async { history.whole_at("small", 2) },
    )
    .await;
    let (reason, message) = not_admitted(&groups, "beyond")
        .await
        .expect("the gang beyond the limit was admitted");
    assert_eq!(
        reason, "WaitingForGrowth",
        "the small gang ran only once the large one had stopped growing: {message}"
    );

    let deadline = GROWTH_TIMEOUT_SECONDS + 30;
    let failed = eventually(
        "the gang beyond the limit to fail to grow",
        deadline.saturating_sub(waiting_since.elapsed().as_secs()),
        || async {
            let (reason, message) = not_admitted(&groups, "beyond").await?;
            (reason == "GrowthFailed").then_some(message)
        },
    )
    .await;
    eprintln!(
        "GrowthFailed {:?} after the wait for growth began: {failed}",
        waiting_since.elapsed()
    );
    // Karpenter says first that the NodePool's limits stop it, then, once it has added what
    // the limits allow, that no node fits: Gangplank passes on the last thing it said.
    let karpenter_said = karpenter_said_about(&cluster.client, &stand_in_names).await;
    assert!(
        karpenter_said.iter().any(|m| m.contains("exceed limits")),
        "Karpenter never said the NodePool's limits stopped it: {karpenter_said:?}"
    );
    assert!(
        karpenter_said.iter().any(|m| failed.contains(m.as_str())),
        "GrowthFailed does not pass on what Karpenter said about a stand-in ({karpenter_said:?}): {failed}"
    );
    history.assert_complete();
    assert_eq!(
        history.ever_bound("beyond"),
        BTreeSet::new(),
        "members of the gang beyond the limit were bound"
    );
    no_stand_ins_left(&cluster.client, &ns, "beyond").await;

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn gangs_of_two_queues_that_both_need_growth_get_the_new_room_in_fair_share_order() {
    let cluster = karpenter_cluster().await;
    no_node_claims_left(&karpenter_api(&cluster.client, "NodeClaim")).await;
    let client = &cluster.client;
    // Both queues under one parent whose capability first keeps their large gangs waiting, so
    // that raising it lets both in at the same admission pass.
    let small_cpu = 2;
    let parent = create_queue(client, "grow-order", capability(&[("cpu", 2 * small_cpu)])).await;
    let _parent_guard = QueueGuard(parent.clone());
    let child = QueueSpec {
        parent: Some(parent.clone()),
        ..QueueSpec::default()
    };
    let a = create_queue(client, "grow-order-a", child.clone()).await;
    let _a_guard = QueueGuard(a.clone());
    let b = create_queue(client, "grow-order-b", child).await;
    let _b_guard = QueueGuard(b.clone());
    let ns = cluster.namespace("grow-order").await;
    let groups = ns.api::<PodGroup>();
    let history = PodHistory::record(ns.api::<Pod>(), watcher::Config::default()).await;
    let stand_ins = PodHistory::record(
        Api::namespaced(client.clone(), GANGPLANK_NAMESPACE),
        watcher::Config::default().labels(&format!("{STAND_IN_LABEL}=true")),
    )
    .await;

    // B holds a running small gang; A holds nothing.
    create_gang(&ns, &b, "b-small", 1, small_cpu as u32, None, None).await;
    eventually("B's small gang bound", 60, || async {
        history.whole_at("b-small", 1)
    })
    .await;
    create_gang(&ns, &b, "b-large", 2, WHOLE_NODE_CPU as u32, None, None).await;
    create_gang(&ns, &a, "a-large", 2, WHOLE_NODE_CPU as u32, None, None).await;
    eventually(
        "both large gangs waiting for the parent's capability",
        30,
        || async {
            not_admitted(&groups, "a-large").await?;
            not_admitted(&groups, "b-large").await?;
            Some(())
        },
    )
    .await;
    Api::<Queue>::all(client.clone())
        .patch(
            &parent,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"capability":
                {"cpu": (small_cpu + 4 * WHOLE_NODE_CPU).to_string()}}})),
        )
        .await
        .unwrap();

    // Each growth succeeds at its first ask (the NodePool has room for both), so both gangs
    // are bound before a growth could have timed out: a gang admitted into its stand-ins' room
    // that cannot take it (another gang's stand-ins took it) would wait out a growth timeout.
    let (a_at, b_at) = eventually(
        "both large gangs bound whole, within the growth timeout",
        GROWTH_TIMEOUT_SECONDS,
        || async {
            Some((
                history.whole_at("a-large", 2)?,
                history.whole_at("b-large", 2)?,
            ))
        },
    )
    .await;
    history.assert_complete();
    stand_ins.assert_complete();
    assert_eq!(
        stand_ins.growing_at_once(&ns.name),
        Vec::<BTreeSet<String>>::new(),
        "both gangs had stand-ins at once, though Gangplank grows for one gang at a time (--growth-at-once 1)"
    );
    assert!(
        a_at < b_at,
        "B's gang (moment {b_at}) was bound before A's (moment {a_at}), though A held less of its share"
    );
    for gang in ["a-large", "b-large"] {
        assert_eq!(
            history.ever_gated(gang).len(),
            2,
            "the members of {gang} did not all wait at the admission gate first"
        );
        assert_eq!(
            history.partial(gang),
            Vec::<Vec<(String, Seen)>>::new(),
            "members of {gang} were bound while others still waited at the admission gate"
        );
    }

    ns.delete().await;
    delete_queue(client, &a).await;
    delete_queue(client, &b).await;
    delete_queue(client, &parent).await;
}
