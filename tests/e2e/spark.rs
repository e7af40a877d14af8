//! Spark applications as spark-operator v2 schedules them with `batchScheduler: volcano`, with
//! no operator running: a Volcano PodGroup `spark-<app>-pg` of `minMember` 1 whose
//! `minResources` are the driver and all its executors, in the queue the application names
//! (`spec.queue`), created just before the driver pod, which carries Volcano's group
//! annotation; then the driver creates its executors (here the test does, as kwok runs no
//! JVM: owned by the driver pod, with the same annotation). The cluster is `e2e/up`'s default:
//! 4 nodes of 32 CPUs.

use gangplank::api::volcano::{VolcanoPodGroup, VolcanoPodGroupSpec};
use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::operators::volcano_phase;
use crate::queues::create_queue;
use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, default_queue, delete_queue, eventually,
    holds_for, pod,
};

/// CPUs of a driver, and of each of its three executors (a whole node each).
const DRIVER_CPU: u32 = 16;
const EXECUTOR_CPU: u32 = 32;
const EXECUTORS: u32 = 3;

/// The Volcano PodGroup spark-operator writes for the application `app` in `queue`.
fn spark_pod_group(app: &str, queue: &str) -> VolcanoPodGroup {
    let cpu = DRIVER_CPU + EXECUTORS * EXECUTOR_CPU;
    VolcanoPodGroup::new(
        &format!("spark-{app}-pg"),
        VolcanoPodGroupSpec {
            min_member: Some(1),
            min_resources: [("cpu".into(), Quantity(cpu.to_string()))].into(),
            queue: Some(queue.into()),
            ..Default::default()
        },
    )
}

