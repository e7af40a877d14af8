//! The gang dialects operators write, read as Gangplank gangs: scheduler-plugins' PodGroup
//! (`scheduling.x-k8s.io`) with its pods labelled `scheduling.x-k8s.io/pod-group`, and Volcano's
//! (`scheduling.volcano.sh`) with its pods annotated `scheduling.k8s.io/group-name`, by hand and
//! from the real operators e2e/up runs (`--operators`).
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs. LeaderWorkerSet's replicas are in
//! [`lws`] (one gang of them all: [`lws_replicas`]), Kubeflow Trainer's TrainJobs in [`trainer`],
//! a JobSet as a gang of gangs in [`jobset`], Kueue's Workloads placed whole in [`kueue`].

mod jobset;
pub mod kueue;
mod lws;
mod lws_replicas;
mod trainer;

use gangplank::api::scheduler_plugins::{SchedulerPluginsPodGroup, SchedulerPluginsPodGroupSpec};
use gangplank::api::volcano::{VolcanoPodGroup, VolcanoPodGroupSpec};
use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use crate::queues::{QueueGuard, create_queue, delete_queue, not_admitted};
use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, default_queue, eventually, fill_one_node,
    holds_for, managed_pod, pod, pod_group, pod_group_collected, pod_group_in_phase,
};

/// A pod as an operator in scheduler-plugins mode makes it: only the coscheduling label names
/// its gang; Gangplank's webhook adds the rest.
fn coscheduled_pod(name: &str, group: &str, cpu: u32) -> Pod {
    pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {(labels::SCHEDULER_PLUGINS_POD_GROUP_LABEL): group}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_scheduler_plugins_pod_group_waits_whole_without_room_runs_whole_with_it_and_takes_its_gang_along_when_deleted()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("scheduler-plugins").await;
    let queue = create_queue(&cluster.client, "scheduler-plugins", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let sources = ns.api::<SchedulerPluginsPodGroup>();
    fill_one_node(&pods).await;

    let mut source = SchedulerPluginsPodGroup::new(
        "train",
        SchedulerPluginsPodGroupSpec {
            min_member: Some(4),
            schedule_timeout_seconds: Some(15),
            ..Default::default()
        },
    );
    source.metadata.annotations = Some([(labels::QUEUE_LABEL.into(), queue.clone())].into());
    let source = sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let group = pod_group_in_phase(&groups, "train", "Pending").await;
    assert_eq!(group.spec.min_member, 4);
    assert_eq!(group.spec.queue.as_deref(), Some(queue.as_str()));
    let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("PodGroup", source.metadata.uid.as_deref().unwrap())
    );

    // A whole node each: three nodes are free, so the gang of four waits, whole.
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &coscheduled_pod(&format!("train-{i}"), "train", 32),
        )
        .await
        .unwrap();
    }
    holds_for(10, "no member of train bound", async || {
        bound_with_prefix(&pods, "train").await.is_empty()
    })
    .await;
    let why = groups
        .get("train")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions;
    let admitted = why.iter().find(|c| c.type_ == "Admitted").unwrap();
    assert_eq!(admitted.status, "False", "{admitted:?}");

    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    bound_eventually("all four members of train bound", 60, &pods, "train", 4).await;

    sources
        .delete("train", &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, "train", "its source").await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// A pod as an operator in Volcano mode makes it: only Volcano's annotation names its gang (the
