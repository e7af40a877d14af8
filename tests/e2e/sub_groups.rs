//! Gangs of sub-groups (a PodGroup's `subGroupPolicy`): a disaggregated inference service of
//! prefill and decode instances and a router starts at its minimum, grows and yields a whole
//! instance at a time, through the stock kube-scheduler and Gangplank's extender; Volcano's
//! PodGroup with the same `subGroupPolicy` waits for its whole minimum the same way; a queue
//! below its share reclaims whole instances beyond a borrowing service's minimum; a PodGroup
//! whose `minMember` is not its minimum is refused naming the field. The cluster is `e2e/up`'s
//! default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;

use gangplank::api::pod_group::SubGroupPolicy;
use gangplank::api::volcano::{VolcanoPodGroup, VolcanoPodGroupSpec, VolcanoSubGroupPolicy};
use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::queues::{QueueGuard, bound, create_gang, create_queue};
use crate::support::{
    Cluster, TestNamespace, bound_and_staying_with_prefix, bound_with_prefix, default_queue,
    eventually, holds_for, managed_pod, pod, pod_group, running,
};

/// Instances of a role: (role, instances, members each, CPUs a member).
pub type Role = (&'static str, usize, usize, u32);

/// 4 prefill instances of 2 members of 2 CPUs, 2 decode instances of 4 members of 3 CPUs and
/// a router of 2; the service needs 2 prefill, 1 decode and the router (minMember 9, 22 CPUs).
pub const SERVICE: [Role; 3] = [
    ("prefill", 4, 2, 2),
    ("decode", 2, 4, 3),
    ("router", 1, 1, 2),
];

fn policy(role: &str, size: i32, min: i32) -> SubGroupPolicy {
    SubGroupPolicy {
        name: role.into(),
        sub_group_size: size,
        min_sub_groups: min,
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("role".into(), role.into())])),
            match_expressions: None,
        }),
        match_label_keys: vec!["instance".into()],
        topology_key: None,
    }
}

fn service(min_member: i32) -> PodGroup {
    let mut group = pod_group("svc", min_member, None);
    group.spec.sub_group_policy = vec![
        policy("prefill", 2, 2),
        policy("decode", 4, 1),
        policy("router", 1, 1),
    ];
    group
}

/// How the service's members name their gang.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// Gangplank's label, naming a Gangplank PodGroup.
    Gangplank,
    /// Volcano's annotation, naming a Volcano PodGroup (in a namespace with a default queue).
    Volcano,
}

/// Creates member `m` of instance `i` of `role` (`svc-<role>-<i>-<m>`), as an operator would.
async fn create_member(
    pods: &Api<Pod>,
    dialect: Dialect,
    (role, _, _, cpu): Role,
    i: usize,
    m: usize,
) {
    let mut metadata = json!({"labels": {"role": role, "instance": format!("{role}-{i}")}});
    match dialect {
        Dialect::Gangplank => metadata["labels"][labels::POD_GROUP_LABEL] = json!("svc"),
        Dialect::Volcano => {
            metadata["annotations"] = json!({(labels::VOLCANO_GROUP_NAME_ANNOTATION): "svc"})
        }
    }
    let name = format!("svc-{role}-{i}-{m}");
    pods.create(
        &PostParams::default(),
        &managed_pod(&name, None, cpu, metadata),
    )
    .await
    .unwrap();
}

/// The instances with members bound (and not being deleted), by role, and whether each is
/// whole.
pub async fn bound_instances(pods: &Api<Pod>) -> BTreeMap<String, usize> {
    let mut members: BTreeMap<String, usize> = BTreeMap::new();
    for name in bound_and_staying_with_prefix(pods, "svc-").await {
        let (instance, _) = name.rsplit_once('-').unwrap();
        *members.entry(instance.to_owned()).or_default() += 1;
    }
    members
}

/// Waits (60 s at most, saying `what`) until exactly the instances `expected` have members
/// bound, each as many as it says.
async fn bound_whole(pods: &Api<Pod>, expected: &BTreeMap<String, usize>, what: &str) {
    eventually(what, 60, || async {
        (bound_instances(pods).await == *expected).then_some(())
    })
    .await;
}

/// A plain pod of `cpu` CPUs outside Gangplank, running.
pub async fn filler(pods: &Api<Pod>, name: &str, cpu: u32) {
    let filler = pod(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }));
    pods.create(&PostParams::default(), &filler).await.unwrap();
    running(pods, name, 60).await;
}

/// Whether every instance with a member bound has all of them bound.
pub fn all_whole(bound: &BTreeMap<String, usize>) -> bool {
    bound.iter().all(|(instance, &n)| {
        let role = instance.split('-').nth(1).unwrap();
        let (_, _, size, _) = SERVICE.iter().find(|r| r.0 == role).unwrap();
        n == *size
    })
}

