//! Faults of the parts around Gangplank, and of Gangplank itself: the scheduler restarting
//! while binds are held, the API server restarting under Gangplank's watches, Gangplank
//! hanging while the scheduler places its pods, and a node deleted or NotReady under a running
//! gang. Components are killed and started again with `e2e/component`.

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{
    Cluster, Frozen, bound_eventually, bound_with_prefix, complete_the_held_gang, component_ctl,
    delete_queue, eventually, gang_with_three_binds_held, gangplank_readyz, holds_for, managed_pod,
    pod, pod_group, running,
};

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn binds_held_for_a_scheduler_that_restarted_count_toward_no_quorum() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("fault-scheduler").await;
    let abandoned = || async {
        cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_gang_binds_abandoned_total", &[])
    };
    let before = abandoned().await;
    let pods = gang_with_three_binds_held(&cluster, &ns).await;

    // The scheduler dies with the three binds held and comes back knowing nothing of them;
    // the gang's last member now fits.
    let restarted = std::time::Instant::now();
    component_ctl("kube-scheduler", "restart");
    complete_the_held_gang(&pods).await;
    eprintln!(
        "the gang bound whole {:.1?} after the scheduler was restarted",
        restarted.elapsed()
    );
    assert_eq!(
        abandoned().await - before,
        3.0,
        "the dead scheduler's three held binds were dropped, not bound"
    );
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn gangplank_is_unready_while_the_api_server_restarts_and_current_after() {
    let cluster = Cluster::connect().await;
    assert_eq!(gangplank_readyz(&cluster).await, Some(200));
    let mut unready_after = Vec::new();
    for _ in 0..3 {
        let killed = std::time::Instant::now();
        component_ctl("kube-apiserver", "kill");
        eventually("Gangplank unready without its API server", 30, || async {
            (gangplank_readyz(&cluster).await == Some(503)).then_some(())
        })
        .await;
        unready_after.push(killed.elapsed());
        component_ctl("kube-apiserver", "start");
        eventually("the API server back", 60, || async {
            cluster.client.apiserver_version().await.ok()
        })
        .await;
    }
    let back = std::time::Instant::now();
    eventually("Gangplank ready again", 60, || async {
        (gangplank_readyz(&cluster).await == Some(200)).then_some(())
    })
    .await;
    eprintln!(
        "unready {unready_after:.1?} after each kill; ready {:.1?} after the API server answered again",
        back.elapsed()
    );

    // Its cache is current: it counts the pods the API server lists, and a new gang runs whole.
    let ns = cluster.namespace("fault-apiserver").await;
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &pod_group("after", 2, None))
        .await
        .unwrap();
    let pods = ns.api::<Pod>();
    for i in 0..2 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("after-{i}"), Some("after"), 4, json!({})),
        )
        .await
        .unwrap();
    }
    bound_eventually(
        "the gang created after the restarts bound whole",
        90,
        &pods,
        "after",
        2,
    )
    .await;
    let all: kube::Api<Pod> = kube::Api::all(cluster.client.clone());
    eventually("Gangplank's cache counting every pod", 60, || async {
        let listed = all.list(&ListParams::default()).await.ok()?.items.len() as f64;
        let cached = cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_cache_pods", &[]);
        (listed == cached).then_some(())
    })
    .await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn while_gangplank_hangs_a_plain_pod_schedules_past_the_managed_pods_before_it() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("fault-hang").await;
    let pods = ns.api::<Pod>();
    let pp = PostParams::default();
    ns.api::<PodGroup>()
        .create(&pp, &pod_group("stuck", 5, None))
        .await
        .unwrap();
    // Four members of a gang of five, created gated, so nothing places them yet.
    for i in 0..4 {
        let mut member = managed_pod(&format!("stuck-{i}"), Some("stuck"), 1, json!({}));
        member.spec.as_mut().unwrap().scheduling_gates = Some(vec![PodSchedulingGate {
            name: labels::ADMISSION_GATE.to_owned(),
        }]);
        pods.create(&pp, &member).await.unwrap();
    }

    let frozen = Frozen::gangplank();
    // Released while Gangplank hangs: the scheduler's next cycles call its filter for them.
    let ungate: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/spec/schedulingGates"}])).unwrap();
    let ungate = Patch::Json::<()>(ungate);
    for i in 0..4 {
        pods.patch(&format!("stuck-{i}"), &PatchParams::default(), &ungate)
            .await
            .unwrap();
    }
    let started = std::time::Instant::now();
    pods.create(
        &pp,
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}
        })),
    )
    .await
    .unwrap();
    // The four are ahead of it in the scheduler's queue. Each placing call to the hung
    // Gangplank holds the cycle for its 2 s timeout; with one extender and the bind's long timeout,
    // each held it until the TLS handshake gave up (10 s, measured 25 s for two), or the whole bind timeout
    // on a connection kept alive, so the plain pod would still wait when this gives up.
    running(&pods, "plain", 25).await;
    eprintln!(
        "plain pod running {:?} after creation, Gangplank still hung",
        started.elapsed()
    );
    drop(frozen);
    ns.delete().await;
}