/// namespace's default queue brings it to Gangplank's webhook).
fn volcano_pod(name: &str, group: &str, cpu: u32) -> Pod {
    pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name,
            "annotations": {(labels::VOLCANO_GROUP_NAME_ANNOTATION): group}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_volcano_pod_group_is_admitted_on_its_min_resources_before_its_pods_exist_and_its_phase_says_so()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("volcano").await;
    let queue = create_queue(&cluster.client, "volcano", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    // Pods that carry only Volcano's annotation reach the webhook in a namespace with a
    // default queue; the group's queue is the Volcano PodGroup's.
    default_queue(&cluster, &ns.name, "default").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let sources = ns.api::<VolcanoPodGroup>();
    fill_one_node(&pods).await;

    // Four whole nodes' worth, as the training-operator computes it; three nodes are free.
    let source = VolcanoPodGroup::new(
        "train",
        VolcanoPodGroupSpec {
            min_member: Some(4),
            min_resources: [("cpu".into(), Quantity("128".into()))].into(),
            queue: Some(queue.clone()),
            ..Default::default()
        },
    );
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let group = pod_group_in_phase(&groups, "train", "Pending").await;
    assert_eq!(
        (group.spec.min_member, group.spec.queue.as_deref()),
        (4, Some(queue.as_str())),
        "the Volcano PodGroup's spec.queue, not the namespace's default"
    );
    eventually("the Volcano PodGroup Pending", 30, || async {
        (volcano_phase(&sources, "train").await.as_deref() == Some("Pending")).then_some(())
    })
    .await;
    holds_for(10, "the Volcano PodGroup still Pending", async || {
        volcano_phase(&sources, "train").await.as_deref() == Some("Pending")
    })
    .await;

    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Volcano PodGroup Inqueue with no pod yet",
        60,
        || async {
            (volcano_phase(&sources, "train").await.as_deref() == Some("Inqueue")).then_some(())
        },
    )
    .await;
    for i in 0..4 {
        let created = pods
            .create(
                &PostParams::default(),
                &volcano_pod(&format!("train-{i}"), "train", 32),
            )
            .await
            .unwrap();
        let gates = created.spec.unwrap().scheduling_gates.unwrap_or_default();
        assert!(gates.is_empty(), "train-{i} was gated: {gates:?}");
    }
    bound_eventually("all four members of train bound", 60, &pods, "train", 4).await;
    eventually("the Volcano PodGroup Running", 60, || async {
        (volcano_phase(&sources, "train").await.as_deref() == Some("Running")).then_some(())
    })
    .await;

    sources
        .delete("train", &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, "train", "its source").await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_naming_a_scheduler_nobody_serves_waits_saying_so_and_holds_no_room() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("unserved").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    for (group, size) in [("astray", 2), ("next", 4)] {
        groups
            .create(&PostParams::default(), &pod_group(group, size, None))
            .await
            .unwrap();
    }
    // Two whole nodes for a scheduler no profile serves; then the whole cluster for a gang
    // on the default scheduler, which fits only if astray holds nothing.
    for i in 0..2 {
        let mut member = managed_pod(&format!("astray-{i}"), Some("astray"), 32, json!({}));
        member.spec.as_mut().unwrap().scheduler_name = Some("nobody".into());
        pods.create(&PostParams::default(), &member).await.unwrap();
    }
    let astray = eventually("astray waiting for a scheduler", 30, || async {
        let status = groups.get("astray").await.ok()?.status?;
        let admitted = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Admitted")?;
        (admitted.reason == "SchedulerNotServed").then_some(admitted)
    })
    .await;
    assert!(astray.message.contains("\"nobody\""), "{}", astray.message);
    for i in 0..4 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("next-{i}"), Some("next"), 32, json!({})),
        )
        .await
        .unwrap();
    }
    bound_eventually("all four members of next bound", 60, &pods, "next-", 4).await;
    assert!(bound_with_prefix(&pods, "astray-").await.is_empty());
    ns.delete().await;
}

/// Fails unless e2e/up runs `name` beside the cluster (e2e/test asks for the operators the
/// suite tests; `e2e/up --operators`).
pub fn operator_runs(cluster: &Cluster, name: &str) {
    let running = cluster
        .env
        .get("GP_OPERATORS")
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_default();
    assert!(
        running.split_whitespace().any(|o| o == name),
        "this test needs {name}: bring the cluster up with e2e/up --operators {name} (e2e/test does), not {running:?}"
    );
}

