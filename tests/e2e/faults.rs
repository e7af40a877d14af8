//! Faults of the parts around Gangplank, and of Gangplank itself: the scheduler restarting
//! while binds are held, the API server restarting under Gangplank's watches, and Gangplank
//! hanging while the scheduler places its pods. Components are killed and started
//! again with `e2e/component`.

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{
    Cluster, Frozen, bound_with_prefix, complete_the_held_gang, component_ctl, eventually,
    gang_with_three_binds_held, gangplank_readyz, managed_pod, pod, pod_group, running,
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
    component_ctl("kube-scheduler", "restart");
    complete_the_held_gang(&pods).await;
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
    for _ in 0..3 {
        component_ctl("kube-apiserver", "kill");
        eventually("Gangplank unready without its API server", 30, || async {
            (gangplank_readyz(&cluster).await == Some(503)).then_some(())
        })
        .await;
        component_ctl("kube-apiserver", "start");
        eventually("the API server back", 60, || async {
            cluster.client.apiserver_version().await.ok()
        })
        .await;
    }
    eventually("Gangplank ready again", 60, || async {
        (gangplank_readyz(&cluster).await == Some(200)).then_some(())
    })
    .await;

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
    eventually(
        "the gang created after the restarts bound whole",
        90,
        || async { (bound_with_prefix(&pods, "after").await.len() == 2).then_some(()) },
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
    // Gangplank holds the cycle for its 2 s timeout; with one extender and the bind's 90 s,
    // each held it until the TLS handshake gave up (10 s, measured 25 s for two), or 90 s on
    // a connection kept alive, so the plain pod would still wait when this gives up.
    running(&pods, "plain", 25).await;
    eprintln!(
        "plain pod running {:?} after creation, Gangplank still hung",
        started.elapsed()
    );
    drop(frozen);
    ns.delete().await;
}
