//! Spark applications submitted by Kubeflow's spark-operator v2.5.2 (`e2e/up --operators
//! spark-operator`: its controller, confined to namespace `spark-operator`, runs spark-submit
//! from a Spark 4.2.0 made of its Maven jars), with `batchScheduler: volcano` (the operator
//! writes a Volcano PodGroup `spark-<app>-pg` of `minMember` 1 whose `minResources` are the
//! driver and its executors, in the queue `batchSchedulerOptions.queue` names) and without (no
//! PodGroup: Gangplank groups the application's pods and keeps the same room itself). The
//! driver pod is spark-submit's; on kwok no JVM runs in it, so the test makes the executors as
//! the driver would, from the configuration spark-submit gave it (its ConfigMap): owned by the
//! driver pod, with the labels and annotations the operator asked Spark to give executors.
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;

use gangplank::api::volcano::VolcanoPodGroup;
use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use crate::operators::{operator_runs, volcano_phase};
use crate::queues::{QueueGuard, create_queue, delete_queue};
use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, default_queue, eventually, holds_for, pod,
    pod_group_collected,
};

/// The namespace e2e/up confines spark-operator to.
const NAMESPACE: &str = "spark-operator";
/// CPUs of a driver, and of each of its three executors (a whole node each).
const DRIVER_CPU: u32 = 16;
const EXECUTOR_CPU: u32 = 32;
const EXECUTORS: u32 = 3;
/// An executor's memory request: Spark's `1g` and its least overhead, 384 MiB.
const EXECUTOR_MEMORY: &str = "1408Mi";

/// How the application asks to be ganged.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// `spec.batchScheduler: volcano`, its queue in `batchSchedulerOptions.queue`.
    Volcano,
    /// No batch scheduler; its queue in Gangplank's label on the application.
    Plain,
}

impl Mode {
    /// The group the application's pods are in: its Volcano PodGroup's, or its own name.
    fn group(self, app: &str) -> String {
        match self {
            Mode::Volcano => format!("spark-{app}-pg"),
            Mode::Plain => app.to_owned(),
        }
    }
}

fn applications(cluster: &Cluster) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "sparkoperator.k8s.io",
        "v1beta2",
        "SparkApplication",
    ));
    Api::namespaced_with(cluster.client.clone(), NAMESPACE, &resource)
}

/// A SparkApplication `app` in cluster mode: SparkPi on a 16-CPU driver and three 32-CPU
/// executors, 112 CPUs in all, in `queue` named as `mode` names it.
fn application(app: &str, mode: Mode, queue: &str) -> DynamicObject {
    let mut object = json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "metadata": {"name": app, "labels": {}},
        "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "4.2.0",
            "image": "spark:4.2.0", "mainClass": "org.apache.spark.examples.SparkPi",
            "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": DRIVER_CPU, "memory": "1g", "serviceAccount": "default"},
            "executor": {"instances": EXECUTORS, "cores": EXECUTOR_CPU, "memory": "1g"}}
    });
    match mode {
        Mode::Volcano => {
            object["spec"]["batchScheduler"] = json!("volcano");
            object["spec"]["batchSchedulerOptions"] = json!({"queue": queue});
        }
        Mode::Plain => object["metadata"]["labels"][labels::QUEUE_LABEL] = json!(queue),
    }
    serde_json::from_value(object).unwrap()
}

/// The Spark configuration spark-submit gave the driver `driver`: its ConfigMap's
/// `spark.properties` (Java properties), read as its JVM would.
async fn driver_configuration(
    pods: &Api<Pod>,
    configs: &Api<ConfigMap>,
    driver: &str,
) -> BTreeMap<String, String> {
    let pod = pods.get(driver).await.unwrap();
    let volumes = pod.spec.unwrap().volumes.unwrap_or_default();
    let map = volumes
        .iter()
        .find_map(|v| {
            v.config_map
                .as_ref()
                .filter(|_| v.name == "spark-conf-volume-driver")
        })
        .expect("the driver mounts spark-submit's configuration")
        .name
        .clone();
    let data = configs.get(&map).await.unwrap().data.unwrap_or_default();
    let properties = data.get("spark.properties").expect("spark.properties");
    properties
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            (
                k.replace("\\:", ":"),
                v.replace("\\:", ":").replace("\\=", "="),
            )
        })
        .collect()
}