/// A PyTorchJob of one master and `workers` workers, each asking for `cpu` CPUs.
fn pytorch_job(name: &str, workers: u32, cpu: u32) -> DynamicObject {
    let replica = |replicas: u32| {
        json!({"replicas": replicas, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "busybox",
                "resources": {"requests": {"cpu": cpu.to_string()}}}]}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}}
    }))
    .unwrap()
}

/// A RayCluster of a head and `workers` workers, each asking for `cpu` CPUs, with KubeRay's
/// gang label when `gang`.
fn ray_cluster(name: &str, workers: u32, cpu: u32, gang: bool) -> DynamicObject {
    let template = |container: &str| {
        json!({"spec": {"containers": [{"name": container, "image": "rayproject/ray",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}})
    };
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "labels": if gang {
            json!({"ray.io/gang-scheduling-enabled": "true"})
        } else {
            json!({})
        }},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template("ray-head")},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": workers,
                "minReplicas": workers, "maxReplicas": workers, "rayStartParams": {},
                "template": template("ray-worker")}]
        }
    }))
    .unwrap()
}

/// An MPIJob (kubeflow.org/v2beta1) of one launcher and `workers` workers, each asking for
/// `cpu` CPUs.
fn mpi_job(name: &str, workers: u32, cpu: u32) -> DynamicObject {
    let replica = |replicas: u32, container: &str| {
        json!({"replicas": replicas, "template": {"spec": {
            "containers": [{"name": container, "image": "mpioperator/openmpi",
                "resources": {"requests": {"cpu": cpu.to_string()}}}]}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
            "Launcher": replica(1, "launcher"), "Worker": replica(workers, "worker")}}
    }))
    .unwrap()
}

/// A JobSet of a leader Job of one pod and a workers Job of `workers` pods, each asking for
/// `cpu` CPUs.
fn jobset(name: &str, workers: u32, cpu: u32) -> DynamicObject {
    let job = |name: &str, pods: u32| {
        json!({"name": name, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": name, "image": "busybox",
                    "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
        "spec": {"replicatedJobs": [job("leader", 1), job("workers", workers)]}
    }))
    .unwrap()
}

/// How an operator asks for a gang: the dialect of PodGroup it writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// None: no gang flag on the operator; the pods are created at once.
    Plain,
    /// A scheduler-plugins PodGroup; the pods are created at once.
    SchedulerPlugins,
    /// A Volcano PodGroup; the pods are created only once its phase leaves Pending when
    /// `waits` (the training-operator), at once otherwise (KubeRay).
    Volcano { waits: bool },
}

/// What an operator in one of its modes does with a workload.
struct Mode<'a> {
    dialect: Dialect,
    /// The scheduler name it puts on the pods.
    scheduler: &'a str,
    /// The name of the PodGroup it asks for: the workload's, unless it says otherwise.
    group: Option<&'a str>,
    /// Where the user names the workload's queue.
    queue_on: QueueOn,
}