async fn create_service(pods: &Api<Pod>) {
    for role in SERVICE {
        let (_, instances, size, _) = role;
        for i in 0..instances {
            for m in 0..size {
                create_member(pods, Dialect::Gangplank, role, i, m).await;
            }
        }
    }
}

/// Creates the gang `train` of 4 members of 6 CPUs (in `queue`, else the namespace's) and
/// waits until all four are bound.
pub async fn train_bound_whole(groups: &Api<PodGroup>, pods: &Api<Pod>, queue: Option<&str>) {
    let mut train = pod_group("train", 4, None);
    train.spec.queue = queue.map(str::to_owned);
    groups.create(&PostParams::default(), &train).await.unwrap();
    for i in 0..4 {
        let member = managed_pod(&format!("train-{i}"), Some("train"), 6, json!({}));
        pods.create(&PostParams::default(), &member).await.unwrap();
    }
    eventually("train bound whole", 90, || async {
        (bound_with_prefix(pods, "train-").await.len() == 4).then_some(())
    })
    .await;
}

/// The service's minimum: two prefill instances, one decode instance and the router.
const MINIMUM: [&str; 4] = ["prefill-0", "prefill-1", "decode-0", "router-0"];

/// Every instance of [`SERVICE`], whole.
pub fn every_instance() -> BTreeMap<String, usize> {
    SERVICE
        .iter()
        .flat_map(|&(role, n, size, _)| (0..n).map(move |i| (format!("svc-{role}-{i}"), size)))
        .collect()
}

/// Waits (30 s at most) until the service, which a gang took room from, has only whole
/// instances bound; then checks that its minimum stayed and that it gave something back.
async fn kept_its_minimum_and_gave_back_whole_instances(pods: &Api<Pod>) {
    let left = eventually("the service back to whole instances", 30, || async {
        let bound = bound_instances(pods).await;
        all_whole(&bound).then_some(bound)
    })
    .await;
    assert!(
        instances(&MINIMUM)
            .iter()
            .all(|(i, n)| left.get(i) == Some(n)),
        "the minimum stays: {left:?}"
    );
    assert!(
        left.len() < every_instance().len(),
        "nothing given back: {left:?}"
    );
}