/// Creates the executors of `app` as its driver would: owned by the driver pod (and, as the
/// operator's executor template asks, referring to the application), with the labels and
/// annotations `spark.kubernetes.executor.label.*` and `.annotation.*` give them.
async fn create_executors(cluster: &Cluster, pods: &Api<Pod>, app: &str) {
    let configs: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let driver_name = format!("{app}-driver");
    let conf = driver_configuration(pods, &configs, &driver_name).await;
    let prefixed = |prefix: &str| -> serde_json::Map<String, serde_json::Value> {
        conf.iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), json!(v))))
            .collect()
    };
    let mut executor_labels = prefixed("spark.kubernetes.executor.label.");
    executor_labels.insert("spark-role".into(), json!("executor"));
    let annotations = prefixed("spark.kubernetes.executor.annotation.");
    assert_eq!(
        conf.get("spark.executor.cores").map(String::as_str),
        Some(EXECUTOR_CPU.to_string().as_str())
    );
    let driver = pods.get(&driver_name).await.unwrap();
    let application = applications(cluster).get(app).await.unwrap();
    let owners = json!([
        {"apiVersion": "v1", "kind": "Pod", "name": driver_name,
         "uid": driver.metadata.uid.unwrap(), "controller": true},
        {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": app,
         "uid": application.metadata.uid.unwrap()}]);
    for i in 1..=EXECUTORS {
        let mut labels = executor_labels.clone();
        labels.insert("spark-exec-id".into(), json!(i.to_string()));
        let executor = pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-exec-{i}"), "labels": labels,
                "annotations": annotations, "ownerReferences": owners},
            "spec": {"containers": [{"name": "spark-kubernetes-executor", "image": "spark:4.2.0",
                "resources": {"requests": {"cpu": EXECUTOR_CPU.to_string(),
                    "memory": EXECUTOR_MEMORY}}}]}
        }));
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

/// The story of both modes: two applications of 112 CPUs on 128, submitted at once, in a
/// queue of their own. One driver is bound and the room of its executors kept (its PodGroup
/// says how much); the other's driver is not bound while the first runs, its PodGroup saying
/// why (and, with Volcano, its Volcano PodGroup `Pending`). The first's executors are bound in
/// the kept room. Once the first application is deleted, the second's driver is bound, then
/// its executors.
async fn two_applications_that_do_not_fit_together_run_one_after_the_other(mode: Mode) {
    let cluster = &Cluster::connect().await;
    operator_runs(cluster, "spark-operator");
    let queue = create_queue(&cluster.client, "spark", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace_named(NAMESPACE.to_owned()).await;
    if mode == Mode::Volcano {
        // Spark's pods carry only Volcano's annotation: a namespace with a default queue
        // brings them to Gangplank's webhook; the group's queue is its Volcano PodGroup's.
        default_queue(cluster, NAMESPACE, labels::DEFAULT_QUEUE).await;
    }
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let volcano = ns.api::<VolcanoPodGroup>();
    let apps = applications(cluster);
    for app in ["one", "two"] {
        apps.create(&PostParams::default(), &application(app, mode, &queue))
            .await
            .unwrap();
    }

    let first = eventually("a driver bound", 120, || async {
        bound_drivers(&pods).await.pop()
    })
    .await;
    let (first, second) = if first == "one-driver" {
        ("one", "two")
    } else {
        ("two", "one")
    };
    let (first_group, second_group) = (mode.group(first), mode.group(second));
    for group in [&first_group, &second_group] {
        let spec = eventually(&format!("PodGroup {group}"), 60, || async {
            Some(groups.get_opt(group).await.ok()??.spec)
        })
        .await;
        assert_eq!(spec.queue.as_deref(), Some(queue.as_str()), "{group}");
        assert_eq!(spec.min_member, 1, "{group}");
    }
    let (status, reason, why) =
        eventually(&format!("{second_group} saying why it waits"), 60, || {
            admitted(&groups, &second_group)
        })
        .await;
    assert_eq!(status, "False", "{reason}: {why}");
    assert!(
        ["DoesNotFit", "Reserved", "BehindReservation"].contains(&reason.as_str()),
        "{reason}: {why}"
    );
    let (_, _, kept) = eventually(
        &format!("{first_group} keeping its executors' room"),
        30,
        || async {
            admitted(&groups, &first_group)
                .await
                .filter(|(_, _, why)| why.contains("room kept on minResources"))
        },
    )
    .await;
    assert!(kept.contains("cpu: 96"), "{kept}");
    let never_two = format!("{second}'s driver not bound while {first} runs");
    holds_for(10, &never_two, async || {
        let waiting = match mode {
            Mode::Volcano => {
                volcano_phase(&volcano, &second_group).await.as_deref() == Some("Pending")
            }
            Mode::Plain => true,
        };
        bound_drivers(&pods).await.len() == 1 && waiting
    })
    .await;

    create_executors(cluster, &pods, first).await;
    bound_eventually(
        &format!("{first}'s three executors bound"),
        60,
        &pods,
        &format!("{first}-exec-"),
        EXECUTORS as usize,
    )
    .await;

    // The first application is deleted: the garbage collector takes its driver (and its
    // executors with it) and its PodGroup.
    apps.delete(first, &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, &first_group, "its application").await;
    eventually(&format!("{second}'s driver alone bound"), 120, || async {
        (bound_drivers(&pods).await == [format!("{second}-driver")]).then_some(())
    })
    .await;
    create_executors(cluster, &pods, second).await;
    bound_eventually(
        &format!("{second}'s three executors bound"),
        60,
        &pods,
        &format!("{second}-exec-"),
        EXECUTORS as usize,
    )
    .await;

    apps.delete(second, &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, &second_group, "its application").await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn two_spark_applications_that_do_not_fit_together_run_one_after_the_other_never_two_drivers_without_their_executors_room()
 {
    two_applications_that_do_not_fit_together_run_one_after_the_other(Mode::Volcano).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn two_spark_applications_without_a_batch_scheduler_run_one_after_the_other_in_the_queue_their_label_names()
 {
    two_applications_that_do_not_fit_together_run_one_after_the_other(Mode::Plain).await;
}
