//! Gang scheduling through the stock kube-scheduler and Gangplank's extender: all or nothing,
//! no deadlock between gangs, elastic gangs, and what survives Gangplank stopping or dying.
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::time::Duration;

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, complete_the_held_gang, events_about, eventually,
    fill_one_node, gang_with_three_binds_held, gangplank_ctl, held_gangs, holds_for, managed_pod,
    pod_group, pod_group_in_phase,
};

async fn create_pods(pods: &Api<Pod>, prefix: &str, group: &str, count: usize, cpu: u32) {
    for i in 0..count {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("{prefix}-{i}"), Some(group), cpu, json!({})),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_of_eight_that_fits_is_bound_whole_within_seconds() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-fits").await;
    let groups = ns.api::<PodGroup>();
    groups
        .create(&PostParams::default(), &pod_group("eight", 8, None))
        .await
        .unwrap();
    let pods = ns.api::<Pod>();
    let held_before = held_gangs(&cluster).await;
    let started = std::time::Instant::now();
    create_pods(&pods, "eight", "eight", 8, 4).await;
    bound_eventually("all 8 members bound", 30, &pods, "eight", 8).await;
    eprintln!("gang of 8 bound {:?} after creation", started.elapsed());
    pod_group_in_phase(&groups, "eight", "Running").await;
    // Gangplank held the members' binds until the eighth was placed, then bound them
    // together: one more gang in its count of gangs that reached quorum.
    eventually("Gangplank to count the gang it bound whole", 10, || async {
        (held_gangs(&cluster).await == held_before + 1.0).then_some(())
    })
    .await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_of_eight_where_only_six_fit_is_not_admitted_and_says_why() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-six-of-eight").await;
    let pods = ns.api::<Pod>();
    fill_one_node(&pods).await;
    let groups = ns.api::<PodGroup>();
    groups
        .create(&PostParams::default(), &pod_group("big", 8, None))
        .await
        .unwrap();
    // 16 CPUs each: two per free node, three free nodes, so 6 fit. Admission sees it and
    // keeps the gang gated (the extender's claims would refuse it too if it got that far).
    create_pods(&pods, "big", "big", 8, 16).await;

    let why = eventually("the PodGroup to say why it is not admitted", 30, || async {
        let status = groups.get("big").await.ok()?.status?;
        let admitted = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Admitted")?;
        // `DoesNotFit`, or `Reserved` once it heads the line and holds the room there is.
        (admitted.status == "False" && admitted.message.contains("does not fit now"))
            .then_some(admitted.message)
    })
    .await;
    assert!(why.contains("cpu 128 needed"), "{why}");
    // `kubectl describe` on the PodGroup and on every member says the same.
    let said = |object: String| {
        let client = cluster.client.clone();
        let ns = ns.name.clone();
        async move {
            let events = events_about(&client, &ns, &object).await;
            events.get("WaitingForAdmission").cloned()
        }
    };
    let on_group = eventually("an Event on the PodGroup", 30, || said("big".into())).await;
    assert!(on_group.contains("cpu 128 needed"), "{on_group}");
    for i in 0..8 {
        let on_pod = eventually("an Event on each member", 30, || said(format!("big-{i}"))).await;
        assert!(
            on_pod.starts_with(&format!("gang {}/big: ", ns.name)),
            "{on_pod}"
        );
        assert!(on_pod.contains("cpu 128 needed"), "{on_pod}");
    }
    holds_for(10, "no member bound", async || {
        bound_with_prefix(&pods, "big").await.is_empty()
    })
    .await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn two_gangs_each_needing_sixty_percent_run_one_after_the_other_whole() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-sixty").await;
    let groups = ns.api::<PodGroup>();
    let pods = ns.api::<Pod>();
    // 5 x 16 CPUs = 80 of 128 CPUs each; members finish 20 s after they start running.
    for name in ["a", "b"] {
        groups
            .create(&PostParams::default(), &pod_group(name, 5, None))
            .await
            .unwrap();
    }
    for i in 0..5 {
        for name in ["a", "b"] {
            let extra = json!({"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "20s"}});
            pods.create(
                &PostParams::default(),
                &managed_pod(&format!("{name}-{i}"), Some(name), 16, extra),
            )
            .await
            .unwrap();
        }
    }
    let first = eventually("one gang bound whole", 30, || async {
        let a = bound_with_prefix(&pods, "a-").await.len();
        let b = bound_with_prefix(&pods, "b-").await.len();
        match (a, b) {
            (5, _) => Some(("a-", "b-")),
            (_, 5) => Some(("b-", "a-")),
            _ => None,
        }
    })
    .await;
    assert!(
        bound_with_prefix(&pods, first.1).await.is_empty(),
        "the second gang must wait whole"
    );
    holds_for(8, "the second gang waits whole", async || {
        bound_with_prefix(&pods, first.1).await.is_empty()
    })
    .await;
    bound_eventually(
        "the second gang bound whole after the first finished",
        90,
        &pods,
        first.1,
        5,
    )
    .await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_elastic_gang_of_four_to_eight_on_room_for_six_gets_six() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-elastic").await;
    let pods = ns.api::<Pod>();
    fill_one_node(&pods).await;
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &pod_group("elastic", 4, Some(8)))
        .await
        .unwrap();
    create_pods(&pods, "elastic", "elastic", 8, 16).await;
    bound_eventually("6 members bound", 60, &pods, "elastic", 6).await;
    holds_for(5, "exactly 6 bound", async || {
        bound_with_prefix(&pods, "elastic").await.len() == 6
    })
    .await;
    pod_group_in_phase(&ns.api::<PodGroup>(), "elastic", "Running").await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn plain_deployments_schedule_while_gangplank_is_stopped() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("plain-deploy").await;
    gangplank_ctl("stop");
    let deployments = ns.api::<Deployment>();
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let pods = ns.api::<Pod>();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        eventually("3 web pods bound with Gangplank stopped", 60, || async {
            (bound_with_prefix(&pods, "web-").await.len() == 3).then_some(())
        }),
    )
    .await;
    gangplank_ctl("start");
    outcome.expect("plain pods did not schedule while Gangplank was stopped");
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn killing_gangplank_while_binds_are_held_leaves_no_partial_gang_and_it_completes_after_restart()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-restart").await;
    let pods = gang_with_three_binds_held(&cluster, &ns).await;
    assert!(bound_with_prefix(&pods, "held").await.is_empty());

    gangplank_ctl("kill");
    holds_for(5, "no member bound while Gangplank is dead", async || {
        bound_with_prefix(&pods, "held").await.is_empty()
    })
    .await;
    gangplank_ctl("start");
    complete_the_held_gang(&pods).await;
    ns.delete().await;
}

