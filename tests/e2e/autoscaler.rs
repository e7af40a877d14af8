//! The node autoscaler on the local control plane: Karpenter with its kwok provider, as
//! `e2e/up --autoscaler karpenter` runs it (the NodePool `default` of
//! e2e/autoscaler/karpenter/nodepool.yaml and the instance types beside it). Its tests return at
//! once, saying so, on a cluster started without it, so the suite runs either way.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::support::{Cluster, eventually, pod, running};

/// The CPUs the largest instance type the NodePool offers (gpu-8x, 96 CPUs, less the 100m kwok
/// reserves for the kubelet) leaves to pods: a pod may ask for more than any node of the cluster
/// has, up to this.
const LARGEST_INSTANCE_CPU_MILLIS: i64 = 95_900;

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

/// The NodeClaim Karpenter made for `node`, if any.
async fn node_claim_of(claims: &Api<DynamicObject>, node: &str) -> Option<DynamicObject> {
    let list = claims.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .find(|c| c.data["status"]["nodeName"].as_str() == Some(node))
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_larger_than_every_node_makes_karpenter_add_one_that_goes_when_the_pod_does() {
    let cluster = Cluster::connect().await;
    if !karpenter_runs(&cluster.client).await {
        eprintln!(
            "skipped: Karpenter does not run (bring the cluster up with e2e/up --autoscaler karpenter)"
        );
        return;
    }
    let nodes = Api::<Node>::all(cluster.client.clone());
    let claims = karpenter_api(&cluster.client, "NodeClaim");
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
    let claim = node_claim_of(&claims, &node_name)
        .await
        .unwrap_or_else(|| panic!("no NodeClaim names the new node {node_name}"));
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