/// Where an operator row names its queue, each row a queue of its own: a queue the test
/// makes, never `default`, where a group lands when nothing names one.
#[derive(Clone, Copy)]
enum QueueOn {
    /// The namespace's default queue.
    Namespace,
    /// A label of this key on the workload, which its operator or Gangplank's workload webhook
    /// carries to its pods and PodGroup.
    WorkloadLabel(&'static str),
}

/// The phase of the Volcano PodGroup `name`, as Gangplank wrote it.
pub async fn volcano_phase(volcano: &Api<VolcanoPodGroup>, name: &str) -> Option<String> {
    volcano.get_opt(name).await.ok()??.status?.phase
}

/// The pods of `pods` whose names start with `prefix`.
async fn pods_with_prefix(pods: &Api<Pod>, prefix: &str) -> usize {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .count()
}

/// Where an operator test runs.
enum Place {
    /// The namespace of that name, where e2e/up runs the operator in the test's mode (and in no
    /// other namespace).
    Operators(&'static str),
    /// A new namespace named from that prefix (the operator serves every namespace).
    Fresh(&'static str),
}

/// The story every operator row of the table in docs/operators.md tells: the workload
/// `workload`, whose four pods (names starting with its name and `-`) each take a whole node, is
/// created in the namespace of `place` while one node is full, by `operator` (which e2e/up must
/// run) in `mode`, naming a queue of its own where the mode says. Its PodGroup (in the mode's
/// dialect; with no gang flag, the workload itself) becomes a Gangplank gang of four in that
/// queue; none of its pods binds while only three nodes are free (when the operator waits for a
/// Volcano PodGroup's phase, none is even created), the Volcano PodGroup stays Pending, and the
/// PodGroup says it does not fit, needing 128 CPUs; once the node is free all four bind, on the
/// scheduler name the operator set, and a Volcano PodGroup is Running; deleting the workload
/// deletes its PodGroups.
async fn waits_whole_then_runs_whole(
    operator: &str,
    place: Place,
    mode: Mode<'_>,
    workload: DynamicObject,
) {
    let cluster = &Cluster::connect().await;
    operator_runs(cluster, operator);
    let ns = match place {
        Place::Operators(name) => cluster.namespace_named(name.into()).await,
        Place::Fresh(prefix) => cluster.namespace(prefix).await,
    };
    let dialect = mode.dialect;
    let queue = create_queue(&cluster.client, operator, QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let mut workload = workload;
    match mode.queue_on {
        QueueOn::Namespace => default_queue(cluster, &ns.name, &queue).await,
        QueueOn::WorkloadLabel(key) => {
            workload
                .metadata
                .labels
                .get_or_insert_default()
                .insert(key.into(), queue.clone());
        }
    }
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let volcano = ns.api::<VolcanoPodGroup>();
    let types = workload
        .types
        .as_ref()
        .expect("the workload names its kind");
    let kind = types.kind.as_str();
    let resource = ApiResource::from_gvk(&GroupVersionKind::try_from(types).unwrap());
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), &ns.name, &resource);
    fill_one_node(&pods).await;

    let workload_name = workload.metadata.name.clone().unwrap();
    let prefix = &format!("{workload_name}-");
    let name = mode.group.unwrap_or(&workload_name).to_owned();
    workloads
        .create(&PostParams::default(), &workload)
        .await
        .unwrap();
    let gang = pod_group_in_phase(&groups, &name, "Pending").await;
    assert_eq!(gang.spec.min_member, 4);
    assert_eq!(gang.spec.queue.as_deref(), Some(queue.as_str()));
    match dialect {
        Dialect::Plain | Dialect::SchedulerPlugins | Dialect::Volcano { waits: false } => {
            eventually(&format!("the {kind}'s four pods"), 60, || async {
                (pods_with_prefix(&pods, prefix).await == 4).then_some(())
            })
            .await;
            holds_for(10, &format!("no pod of {name} bound"), async || {
                bound_with_prefix(&pods, prefix).await.is_empty()
                    && (dialect == Dialect::Plain
                        || dialect == Dialect::SchedulerPlugins
                        || volcano_phase(&volcano, &name).await.as_deref() == Some("Pending"))
            })
            .await;
        }
        Dialect::Volcano { waits: true } => {
            eventually(
                &format!("{name}'s Volcano PodGroup Pending"),
                30,
                || async {
                    (volcano_phase(&volcano, &name).await.as_deref() == Some("Pending"))
                        .then_some(())
                },
            )
            .await;
            holds_for(10, &format!("no pod of {name} created"), async || {
                pods_with_prefix(&pods, prefix).await == 0
                    && volcano_phase(&volcano, &name).await.as_deref() == Some("Pending")
            })
            .await;
        }
    }
    let why = eventually(
        &format!("{name}'s PodGroup saying why it waits"),
        30,
        || async {
            let (_, why) = not_admitted(&groups, &name).await?;
            // `DoesNotFit`, or `Reserved` once it heads the line and holds the room there is.
            why.contains("does not fit now").then_some(why)
        },
    )
    .await;
    assert!(why.contains("cpu 128 needed"), "{why}");

    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    let bound = eventually(&format!("all four pods of {name} bound"), 90, || async {
        let bound = bound_with_prefix(&pods, prefix).await;
        (bound.len() == 4).then_some(bound)
    })
    .await;
    for pod in &bound {
        let spec = pods.get(pod).await.unwrap().spec.unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some(mode.scheduler));
    }
    if matches!(dialect, Dialect::Volcano { .. }) {
        eventually(
            &format!("{name}'s Volcano PodGroup Running"),
            60,
            || async {
                (volcano_phase(&volcano, &name).await.as_deref() == Some("Running")).then_some(())
            },
        )
        .await;
    }