/// The scheduling gates of `pod` as the API server stored it at creation.
fn gates_of(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|gates| gates.iter().map(|g| g.name.clone()).collect())
        .unwrap_or_default()
}

/// Gangplank's marker resources the pod's first container requests, in name order.
fn markers_of(pod: &Pod) -> Vec<String> {
    let requests = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.requests.as_ref());
    requests
        .into_iter()
        .flat_map(|r| r.keys())
        .filter(|name| {
            [labels::MANAGED_RESOURCE, labels::PLACEMENT_RESOURCE].contains(&name.as_str())
        })
        .cloned()
        .collect()
}

/// Every pod was created gated, with both markers (the placing extender places it).
fn all_arrived_gated(pods: &[Pod]) {
    for pod in pods {
        let name = &pod.metadata.name;
        assert_eq!(gates_of(pod), [labels::ADMISSION_GATE], "{name:?}");
        assert_eq!(
            markers_of(pod),
            [labels::MANAGED_RESOURCE, labels::PLACEMENT_RESOURCE],
            "{name:?}"
        );
    }
}

/// Creates `count` members of `group` (PodGroup of the same name, which the controller shows
/// first, so Gangplank knows it) and returns each member as created.
async fn create_gang(
    groups: &Api<PodGroup>,
    pods: &Api<Pod>,
    group: &str,
    count: usize,
    cpu: u32,
) -> Vec<Pod> {
    groups
        .create(
            &PostParams::default(),
            &pod_group(group, count as i32, None),
        )
        .await
        .unwrap();
    pod_group_in_phase(groups, group, "Pending").await;
    let mut created = Vec::new();
    for i in 0..count {
        let pod = managed_pod(&format!("{group}-{i}"), Some(group), cpu, json!({}));
        created.push(pods.create(&PostParams::default(), &pod).await.unwrap());
    }
    created
}

/// Waits until `gangplank_admission_door_open` is `open`.
async fn door_is(cluster: &Cluster, open: bool) {
    let want = f64::from(u8::from(open));
    eventually(
        &format!("gangplank_admission_door_open {want}"),
        30,
        || async {
            let metrics = cluster.gangplank_metrics().await;
            (metrics.sum("gangplank_admission_door_open", &[]) == want).then_some(())
        },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn while_nothing_waits_a_gang_that_fits_arrives_ungated_and_once_one_waits_for_room_gangs_arrive_gated()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gang-arrival").await;
    let groups = ns.api::<PodGroup>();
    let pods = ns.api::<Pod>();
    door_is(&cluster, true).await;
    let arrived_before = cluster
        .gangplank_metrics()
        .await
        .sum("gangplank_admission_arrived_pods_total", &[]);

    // Ungated, and only the binding extender's marker: the scheduler places it alone.
    let quick = create_gang(&groups, &pods, "quick", 4, 4).await;
    for pod in &quick {
        let name = &pod.metadata.name;
        assert_eq!(gates_of(pod), Vec::<String>::new(), "{name:?}");
        assert_eq!(markers_of(pod), [labels::MANAGED_RESOURCE], "{name:?}");
    }
    bound_eventually("all 4 members of quick bound", 30, &pods, "quick", 4).await;
    pod_group_in_phase(&groups, "quick", "Running").await;
    let arrived = cluster
        .gangplank_metrics()
        .await
        .sum("gangplank_admission_arrived_pods_total", &[]);
    assert_eq!(arrived - arrived_before, 4.0);

    // The whole cluster (4 x 32 CPUs) while quick holds 16: it cannot fit now and waits.
    let huge = create_gang(&groups, &pods, "huge", 4, 32).await;
    all_arrived_gated(&huge);
    door_is(&cluster, false).await;
    let small = create_gang(&groups, &pods, "small", 2, 1).await;
    all_arrived_gated(&small);
    ns.delete().await;
    door_is(&cluster, true).await;
}
