//! Faults of the parts around Gangplank: the scheduler restarting while binds are held, and
//! the API server restarting under Gangplank's watches. Components are killed and started
//! again with `e2e/component`.

use gangplank::api::PodGroup;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::support::{
    Cluster, bound_with_prefix, complete_the_held_gang, component_ctl, eventually,
    gang_with_three_binds_held, gangplank_readyz, managed_pod, pod_group,
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