    workloads
        .delete(&workload_name, &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, &name, &format!("{kind} {workload_name}")).await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// The modes most operators share: scheduler-plugins' PodGroup, Volcano's (the pods created at
/// once, or only once its phase leaves Pending), no gang flag; each with its queue named as the
/// namespace's default queue.
const SCHEDULER_PLUGINS: Mode = Mode {
    dialect: Dialect::SchedulerPlugins,
    scheduler: "scheduler-plugins-scheduler",
    group: None,
    queue_on: QueueOn::Namespace,
};
const VOLCANO: Mode = Mode {
    dialect: Dialect::Volcano { waits: false },
    scheduler: "volcano",
    group: None,
    queue_on: QueueOn::Namespace,
};
const VOLCANO_WAITING: Mode = Mode {
    dialect: Dialect::Volcano { waits: true },
    ..VOLCANO
};
const PLAIN: Mode = Mode {
    dialect: Dialect::Plain,
    scheduler: "default-scheduler",
    group: None,
    queue_on: QueueOn::Namespace,
};

/// One ignored `#[tokio::test]` per row, named as the row says, telling
/// [`waits_whole_then_runs_whole`]'s story with the row's operator, place, mode and workload.
macro_rules! operator_rows {
    ($($test:ident: $operator:literal, $place:expr, $mode:expr, $workload:expr;)*) => {$(
        #[tokio::test]
        #[ignore = "needs the local control plane: run e2e/test"]
        async fn $test() {
            waits_whole_then_runs_whole($operator, $place, $mode, $workload).await;
        }
    )*};
}

operator_rows! {
    a_pytorch_job_of_training_operator_in_scheduler_plugins_mode_waits_whole_then_runs_whole:
        "training-operator", Place::Operators("training-operator"), SCHEDULER_PLUGINS,
        pytorch_job("train", 3, 32);
    a_pytorch_job_of_training_operator_in_volcano_mode_waits_uncreated_then_runs_whole:
        "training-operator", Place::Operators("training-operator-volcano"), VOLCANO_WAITING,
        pytorch_job("train", 3, 32);
    a_pytorch_job_of_training_operator_without_a_gang_flag_is_one_gang_all_the_same:
        "training-operator", Place::Operators("training-operator-plain"), PLAIN,
        pytorch_job("train", 3, 32);
    a_ray_cluster_of_kuberay_in_scheduler_plugins_mode_waits_whole_then_runs_whole:
        "kuberay", Place::Operators("kuberay"), SCHEDULER_PLUGINS,
        ray_cluster("ray", 3, 32, true);
    // KubeRay names its batch scheduler on every RayCluster's pods, gang label or not.
    a_ray_cluster_without_kuberay_s_gang_label_is_one_gang_all_the_same:
        "kuberay", Place::Operators("kuberay-plain"),
        Mode { scheduler: "scheduler-plugins-scheduler", ..PLAIN },
        ray_cluster("ray", 3, 32, false);
    a_ray_cluster_of_kuberay_in_volcano_mode_in_the_queue_of_its_label_waits_whole_then_runs_whole:
        "kuberay", Place::Operators("kuberay-volcano"),
        Mode {
            group: Some("ray-ray-pg"),
            queue_on: QueueOn::WorkloadLabel(labels::VOLCANO_QUEUE_NAME_LABEL),
            ..VOLCANO
        },
        ray_cluster("ray", 3, 32, false);
    an_mpi_job_in_scheduler_plugins_mode_waits_whole_then_runs_whole_launcher_included:
        "mpi-operator", Place::Operators("mpi-operator"), SCHEDULER_PLUGINS,
        mpi_job("train", 3, 32);
    an_mpi_job_in_volcano_mode_waits_whole_then_runs_whole_launcher_included:
        "mpi-operator", Place::Operators("mpi-operator-volcano"), VOLCANO,
        mpi_job("train", 3, 32);
    an_mpi_job_without_a_gang_flag_is_one_gang_of_its_launcher_job_and_its_workers:
        "mpi-operator", Place::Operators("mpi-operator-plain"), PLAIN,
        mpi_job("train", 3, 32);
    a_jobset_labelled_with_a_queue_is_one_gang_of_all_its_jobs_in_that_queue:
        "jobset", Place::Fresh("jobset"),
        Mode { queue_on: QueueOn::WorkloadLabel(labels::QUEUE_LABEL), ..PLAIN },
        jobset("train", 3, 32);
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_kubernetes_pod_group_of_the_workload_api_waits_whole_then_runs_whole() {
    let cluster = Cluster::connect().await;
    let gates = cluster
        .env
        .get("GP_FEATURE_GATES")
        .cloned()
        .unwrap_or_default();
    assert!(
        gates.contains("GenericWorkload=true"),
        "this test needs the Workload API: bring the cluster up with e2e/up --feature-gates GenericWorkload=true (e2e/test does), not {gates:?}"
    );
    let ns = cluster.namespace("workload-api").await;
    let queue = create_queue(&cluster.client, "workload-api", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    default_queue(&cluster, &ns.name, &queue).await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // The Workload API's version as the running release serves it: v1beta1 from 1.37.
    let release = &cluster.env["K8S_VERSION"];
    let minor: u32 = release
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap();
    let version = if minor >= 37 { "v1beta1" } else { "v1alpha2" };
    let gvk = GroupVersionKind::gvk("scheduling.k8s.io", version, "PodGroup");
    let sources: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &ns.name,
        &ApiResource::from_gvk(&gvk),
    );
    fill_one_node(&pods).await;

    let source: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("scheduling.k8s.io/{version}"), "kind": "PodGroup",
        "metadata": {"name": "train"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}
    }))
    .unwrap();
    let source = sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let group = pod_group_in_phase(&groups, "train", "Pending").await;
    assert_eq!(group.spec.min_member, 4);
    assert_eq!(group.spec.queue.as_deref(), Some(queue.as_str()));
    let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.uid.as_str(), source.metadata.uid.as_deref().unwrap());

    // A whole node each, named only by spec.schedulingGroup: three nodes are free.
    for i in 0..4 {
        let member = pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("train-{i}")},
            "spec": {"schedulingGroup": {"podGroupName": "train"},
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "32"}}}]}
        }));
        pods.create(&PostParams::default(), &member).await.unwrap();
    }
    holds_for(10, "no member of train bound", async || {
        bound_with_prefix(&pods, "train-").await.is_empty()
    })
    .await;
    pods.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    bound_eventually("all four members of train bound", 60, &pods, "train-", 4).await;

    // Kubernetes keeps its PodGroup while pods name it; then Gangplank's goes with it.
    for i in 0..4 {
        pods.delete(
            &format!("train-{i}"),
            &DeleteParams::default().grace_period(0),
        )
        .await
        .unwrap();
    }
    sources
        .delete("train", &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, "train", "its source").await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
