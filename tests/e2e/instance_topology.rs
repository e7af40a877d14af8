//! Instances that each keep to one domain (a sub-group's `topologyKey`) through a real API
//! server and the stock scheduler: a job of three slices of two 16-CPU members, each slice
//! within one zone, needing two. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs,
//! `kwok-node-0` and `-2` in zone-0, `-1` and `-3` in zone-1.

use std::collections::BTreeMap;

use gangplank::api::PodGroup;
use gangplank::api::labels;
use gangplank::api::pod_group::SubGroupPolicy;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::queues::not_admitted_because;
use crate::support::{
    Cluster, bound_and_staying_with_prefix, eventually, holds_for, managed_pod, pod, pod_group,
    running,
};

const ZONE: &str = "topology.kubernetes.io/zone";

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

/// Per slice with members bound (and not being deleted): the zones of its members' nodes.
async fn zones_of_slices(pods: &Api<Pod>, nodes: &Api<Node>) -> BTreeMap<String, Vec<String>> {
    let mut slices: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in bound_and_staying_with_prefix(pods, "train-").await {
        let Ok(pod) = pods.get(&name).await else {
            continue;
        };
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        let Ok(node) = nodes.get(&node).await else {
            continue;
        };
        let zone = node.metadata.labels.unwrap_or_default()[ZONE].clone();
        let (slice, _) = name.rsplit_once('-').unwrap();
        slices.entry(slice.to_owned()).or_default().push(zone);
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
    for slice in 0..3 {
        for member in 0..2 {
            let labels =
                json!({"labels": {labels::POD_GROUP_LABEL: "train", "slice": slice.to_string()}});
            let member = managed_pod(&format!("train-{slice}-{member}"), None, 16, labels);
            pods.create(&PostParams::default(), &member).await.unwrap();
        }
    }
    let why = eventually("train saying no zone holds a slice", 60, || async {
        let why = not_admitted_because(&groups, "train").await?;
        why.contains("each instance of sub-group slice runs within one domain")
            .then_some(why)
    })
    .await;
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
