//! Topology through a real API server: gangs kept whole in one zone (`topologyKey`), placed in
//! their preferred rack when one has room and in one zone otherwise (a `Topology` of two
//! levels), and waiting, holding nothing, when no domain could hold them. The cluster is
//! `e2e/up`'s default: 4 nodes of 32 CPUs, `kwok-node-0` and `-2` in zone-0, `-1` and `-3` in
//! zone-1, one node per rack (`topology.gangplank.dev/rack`).

use gangplank::api::{PodGroup, QueueSpec, Topology, TopologyLevel, TopologySpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::queues::{bound, create_queue, delete_queue, not_admitted};
use crate::support::{Cluster, eventually, managed_pod, pod, pod_group, running, unique};

const ZONE: &str = "topology.kubernetes.io/zone";
const RACK: &str = "topology.gangplank.dev/rack";

/// Each member's node, and the nodeSelector admission gave it.
async fn placed(
    pods: &Api<Pod>,
    nodes: &Api<Node>,
    prefix: &str,
    members: usize,
) -> Vec<(Node, std::collections::BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for i in 0..members {
        let spec = pods
            .get(&format!("{prefix}-{i}"))
            .await
            .unwrap()
            .spec
            .unwrap();
        let node = nodes.get(spec.node_name.as_deref().unwrap()).await.unwrap();
        out.push((node, spec.node_selector.unwrap_or_default()));
    }
    out
}

fn label(node: &Node, key: &str) -> String {
    node.metadata.labels.as_ref().unwrap()[key].clone()
}

/// Deletes the Topology when the test ends, failed or not (it is cluster-scoped), with kubectl:
/// the test's client cannot run while its runtime is in a drop.
pub struct TopologyGuard(pub String);

impl Drop for TopologyGuard {
    fn drop(&mut self) {
        let run = crate::support::run_dir();
        let status = std::process::Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args([
                "delete",
                "topology",
                &self.0,
                "--wait=true",
                "--timeout=60s",
            ])
            .stdout(std::process::Stdio::null())
            .status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("could not delete Topology {}: {status:?}", self.0);
        }
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_goes_into_its_preferred_rack_when_one_has_room_and_into_one_zone_otherwise() {
    let cluster = Cluster::connect().await;
    let topologies: Api<Topology> = Api::all(cluster.client.clone());
    let name = unique("zones-and-racks");
    let levels = [ZONE, RACK].map(|l| TopologyLevel {
        node_label: l.to_owned(),
    });
    topologies
        .create(
            &PostParams::default(),
            &Topology::new(
                &name,
                TopologySpec {
                    levels: levels.to_vec(),
                },
            ),
        )
        .await
        .unwrap();
    let _topology = TopologyGuard(name);
    let queue = create_queue(&cluster.client, "racks", QueueSpec::default()).await;
    let ns = cluster.namespace("topology-racks").await;
    let pods = ns.api::<Pod>();
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let gang = |name: &str, members: usize, cpus: u32| {
        let (ns, queue, pods) = (&ns, queue.clone(), pods.clone());
        let name = name.to_owned();
        async move {
            let mut group = pod_group(&name, members as i32, None);
            group.spec.queue = Some(queue);
            group.spec.topology_key = Some(ZONE.to_owned());
            group.spec.preferred_topology_key = Some(RACK.to_owned());
            ns.api::<PodGroup>()
                .create(&PostParams::default(), &group)
                .await
                .unwrap();
            for i in 0..members {
                pods.create(
                    &PostParams::default(),
                    &managed_pod(&format!("{name}-{i}"), Some(&name), cpus, json!({})),
                )
                .await
                .unwrap();
            }
        }
    };
    // Two members of 12 CPUs fit one rack (one node of 32).
    gang("in-rack", 2, 12).await;
    eventually("the gang that fits a rack bound", 60, || async {
        (bound(&pods, "in-rack").await == 2).then_some(())
    })
    .await;
    let members = placed(&pods, &nodes, "in-rack", 2).await;
    let rack = label(&members[0].0, RACK);
    for (node, selector) in &members {
        assert_eq!(label(node, RACK), rack, "the gang spans racks");
        assert_eq!(selector.get(RACK), Some(&rack), "{selector:?}");
        assert_eq!(selector.get(ZONE), Some(&label(node, ZONE)), "{selector:?}");
    }
    // Three members of 16 CPUs fit no rack, and one zone (two nodes of 32) only where the
    // first gang is not.
    gang("in-zone", 3, 16).await;
    eventually("the gang that fits a zone bound", 60, || async {
        (bound(&pods, "in-zone").await == 3).then_some(())
    })
    .await;
    let members = placed(&pods, &nodes, "in-zone", 3).await;
    let zone = label(&members[0].0, ZONE);
    assert_ne!(
        zone,
        label(&placed(&pods, &nodes, "in-rack", 1).await[0].0, ZONE)
    );
    for (node, selector) in &members {
        assert_eq!(label(node, ZONE), zone, "the gang spans zones");
        assert_eq!(selector.get(ZONE), Some(&zone), "{selector:?}");
        assert_eq!(
            selector.get(RACK),
            None,
            "no rack could hold it: {selector:?}"
        );
    }
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_topology_whose_level_is_no_label_key_or_is_listed_twice_is_refused() {
    let cluster = Cluster::connect().await;
    let topologies: Api<Topology> = Api::all(cluster.client.clone());
    for levels in [vec!["Not A Label"], vec![ZONE, ZONE], vec![]] {
        let levels = levels
            .into_iter()
            .map(|l| TopologyLevel {
                node_label: l.to_owned(),
            })
            .collect();
        let name = unique("bad-topology");
        let err = topologies
            .create(
                &PostParams::default(),
                &Topology::new(&name, TopologySpec { levels }),
            )
            .await
            .expect_err("the API server refuses it");
        assert!(err.to_string().contains("spec.levels"), "{err}");
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_with_a_topology_key_runs_whole_in_one_zone() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "topology", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-topology").await;
    let pods = ns.api::<Pod>();
    // e2e/up's nodes: kwok-node-0 and -2 in zone-0, -1 and -3 in zone-1. Half of node 0 and
    // half of node 1 taken: the emptiest nodes are in different zones.
    for (i, node) in ["kwok-node-0", "kwok-node-1"].into_iter().enumerate() {
        let filler = pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("fill-{i}")},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "16"}}}]}
        }));
        pods.create(&PostParams::default(), &filler).await.unwrap();
        running(&pods, &format!("fill-{i}"), 30).await;
    }
    let mut group = pod_group("topo", 3, None);
    group.spec.queue = Some(queue.clone());
    group.spec.topology_key = Some(ZONE.to_owned());
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .unwrap();
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("topo-{i}"), Some("topo"), 16, json!({})),
        )
        .await
        .unwrap();
    }
    eventually("the gang bound", 30, || async {
        (bound(&pods, "topo").await == 3).then_some(())
    })
    .await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let mut zones = std::collections::BTreeSet::new();
    for i in 0..3 {
        let member = pods.get(&format!("topo-{i}")).await.unwrap();
        let spec = member.spec.unwrap();
        let node = nodes.get(spec.node_name.as_deref().unwrap()).await.unwrap();
        let zone = node.metadata.labels.unwrap()[ZONE].clone();
        assert_eq!(
            spec.node_selector.as_ref().and_then(|s| s.get(ZONE)),
            Some(&zone),
            "admission gives each member the zone it chose"
        );
        zones.insert(zone);
    }
    assert_eq!(zones.len(), 1, "the gang spans zones {zones:?}");
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_no_zone_could_hold_waits_saying_so_and_a_later_gang_that_fits_one_runs() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "no-zone", QueueSpec::default()).await;
    let ns = cluster.namespace("queues-no-zone").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // Each zone of e2e/up's four nodes has 64 CPUs: six members of 12 need 72 in one zone,
    // four of them 48.
    for (name, members) in [("wide", 6), ("fits", 4)] {
        let mut group = pod_group(name, members, None);
        group.spec.queue = Some(queue.clone());
        group.spec.topology_key = Some(ZONE.to_owned());
        groups.create(&PostParams::default(), &group).await.unwrap();
        for i in 0..members {
            pods.create(
                &PostParams::default(),
                &managed_pod(&format!("{name}-{i}"), Some(name), 12, json!({})),
            )
            .await
            .unwrap();
        }
    }
    eventually("the gang that fits a zone bound whole", 60, || async {
        (bound(&pods, "fits").await == 4).then_some(())
    })
    .await;
    let (reason, message) = eventually("the wide gang to say why it waits", 30, || async {
        not_admitted(&groups, "wide").await
    })
    .await;
    assert_eq!(reason, "NoDomainFits", "{message}");
    assert!(
        message.contains("no single domain of topology.kubernetes.io/zone could hold every member"),
        "{message}"
    );
    assert_eq!(bound(&pods, "wide").await, 0);
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