/// Puts a deleted node back as it was (its labels, annotations and capacity), also when the
/// test fails, so the tests after it find four nodes.
struct NodeBack(Option<k8s_openapi::api::core::v1::Node>);

impl Drop for NodeBack {
    fn drop(&mut self) {
        let Some(node) = self.0.take() else {
            return;
        };
        let run = crate::support::run_dir();
        let mut child = std::process::Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args(["create", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("failed to run kubectl");
        use std::io::Write;
        let manifest = serde_json::to_vec(&node).unwrap();
        child.stdin.take().unwrap().write_all(&manifest).unwrap();
        let _ = child.wait();
    }
}

/// Waits for the gang `wide` of four members to run on all four nodes; the node of its first
/// member.
async fn wide_gang_running_on_all_four_nodes(pods: &Api<Pod>, groups: &Api<PodGroup>) -> String {
    bound_eventually("the gang running on all four nodes", 60, pods, "wide", 4).await;
    crate::support::pod_group_in_phase(groups, "wide", "Running").await;
    pods.get("wide-0")
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .unwrap()
}

/// The node as it can be created again: no identity, version or conditions of the old one.
fn as_new(node: &k8s_openapi::api::core::v1::Node) -> k8s_openapi::api::core::v1::Node {
    let mut node = node.clone();
    node.metadata = kube::api::ObjectMeta {
        name: node.metadata.name.clone(),
        labels: node.metadata.labels.clone(),
        annotations: node.metadata.annotations.clone(),
        ..Default::default()
    };
    if let Some(status) = node.status.as_mut() {
        status.conditions = None;
    }
    node
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_node_deleted_under_a_running_gang_leaves_it_below_min_member_and_counted_and_its_return_brings_room_back()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("fault-node").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(cluster.client.clone());
    // A gang of a whole node per member, on all four nodes.
    groups
        .create(&PostParams::default(), &pod_group("wide", 4, None))
        .await
        .unwrap();
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("wide-{i}"), Some("wide"), 32, json!({})),
        )
        .await
        .unwrap();
    }
    let victim = wide_gang_running_on_all_four_nodes(&pods, &groups).await;
    // Its first member's node goes away; the pod garbage collector deletes the pod.
    let node = nodes.get(&victim).await.unwrap();
    let back = NodeBack(Some(as_new(&node)));
    nodes.delete(&victim, &Default::default()).await.unwrap();
    let group = eventually("the gang below minMember, saying so", 120, || async {
        let group = groups.get("wide").await.ok()?;
        let status = group.status.clone()?;
        let scheduled = status.conditions.iter().find(|c| c.type_ == "Scheduled")?;
        (scheduled.reason == "BelowMinMember").then_some(group)
    })
    .await;
    let status = group.status.unwrap();
    assert!(
        matches!(status.phase.as_str(), "Unknown" | "Failed"),
        "{status:?}"
    );
    assert_eq!(status.running, 3, "{status:?}");
    let metrics = cluster.gangplank_metrics().await;
    assert_eq!(
        metrics.sum("gangplank_cache_nodes", &[]),
        3.0,
        "the node left the model"
    );
    assert_eq!(gangplank_readyz(&cluster).await, Some(200));

    // A gang of one whole node has no room while the node is gone, and runs once it is back.
    groups
        .create(&PostParams::default(), &pod_group("next", 1, None))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &managed_pod("next-0", Some("next"), 32, json!({})),
    )
    .await
    .unwrap();
    eventually("the new gang waiting for room", 30, || async {
        let status = groups.get("next").await.ok()?.status?;
        let admitted = status.conditions.iter().find(|c| c.type_ == "Admitted")?;
        let waits = matches!(admitted.reason.as_str(), "DoesNotFit" | "Reserved");
        (admitted.status == "False" && waits).then_some(())
    })
    .await;
    drop(back);
    eventually("the node back and ready", 60, || async {
        let node = nodes.get(&victim).await.ok()?;
        let ready = node
            .status?
            .conditions?
            .into_iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(())
    })
    .await;
    bound_eventually(
        "the new gang running on the node that came back",
        60,
        &pods,
        "next",
        1,
    )
    .await;
    ns.delete().await;
}

