//! Instances that each keep to one domain (a sub-group's `topologyKey`) through a real API
//! server and the stock scheduler: a job of three slices of two 16-CPU members, each slice
//! within one zone, needing two; a Volcano PodGroup whose slices' `networkTopology` asks for
//! HyperNode tier 1, each slice kept to one rack of a Topology of zones, racks and hosts. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs,
//! `kwok-node-0` and `-2` in zone-0, `-1` and `-3` in zone-1.

use std::collections::BTreeMap;

use gangplank::api::labels;
use gangplank::api::pod_group::SubGroupPolicy;
use gangplank::api::volcano::{
    VolcanoNetworkTopology, VolcanoPodGroup, VolcanoPodGroupSpec, VolcanoSubGroupPolicy,
};
use gangplank::api::{PodGroup, QueueSpec, Topology, TopologyLevel, TopologySpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::queues::{QueueGuard, create_queue, not_admitted_because};
use crate::support::{
    Cluster, bound_and_staying_with_prefix, default_queue, eventually, holds_for, managed_pod, pod,
    pod_group, running, unique,
};
use crate::topology::TopologyGuard;

const ZONE: &str = "topology.kubernetes.io/zone";
const RACK: &str = "topology.gangplank.dev/rack";

/// A plain pod of `cpu` CPUs outside Gangplank, running on `node`.
async fn hold(pods: &Api<Pod>, node: usize, cpu: u32) {
    let name = format!("hold-{node}");
    let holder = pod(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": format!("kwok-node-{node}")},
            "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }));
    pods.create(&PostParams::default(), &holder).await.unwrap();
    running(pods, &name, 60).await;
}

/// How the members of gang `train` name it.
enum Joins {
    Label,
    VolcanoAnnotation,
}

/// Creates `slices` slices of two 16-CPU members of gang `train` (`train-<slice>-<member>`),
/// labelled by slice.
async fn create_slices(pods: &Api<Pod>, slices: usize, joins: Joins) {
    for slice in 0..slices {
        for member in 0..2 {
            let mut metadata = json!({"labels": {"slice": slice.to_string()}});
            match joins {
                Joins::Label => metadata["labels"][labels::POD_GROUP_LABEL] = json!("train"),
                Joins::VolcanoAnnotation => {
                    metadata["annotations"] =
                        json!({(labels::VOLCANO_GROUP_NAME_ANNOTATION): "train"})
                }
            }
            let member = managed_pod(&format!("train-{slice}-{member}"), None, 16, metadata);
            pods.create(&PostParams::default(), &member).await.unwrap();
        }
    }
}

/// Waits (saying `what`) until gang `train` waits because no domain holds a slice; its reason.
async fn waiting_for_a_domain(groups: &Api<PodGroup>, what: &str) -> String {
    eventually(what, 60, || async {
        let why = not_admitted_because(groups, "train").await?;
        why.contains("each instance of sub-group slice runs within one domain")
            .then_some(why)
    })
    .await
}

/// Per slice with members bound (and not being deleted): the zones of its members' nodes.
async fn zones_of_slices(pods: &Api<Pod>, nodes: &Api<Node>) -> BTreeMap<String, Vec<String>> {
    domains_of_slices(pods, nodes, ZONE).await
}

/// Per slice with members bound (and not being deleted): the racks of its members' nodes.
async fn racks_of_slices(pods: &Api<Pod>, nodes: &Api<Node>) -> BTreeMap<String, Vec<String>> {
    domains_of_slices(pods, nodes, RACK).await
}

/// Per slice with members bound (and not being deleted): the `level` label of its members'
/// nodes.
async fn domains_of_slices(
    pods: &Api<Pod>,
    nodes: &Api<Node>,
    level: &str,
) -> BTreeMap<String, Vec<String>> {
    let mut slices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in bound_and_staying_with_prefix(pods, "train-").await {
        let Ok(pod) = pods.get(&name).await else {
            continue;
        };
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        let Ok(node) = nodes.get(&node).await else {
            continue;
        };
        let domain = node.metadata.labels.unwrap_or_default()[level].clone();
        let (slice, _) = name.rsplit_once('-').unwrap();
        slices.entry(slice.to_owned()).or_default().push(domain);
    }
    slices
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn slices_kept_to_a_zone_each_wait_until_zones_hold_them_and_start_whole_one_per_zone() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("instance-topology").await;
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    // 31 and 15 CPUs free on the two nodes of each zone, 92 in all: the cluster holds the
    // minimum (two slices of two 16-CPU members), no zone holds a slice.
    for (node, cpu) in [(0, 1), (1, 1), (2, 17), (3, 17)] {
        hold(&pods, node, cpu).await;
    }
    // Three slices, two needed.
    let mut train = pod_group("train", 4, None);
    train.spec.sub_group_policy = vec![SubGroupPolicy {
        name: "slice".into(),
        sub_group_size: 2,
        min_sub_groups: 2,
        label_selector: None,
        match_label_keys: vec!["slice".into()],
        topology_key: Some(ZONE.into()),
    }];
    groups.create(&PostParams::default(), &train).await.unwrap();
    create_slices(&pods, 3, Joins::Label).await;
    let why = waiting_for_a_domain(&groups, "train saying no zone holds a slice").await;
    assert!(
        why.contains("2 domains of topology.kubernetes.io/zone tried"),
        "{why}"
    );

    // kwok-node-2 frees: zone-0 holds a slice, zone-1 none, and the minimum is two.
    pods.delete("hold-2", &Default::default()).await.unwrap();
    holds_for(5, "no member of train bound", async || {
        bound_and_staying_with_prefix(&pods, "train-")
            .await
            .is_empty()
    })
    .await;

    // kwok-node-3 frees: the minimum starts, a slice whole in each zone (neither holds two),
    // and the third slice waits, none of it bound.
    pods.delete("hold-3", &Default::default()).await.unwrap();
    let started = eventually("two slices bound whole, one in each zone", 60, || async {
        let slices = zones_of_slices(&pods, &nodes).await;
        let mut zones: Vec<&str> = slices
            .values()
            .filter(|z| z.len() == 2 && z[0] == z[1])
            .map(|z| z[0].as_str())
            .collect();
        zones.sort_unstable();
        (slices.len() == 2 && zones == ["zone-0", "zone-1"]).then_some(slices)
    })
    .await;
    holds_for(5, "the third slice not bound at all", async || {
        zones_of_slices(&pods, &nodes).await == started
    })
    .await;
    ns.delete().await;
}

/// Creates a Topology of zones, racks and hosts, as Volcano's label discovery lists HyperNode
/// tiers (rack tier 1, zone tier 2), and waits until Gangplank reads it: its PodGroup webhook
/// then refuses a gang preferring a zone while requiring a rack.
async fn zones_racks_and_hosts(cluster: &Cluster, groups: &Api<PodGroup>) -> TopologyGuard {
    let name = unique("tiers");
    let levels = [ZONE, RACK, "kubernetes.io/hostname"].map(|l| TopologyLevel {
        node_label: l.to_owned(),
    });
    let topology = Topology::new(
        &name,
        TopologySpec {
            levels: levels.to_vec(),
        },
    );
    Api::<Topology>::all(cluster.client.clone())
        .create(&PostParams::default(), &topology)
        .await
        .unwrap();
    let guard = TopologyGuard(name.clone());
    let mut probe = pod_group("probe", 1, None);
    probe.spec.topology_key = Some(RACK.into());
    probe.spec.preferred_topology_key = Some(ZONE.into());
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually("Gangplank reading the Topology", 30, || async {
        let refused = groups.create(&dry_run, &probe).await;
        matches!(refused, Err(kube::Error::Api(status)) if status.message.contains(&name))
            .then_some(())
    })
    .await;
    guard
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_volcano_multi_slice_job_with_a_hard_tier_one_keeps_each_slice_in_one_rack() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "volcano-slices", QueueSpec::default()).await;
    let _queue = QueueGuard(queue.clone());
    let ns = cluster.namespace("volcano-tiers").await;
    default_queue(&cluster, &ns.name, &queue).await;
    let (groups, pods) = (ns.api::<PodGroup>(), ns.api::<Pod>());
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let _topology = zones_racks_and_hosts(&cluster, &groups).await;
    // Half of every node taken: the cluster holds the two slices' four 16-CPU members, one per
    // node, but no rack (one node) holds a slice.
    for node in 0..4 {
        hold(&pods, node, 16).await;
    }
    let slice = VolcanoSubGroupPolicy {
        name: "slice".into(),
        sub_group_size: Some(2),
        min_sub_groups: Some(2),
        match_label_keys: vec!["slice".into()],
        network_topology: Some(VolcanoNetworkTopology {
            mode: Some("hard".into()),
            highest_tier_allowed: Some(1),
            highest_tier_name: None,
        }),
        ..Default::default()
    };
    let train = VolcanoPodGroup::new(
        "train",
        VolcanoPodGroupSpec {
            min_member: Some(4),
            queue: Some(queue.clone()),
            sub_group_policy: vec![slice],
            ..Default::default()
        },
    );
    ns.api::<VolcanoPodGroup>()
        .create(&PostParams::default(), &train)
        .await
        .unwrap();
    create_slices(&pods, 2, Joins::VolcanoAnnotation).await;
    let why = waiting_for_a_domain(&groups, "train saying no rack holds a slice").await;
    assert!(why.contains(&format!("domains of {RACK} tried")), "{why}");
    let made = groups.get("train").await.unwrap();
    assert_eq!(
        made.spec.sub_group_policy[0].topology_key.as_deref(),
        Some(RACK),
        "tier 1 is the rack"
    );

    // Two racks free: each slice starts whole on one node.
    for node in [0, 1] {
        pods.delete(&format!("hold-{node}"), &Default::default())
            .await
            .unwrap();
    }
    eventually("each slice bound whole in one rack", 60, || async {
        let racks = racks_of_slices(&pods, &nodes).await;
        let whole = racks.values().all(|r| r.len() == 2 && r[0] == r[1]);
        (racks.len() == 2 && whole).then_some(())
    })
    .await;
    ns.delete().await;
}