fn instances(names: &[&str]) -> BTreeMap<String, usize> {
    names
        .iter()
        .map(|name| {
            let role = name.split('-').next().unwrap();
            let size = SERVICE.iter().find(|r| r.0 == role).unwrap().2;
            (format!("svc-{name}"), size)
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_inference_service_starts_at_its_minimum_grows_and_yields_whole_instances_only() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("sub-groups-service").await;
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    // One node of the four left: 32 CPUs.
    for name in ["filler-0", "filler-1", "filler-2"] {
        filler(&pods, name, 32).await;
    }
    groups
        .create(&PostParams::default(), &service(9))
        .await
        .unwrap();
    create_service(&pods).await;
    // The minimum (22 CPUs) and two prefill instances more (8) fit; no decode instance more
    // (12).
    let started = instances(&[
        "prefill-0",
        "prefill-1",
        "prefill-2",
        "prefill-3",
        "decode-0",
        "router-0",
    ]);
    bound_whole(
        &pods,
        &started,
        "the minimum and two prefill instances bound whole",
    )
    .await;
    holds_for(
        5,
        "nothing more bound, and no instance in part",
        async || bound_instances(&pods).await == started,
    )
    .await;

    // Room grows by a node: the last decode instance starts, whole.
    pods.delete("filler-0", &Default::default()).await.unwrap();
    let everything = every_instance();
    bound_whole(
        &pods,
        &everything,
        "every instance bound whole once a node frees",
    )
    .await;

    // A gang of the same queue needs 24 CPUs in 6-CPU members, and 20 and 2 are left on the
    // two nodes: instances beyond the minimum yield, whole, and the minimum stays.
    train_bound_whole(&groups, &pods, None).await;
    kept_its_minimum_and_gave_back_whole_instances(&pods).await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_queue_below_its_share_reclaims_whole_instances_beyond_the_minimum_of_a_borrowing_service()
 {
    let cluster = Cluster::connect().await;
    let lender = create_queue(&cluster.client, "sub-groups-a", QueueSpec::default()).await;
    let _lender = QueueGuard(lender.clone());
    let claimant = create_queue(&cluster.client, "sub-groups-b", QueueSpec::default()).await;
    let _claimant = QueueGuard(claimant.clone());
    let ns = cluster.namespace("sub-groups-reclaim").await;
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    // Queue a, of the same weight as b, holds 82 of the 128 CPUs (it deserves 64): a gang of
    // 2 x 20 and the whole service (42).
    create_gang(&ns, &lender, "batch", 2, 20, None, None).await;
    let mut svc = service(9);
    svc.spec.queue = Some(lender.clone());
    groups.create(&PostParams::default(), &svc).await.unwrap();
    create_service(&pods).await;
    let everything = every_instance();
    bound_whole(
        &pods,
        &everything,
        "every instance of the service bound whole",
    )
    .await;

    // Queue b asks for 56 CPUs in 2-CPU pods and 46 are free: a gives back whole instances
    // beyond the service's minimum, never the minimum nor the batch gang.
    create_gang(&ns, &claimant, "claim", 28, 2, None, None).await;
    eventually("queue b's gang bound whole", 90, || async {
        (bound(&pods, "claim").await == 28).then_some(())
    })
    .await;
    kept_its_minimum_and_gave_back_whole_instances(&pods).await;
    assert_eq!(bound(&pods, "batch").await, 2, "the batch gang stays whole");
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_service_short_of_a_whole_instance_releases_nothing_until_it_comes() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("sub-groups-short").await;
    let groups = ns.api::<PodGroup>();
    groups
        .create(&PostParams::default(), &service(9))
        .await
        .unwrap();
    short_service_waits_then_starts_whole(&ns, Dialect::Gangplank).await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_volcano_pod_group_of_sub_groups_releases_nothing_until_its_minimum_is_whole() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "volcano-svc", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("sub-groups-volcano").await;
    // Pods that carry only Volcano's annotation reach the webhook in a namespace with a
    // default queue.
    default_queue(&cluster, &ns.name, &queue).await;
    let volcano_role = |name: &str, size: i32, min: i32| VolcanoSubGroupPolicy {
        name: name.into(),
        sub_group_size: Some(size),
        min_sub_groups: Some(min),
        label_selector: policy(name, size, min).label_selector,
        match_label_keys: vec!["instance".into()],
        network_topology: None,
    };
    let source = VolcanoPodGroup::new(
        "svc",
        VolcanoPodGroupSpec {
            min_member: Some(9),
            queue: Some(queue.clone()),
            sub_group_policy: vec![
                volcano_role("prefill", 2, 2),
                volcano_role("decode", 4, 1),
                volcano_role("router", 1, 1),
            ],
            ..Default::default()
        },
    );
    ns.api::<VolcanoPodGroup>()
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    short_service_waits_then_starts_whole(&ns, Dialect::Volcano).await;
    let group = ns.api::<PodGroup>().get("svc").await.unwrap();
    assert_eq!(group.spec.sub_group_policy.len(), 3, "{:?}", group.spec);
    ns.delete().await;
}

/// The story of a service whose gang `svc` (in `dialect`) exists: nine members come, but the
/// second prefill instance has one of its two; the gang waits saying so and nothing binds; its
/// last member comes and the minimum binds whole.
async fn short_service_waits_then_starts_whole(ns: &TestNamespace, dialect: Dialect) {
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    let [prefill, decode, router] = SERVICE;
    for (role, i, m) in [
        (prefill, 0, 0),
        (prefill, 0, 1),
        (prefill, 1, 0),
        (router, 0, 0),
    ] {
        create_member(&pods, dialect, role, i, m).await;
    }
    for m in 0..4 {
        create_member(&pods, dialect, decode, 0, m).await;
    }
    create_member(&pods, dialect, decode, 1, 0).await;
    let why = eventually("the group waiting for prefill's instances", 30, || async {
        let status = groups.get("svc").await.ok()?.status?;
        let admitted = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Admitted")?;
        (admitted.reason == "WaitingForMembers").then_some(admitted.message)
    })
    .await;
    assert!(
        why.contains(
            "sub-group prefill has 1 whole instances (2 members each) of the 2 its minCount needs (instance prefill-1 has 1 member)"
        ),
        "{why}"
    );
    holds_for(3, "no member bound", async || {
        bound_with_prefix(&pods, "svc-").await.is_empty()
    })
    .await;
    create_member(&pods, dialect, prefill, 1, 1).await;
    let whole_minimum = instances(&MINIMUM);
    bound_whole(
        &pods,
        &whole_minimum,
        "the minimum bound whole once prefill-1 is",
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_group_whose_min_member_is_not_its_minimum_is_refused_naming_the_sum() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("sub-groups-invalid").await;
    let refused = ns
        .api::<PodGroup>()
        .create(&PostParams::default(), &service(8))
        .await
        .expect_err("minMember 8 of a minimum of 9 members");
    let kube::Error::Api(status) = refused else {
        panic!("not refused by the API server: {refused}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.minMember: must be 9"),
        "{}",
        status.message
    );
    ns.delete().await;
}