/// Takes a node out of kwok's hands and marks it NotReady, as a kubelet that stops being
/// ready does; gives it back to kwok (which makes it Ready again) when dropped, also when the
/// test fails.
struct NotReady(String);

/// The annotation kwok manages nodes by (`e2e/up`'s `--manage-nodes-with-annotation-selector`).
const KWOK_NODE: &str = "kwok.x-k8s.io/node";

impl NotReady {
    async fn make(nodes: &kube::Api<k8s_openapi::api::core::v1::Node>, name: &str) -> NotReady {
        let unmanaged = json!({"metadata": {"annotations": {KWOK_NODE: null}}});
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(unmanaged))
            .await
            .unwrap();
        let not_ready = json!({"status": {"conditions": [{
            "type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": "the e2e suite stopped this node's kubelet"}]}});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(not_ready))
            .await
            .unwrap();
        NotReady(name.to_owned())
    }
}

impl Drop for NotReady {
    fn drop(&mut self) {
        let run = crate::support::run_dir();
        let status = std::process::Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args(["annotate", "node", &self.0, &format!("{KWOK_NODE}=fake")])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "kubectl annotate node {} failed",
            self.0
        );
    }
}

/// How long the NotReady test checks that the waiting gang stays unplaced (several admission
/// passes and scheduling attempts).
const NOT_READY_HELD_SECONDS: u64 = 10;

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_node_not_ready_under_a_running_gang_keeps_it_running_and_counted_but_is_no_room_for_another()
 {
    let cluster = Cluster::connect().await;
    let queue = crate::queues::create_queue(
        &cluster.client,
        "fault-notready",
        gangplank::api::QueueSpec::default(),
    )
    .await;
    let _guard = crate::queues::QueueGuard(queue.clone());
    let ns = cluster.namespace("fault-notready").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(cluster.client.clone());
    // A gang of 24 of each node's 32 CPUs on all four nodes: 8 CPUs free on each.
    crate::queues::create_gang(&ns, &queue, "wide", 4, 24, None, None).await;
    let victim = wide_gang_running_on_all_four_nodes(&pods, &groups).await;
    let not_ready = NotReady::make(&nodes, &victim).await;
    // The node lifecycle controller taints it a moment after it saw the status; Gangplank,
    // watching the same node, saw the status before, and a door for arrivals counted before
    // that is shut until the next pass counts the node out.
    eventually("the node tainted not-ready", 60, || async {
        let taints = nodes.get(&victim).await.ok()?.spec?.taints?;
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/not-ready")
            .then_some(())
    })
    .await;
    // A gang of four 8-CPU members fits only if the NotReady node's 8 free CPUs count.
    crate::queues::create_gang(&ns, &queue, "next", 4, 8, None, None).await;
    eventually("the new gang waiting for room", 30, || async {
        let status = groups.get("next").await.ok()?.status?;
        let admitted = status.conditions.iter().find(|c| c.type_ == "Admitted")?;
        let waits = matches!(admitted.reason.as_str(), "DoesNotFit" | "Reserved");
        (admitted.status == "False" && waits).then_some(())
    })
    .await;
    let queues = kube::Api::<gangplank::api::Queue>::all(cluster.client.clone());
    let queue_counts_the_running_gang_alone = async || {
        let Some(status) = queues.get(&queue).await.ok().and_then(|q| q.status) else {
            return false;
        };
        let cpu = status.allocated.get("cpu").map(|q| q.0.as_str());
        cpu == Some("96") && status.running == 1
    };
    eventually(
        "the queue to count the running gang, no more",
        30,
        || async { queue_counts_the_running_gang_alone().await.then_some(()) },
    )
    .await;
    // While the node stays NotReady: the running gang is untouched and counted whole, no
    // member of the new gang is placed, and Gangplank stays ready.
    holds_for(
        NOT_READY_HELD_SECONDS,
        "the running gang counted whole, the new gang unplaced, Gangplank ready",
        async || {
            let wide = groups.get("wide").await.ok().and_then(|g| g.status);
            wide.is_some_and(|g| g.phase.as_str() == "Running" && g.running == 4)
                && queue_counts_the_running_gang_alone().await
                && bound_with_prefix(&pods, "next").await.is_empty()
                && gangplank_readyz(&cluster).await == Some(200)
        },
    )
    .await;

    drop(not_ready);
    bound_eventually(
        "the new gang running whole once the node is Ready again",
        90,
        &pods,
        "next",
        4,
    )
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