/// A pod of the application `app` in Spark's `role`, with the annotation spark-operator gives
/// it and the scheduler name it asks for; `extra` is merged into its metadata.
fn spark_pod(app: &str, name: &str, role: &str, cpu: u32, extra: serde_json::Value) -> Pod {
    let mut metadata = json!({"name": name,
        "labels": {"spark-role": role, "spark-app-name": app},
        "annotations": {(labels::VOLCANO_GROUP_NAME_ANNOTATION): format!("spark-{app}-pg")}});
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            metadata[k] = v.clone();
        }
    }
    pod(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"schedulerName": "volcano", "containers": [{"name": "spark", "image": "spark",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
}

/// Creates the executors of `app` as its driver would: owned by the driver pod.
async fn create_executors(pods: &Api<Pod>, app: &str) {
    let driver = pods.get(&format!("{app}-driver")).await.unwrap();
    let owner = json!([{"apiVersion": "v1", "kind": "Pod", "name": format!("{app}-driver"),
        "uid": driver.metadata.uid.unwrap(), "controller": true}]);
    for i in 0..EXECUTORS {
        let executor = spark_pod(
            app,
            &format!("{app}-exec-{i}"),
            "executor",
            EXECUTOR_CPU,
            json!({"ownerReferences": owner}),
        );
        pods.create(&PostParams::default(), &executor)
            .await
            .unwrap();
    }
}

/// The drivers of `pods` that are bound.
async fn bound_drivers(pods: &Api<Pod>) -> Vec<String> {
    let mut drivers = bound_with_prefix(pods, "").await;
    drivers.retain(|name| name.ends_with("-driver"));
    drivers
}

/// `(status, reason, message)` of the PodGroup's `Admitted` condition.
async fn admitted(groups: &Api<PodGroup>, name: &str) -> Option<(String, String, String)> {
    let status = groups.get_opt(name).await.ok()??.status?;
    let c = status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Admitted")?;
    Some((c.status, c.reason, c.message))
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn two_spark_applications_that_do_not_fit_together_run_one_after_the_other_never_two_drivers_without_their_executors_room()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("spark").await;
    // Spark's pods carry only Volcano's annotation: a namespace with a default queue brings
    // them to Gangplank's webhook; the applications' own queue is the one their PodGroups name.
    default_queue(&cluster, &ns.name, "default").await;
    let queue = create_queue(&cluster.client, "spark", QueueSpec::default()).await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let volcano = ns.api::<VolcanoPodGroup>();

    // 16 + 3 x 32 = 112 CPUs each, of 128: both drivers alone would fit, their executors not.
    for app in ["one", "two"] {
        volcano
            .create(&PostParams::default(), &spark_pod_group(app, &queue))
            .await
            .unwrap();
        let driver = spark_pod(
            app,
            &format!("{app}-driver"),
            "driver",
            DRIVER_CPU,
            json!({}),
        );
        pods.create(&PostParams::default(), &driver).await.unwrap();
    }
    let first = eventually("a driver bound", 60, || async {
        bound_drivers(&pods).await.pop()
    })
    .await;
    let (first, second) = if first == "one-driver" {
        ("one", "two")
    } else {
        ("two", "one")
    };
    let (first_pg, second_pg) = (format!("spark-{first}-pg"), format!("spark-{second}-pg"));
    for group in [&first_pg, &second_pg] {
        let spec = eventually(&format!("PodGroup {group}"), 30, || async {
            Some(groups.get_opt(group).await.ok()??.spec)
        })
        .await;
        assert_eq!(spec.queue.as_deref(), Some(queue.as_str()), "{group}");
        assert_eq!(spec.min_member, 1, "{group}");
    }
    let (status, reason, why) = eventually(&format!("{second_pg} saying why it waits"), 30, || {
        admitted(&groups, &second_pg)
    })
    .await;
    assert_eq!(status, "False", "{reason}: {why}");
    assert!(
        ["DoesNotFit", "Reserved", "BehindReservation"].contains(&reason.as_str()),
        "{reason}: {why}"
    );
    let (_, _, kept) = eventually(
        &format!("{first_pg} keeping its executors' room"),
        30,
        || async {
            admitted(&groups, &first_pg)
                .await
                .filter(|(_, _, why)| why.contains("room kept on minResources"))
        },
    )
    .await;
    assert!(kept.contains("cpu: 96"), "{kept}");
    let never_two = format!("{second}'s driver not bound while {first} runs");
    holds_for(10, &never_two, async || {
        bound_drivers(&pods).await.len() == 1
            && volcano_phase(&volcano, &second_pg).await.as_deref() == Some("Pending")
    })
    .await;

    // The first driver's executors are let in and bound, in the room kept for them.
    create_executors(&pods, first).await;
    bound_eventually(
        &format!("{first}'s three executors bound"),
        60,
        &pods,
        &format!("{first}-exec-"),
        EXECUTORS as usize,
    )
    .await;
    holds_for(5, &never_two, async || {
        bound_drivers(&pods).await == [format!("{first}-driver")]
    })
    .await;

    // The first application ends (spark-operator deletes its PodGroup; its pods go): the
    // second's driver is bound, and its executors after it.
    volcano
        .delete(&first_pg, &DeleteParams::background())
        .await
        .unwrap();
    // The executors first: the garbage collector deletes those of a deleted driver.
    let done = (0..EXECUTORS)
        .map(|i| format!("{first}-exec-{i}"))
        .chain(std::iter::once(format!("{first}-driver")));
    for pod in done {
        pods.delete(&pod, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    eventually(&format!("{second}'s driver alone bound"), 90, || async {
        (bound_drivers(&pods).await == [format!("{second}-driver")]).then_some(())
    })
    .await;
    eventually(&format!("{second_pg} Running"), 60, || async {
        (volcano_phase(&volcano, &second_pg).await.as_deref() == Some("Running")).then_some(())
    })
    .await;
    create_executors(&pods, second).await;
    bound_eventually(
        &format!("{second}'s three executors bound"),
        60,
        &pods,
        &format!("{second}-exec-"),
        EXECUTORS as usize,
    )
    .await;

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
