//! Batch Jobs (`batch.gangplank.dev`) through a real API server and the stock scheduler: one
//! gang per Job, pods named by task and index with what their plugins inject, a Job that waits
//! for its queue without creating a pod, lifecycle policies, and the webhook's refusals. kwok
//! runs the pods: they succeed or fail after the delays their annotations give
//! (`e2e/kwok/stages.yaml`).

use std::collections::BTreeMap;

use gangplank::api::batch_job::{BatchJob, JobPhase};
use gangplank::api::{PodGroup, QueueSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::queues::{QueueGuard, create_gang, create_queue, delete_queue};
use crate::support::{Cluster, TestNamespace, eventually, holds_for};

/// A task of `replicas` pods of one CPU, whose pods finish as `annotations` say.
pub fn task(name: &str, replicas: i32, annotations: Value) -> Value {
    json!({
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "trainer",
                                "resources": {"requests": {"cpu": "1"}}}],
            },
        },
    })
}

/// Creates a Job named `name` in `ns` with `spec`.
pub async fn create_job(ns: &TestNamespace, name: &str, spec: Value) -> Api<BatchJob> {
    let job: BatchJob = serde_json::from_value(json!({
        "apiVersion": "batch.gangplank.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    let jobs = ns.api::<BatchJob>();
    jobs.create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("failed to create Job {name}: {e}"));
    jobs
}

/// Waits until the Job is in `phase`; returns it.
async fn job_in_phase(jobs: &Api<BatchJob>, name: &str, phase: JobPhase, seconds: u64) -> BatchJob {
    eventually(
        &format!("Job {name} to be {}", phase.as_str()),
        seconds,
        || async {
            let job = jobs.get(name).await.ok()?;
            (job.status.as_ref()?.state.phase == phase).then_some(job)
        },
    )
    .await
}

/// The Job's pods by name.
async fn pods_of(pods: &Api<Pod>, job: &str) -> BTreeMap<String, Pod> {
    let list = pods
        .list(&ListParams::default().labels(&format!("batch.gangplank.dev/job-name={job}")))
        .await
        .unwrap();
    list.items.into_iter().map(|p| (p.name_any(), p)).collect()
}

fn env(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), v.value.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pytorch_job_runs_as_one_gang_with_ranks_and_the_masters_stable_name_then_completes() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "jobs", QueueSpec::default()).await;
    let ns = cluster.namespace("batch-pytorch").await;
    let run = json!({"pod-complete.stage.kwok.x-k8s.io/delay": "8s"});
    let jobs = create_job(
        &ns,
        "train",
        json!({
            "queue": queue,
            "tasks": [task("master", 1, run.clone()), task("worker", 3, run)],
            "plugins": {"pytorch": ["--port=29500"]},
        }),
    )
    .await;
    let job = job_in_phase(&jobs, "train", JobPhase::Running, 60).await;
    assert_eq!(job.status.as_ref().unwrap().min_available, 4);
    let group = ns.api::<PodGroup>().get("train").await.unwrap();
    assert_eq!(group.spec.min_member, 4);
    assert_eq!(group.spec.min_resources["cpu"], Quantity("4".into()));
    assert_eq!(
        group.metadata.owner_references.unwrap()[0].uid,
        job.metadata.uid.clone().unwrap()
    );
    let pods = pods_of(&ns.api::<Pod>(), "train").await;
    assert_eq!(
        pods.keys().collect::<Vec<_>>(),
        [
            "train-master-0",
            "train-worker-0",
            "train-worker-1",
            "train-worker-2"
        ]
    );
    for (name, rank) in [("train-master-0", "0"), ("train-worker-2", "3")] {
        let pod = &pods[name];
        let env = env(pod);
        assert_eq!(env["RANK"], rank, "{name}");
        assert_eq!(env["WORLD_SIZE"], "4", "{name}");
        assert_eq!(env["MASTER_ADDR"], "train-master-0.train", "{name}");
        assert_eq!(env["MASTER_PORT"], "29500", "{name}");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.subdomain.as_deref(), Some("train"));
        assert!(spec.node_name.is_some(), "{name} is bound");
    }
    let service = ns.api::<Service>().get("train").await.unwrap();
    assert_eq!(service.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let hosts = ns.api::<ConfigMap>().get("train-svc").await.unwrap();
    assert_eq!(
        hosts.data.unwrap()["worker.host"],
        "train-worker-0.train\ntrain-worker-1.train\ntrain-worker-2.train"
    );
    let done = job_in_phase(&jobs, "train", JobPhase::Completed, 90).await;
    assert_eq!(done.status.unwrap().succeeded, 4);
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_in_a_full_queue_waits_without_a_pod_and_says_why_then_runs_once_there_is_room() {
    let cluster = Cluster::connect().await;
    let capped = QueueSpec {
        capability: [("cpu".to_string(), Quantity("4".into()))].into(),
        ..QueueSpec::default()
    };
    let queue = create_queue(&cluster.client, "full", capped).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("batch-full").await;
    create_gang(&ns, &queue, "blocker", 4, 1, None, None).await;
    eventually("the blocking gang to run", 60, || async {
        let group = ns.api::<PodGroup>().get("blocker").await.ok()?;
        (group.status?.running == 4).then_some(())
    })
    .await;
    let jobs = create_job(
        &ns,
        "waits",
        json!({"queue": queue, "tasks": [task("worker", 2, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}))]}),
    )
    .await;
    eventually(
        "the Job to say it waits for admission, with the queue's reason",
        60,
        || async {
            let state = jobs.get("waits").await.ok()?.status?.state;
            (state.reason == "WaitingForAdmission"
                && state.message.contains("reached its capability"))
            .then_some(())
        },
    )
    .await;
    holds_for(3, "the waiting Job to have no pod", async || {
        pods_of(&ns.api::<Pod>(), "waits").await.is_empty()
    })
    .await;
    ns.api::<PodGroup>()
        .delete("blocker", &Default::default())
        .await
        .unwrap();
    for i in 0..4 {
        let _ = ns
            .api::<Pod>()
            .delete(&format!("blocker-{i}"), &Default::default())
            .await;
    }
    job_in_phase(&jobs, "waits", JobPhase::Completed, 90).await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_failing_worker_restarts_the_whole_gang_until_max_retry_then_the_job_fails() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "retry", QueueSpec::default()).await;
    let ns = cluster.namespace("batch-retry").await;
    let jobs = create_job(
        &ns,
        "flaky",
        json!({
            "queue": queue,
            "maxRetry": 2,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [
                task("master", 1, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"})),
                task("worker", 2, json!({"pod-fail.stage.kwok.x-k8s.io/delay": "2s",
                                          "pod-fail.stage.kwok.x-k8s.io/exit-code": "3"})),
            ],
        }),
    )
    .await;
    let failed = job_in_phase(&jobs, "flaky", JobPhase::Failed, 180).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state.reason, "MaxRetryExceeded");
    assert!(
        status.state.message.contains("failed with exit code 3"),
        "{}",
        status.state.message
    );
    assert_eq!((status.retry_count, status.version), (2, 2));
    let restarts: Vec<_> = status
        .conditions
        .iter()
        .filter(|c| c.status == JobPhase::Restarting)
        .collect();
    assert_eq!(restarts.len(), 2, "{:?}", status.conditions);
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_mpi_launcher_with_ssh_that_completes_completes_the_job_and_its_workers_are_removed() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "launch", QueueSpec::default()).await;
    let ns = cluster.namespace("batch-launch").await;
    let mut launcher = task(
        "launcher",
        1,
        json!({"pod-complete.stage.kwok.x-k8s.io/delay": "3s"}),
    );
    launcher["policies"] = json!([{"event": "TaskCompleted", "action": "CompleteJob"}]);
    let jobs = create_job(
        &ns,
        "mpi",
        json!({
            "queue": queue,
            "plugins": {"mpi": [], "env": [], "ssh": []},
            "tasks": [launcher, task("worker", 3, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}))],
        }),
    )
    .await;
    let running = job_in_phase(&jobs, "mpi", JobPhase::Running, 60).await;
    drop(running);
    let launcher = ns.api::<Pod>().get("mpi-launcher-0").await.unwrap();
    let env = env(&launcher);
    assert_eq!(
        env["MPI_HOST"],
        "mpi-worker-0.mpi,mpi-worker-1.mpi,mpi-worker-2.mpi"
    );
    assert_eq!(env["VC_TASK_INDEX"], "0");
    let mounts = launcher.spec.as_ref().unwrap().containers[0]
        .volume_mounts
        .clone()
        .unwrap_or_default();
    assert!(
        mounts.iter().any(|m| m.mount_path == "/root/.ssh"),
        "{mounts:?}"
    );
    let uid = jobs.get("mpi").await.unwrap().metadata.uid.unwrap();
    let keys = ns
        .api::<Secret>()
        .get(&format!("mpi-ssh-{uid}"))
        .await
        .unwrap();
    let keys = keys.data.unwrap();
    assert_eq!(keys["authorized_keys"], keys["id_ed25519.pub"]);
    assert!(
        String::from_utf8_lossy(&keys["id_ed25519"].0)
            .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")
    );
    let done = job_in_phase(&jobs, "mpi", JobPhase::Completed, 90).await;
    assert_eq!(done.status.unwrap().state.reason, "CompleteJob");
    eventually("the workers to be removed", 60, || async {
        let left = pods_of(&ns.api::<Pod>(), "mpi").await;
        (!left.keys().any(|n| n.contains("worker"))).then_some(())
    })
    .await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_webhook_refuses_a_job_naming_each_wrong_field() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("batch-refused").await;
    let job: BatchJob = serde_json::from_value(json!({
        "apiVersion": "batch.gangplank.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bad"},
        "spec": {
            "minAvailable": 5,
            "queue": "no-such-queue-anywhere",
            "plugins": {"horovod": []},
            "tasks": [task("worker", 2, json!({})), task("worker", 1, json!({}))],
        },
    }))
    .unwrap();
    let error = ns
        .api::<BatchJob>()
        .create(&PostParams::default(), &job)
        .await
        .unwrap_err()
        .to_string();
    for expected in [
        "spec.tasks[1].name: \"worker\" is used by an earlier task",
        "spec.minAvailable: 5 is more than the job's 3 replicas",
        "spec.plugins.horovod: not a plugin Gangplank has",
    ] {
        assert!(error.contains(expected), "{expected} in {error}");
    }
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_elastic_job_of_four_to_eight_on_room_for_six_runs_six_and_gives_its_extras_back_first()
{
    let cluster = Cluster::connect().await;
    let elastic = create_queue(&cluster.client, "elastic", QueueSpec::default()).await;
    let other = create_queue(&cluster.client, "other", QueueSpec::default()).await;
    let ns = cluster.namespace("batch-elastic").await;
    let pods = ns.api::<Pod>();
    // One node's worth taken by a pod of the other queue: room for six of the Job's workers.
    let filler = crate::support::pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "filler", "labels": {"scheduling.gangplank.dev/queue": other}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "32"}}}]}
    }));
    pods.create(&PostParams::default(), &filler).await.unwrap();
    crate::support::running(&pods, "filler", 60).await;
    let mut worker = task(
        "worker",
        8,
        json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}),
    );
    worker["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("16");
    let jobs = create_job(
        &ns,
        "wide",
        json!({"queue": elastic, "minAvailable": 4, "tasks": [worker]}),
    )
    .await;
    job_in_phase(&jobs, "wide", JobPhase::Running, 60).await;
    let bound = || async {
        pods_of(&pods, "wide")
            .await
            .values()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count()
    };
    eventually("6 of the 8 workers bound", 60, || async {
        (bound().await == 6).then_some(())
    })
    .await;
    holds_for(3, "exactly 6 bound", async || bound().await == 6).await;
    // The other queue asks for its share (half of the 128 CPUs, it holds 32): two of the
    // extras go, the gang of four keeps running.
    create_gang(&ns, &other, "share", 2, 16, None, None).await;
    eventually("the other queue's gang to run", 90, || async {
        let group = ns.api::<PodGroup>().get("share").await.ok()?;
        (group.status?.running == 2).then_some(())
    })
    .await;
    let job = jobs.get("wide").await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.state.phase, JobPhase::Running);
    assert_eq!(status.retry_count, 0);
    assert!(bound().await >= 4, "the gang of four kept running");
    ns.delete().await;
    delete_queue(&cluster.client, &elastic).await;
    delete_queue(&cluster.client, &other).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn workers_that_depend_on_the_master_are_created_once_it_runs() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "depends", QueueSpec::default()).await;
    let ns = cluster.namespace("batch-depends").await;
    let long = json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"});
    let mut worker = task("worker", 2, long.clone());
    worker["dependsOn"] = json!({"name": ["master"]});
    let jobs = create_job(
        &ns,
        "staged",
        json!({"queue": queue, "tasks": [task("master", 1, long), worker]}),
    )
    .await;
    let pods = ns.api::<Pod>();
    let master_started = eventually("the master to run", 60, || async {
        let master = pods.get("staged-master-0").await.ok()?;
        let status = master.status?;
        (status.phase.as_deref() == Some("Running")).then_some(status.start_time?.0)
    })
    .await;
    let workers = eventually("both workers to exist", 60, || async {
        let made: Vec<Pod> = pods_of(&pods, "staged")
            .await
            .into_values()
            .filter(|p| p.name_any().contains("worker"))
            .collect();
        (made.len() == 2).then_some(made)
    })
    .await;
    for worker in &workers {
        let created = worker.metadata.creation_timestamp.clone().unwrap().0;
        assert!(
            created >= master_started,
            "{} was created at {created}, before the master ran at {master_started}",
            worker.name_any()
        );
    }
    let group = ns.api::<PodGroup>().get("staged").await.unwrap();
    assert_eq!(group.spec.min_member, 1, "the gang is the master alone");
    job_in_phase(&jobs, "staged", JobPhase::Running, 60).await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// Sets the Job's `spec.suspend`, as a user would with `kubectl patch`.
async fn suspend(jobs: &Api<BatchJob>, name: &str, suspended: bool) {
    jobs.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"suspend": suspended}})),
    )
    .await
    .unwrap_or_else(|e| panic!("failed to set suspend {suspended} on Job {name}: {e}"));
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_suspended_job_gives_its_room_to_a_waiting_one_and_runs_again_once_resumed() {
    let cluster = Cluster::connect().await;
    let capped = QueueSpec {
        capability: [("cpu".to_string(), Quantity("2".into()))].into(),
        ..QueueSpec::default()
    };
    let queue = create_queue(&cluster.client, "suspend", capped).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("batch-suspend").await;
    let long = json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"});
    let jobs = create_job(
        &ns,
        "first",
        json!({"queue": queue, "tasks": [task("worker", 2, long.clone())]}),
    )
    .await;
    job_in_phase(&jobs, "first", JobPhase::Running, 60).await;
    create_job(
        &ns,
        "second",
        json!({"queue": queue, "tasks": [task("worker", 2, long)]}),
    )
    .await;
    eventually(
        "the second Job to wait for the queue's capability",
        60,
        || async {
            let state = jobs.get("second").await.ok()?.status?.state;
            (state.reason == "WaitingForAdmission").then_some(())
        },
    )
    .await;

    suspend(&jobs, "first", true).await;
    let suspended = job_in_phase(&jobs, "first", JobPhase::Aborted, 60).await;
    assert_eq!(suspended.status.unwrap().state.reason, "Suspended");
    job_in_phase(&jobs, "second", JobPhase::Running, 60).await;
    let pods = ns.api::<Pod>();
    eventually("the suspended Job to have no pod left", 60, || async {
        pods_of(&pods, "first").await.is_empty().then_some(())
    })
    .await;

    suspend(&jobs, "first", false).await;
    eventually(
        "the resumed Job to be pending again, as a new version",
        60,
        || async {
            let status = jobs.get("first").await.ok()?.status?;
            (status.state.phase == JobPhase::Pending && status.version == 1).then_some(())
        },
    )
    .await;
    holds_for(
        3,
        "the resumed Job to wait while the other holds the queue",
        async || {
            jobs.get("first")
                .await
                .ok()
                .and_then(|j| j.status)
                .map(|s| s.state.phase)
                == Some(JobPhase::Pending)
        },
    )
    .await;
    jobs.delete("second", &Default::default()).await.unwrap();
    let resumed = job_in_phase(&jobs, "first", JobPhase::Running, 90).await;
    assert_eq!(
        resumed.status.unwrap().retry_count,
        0,
        "a resume is no retry"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_task_with_its_own_max_retry_fails_the_job_once_its_restarts_are_spent() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "task-retry", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("batch-task-retry").await;
    let mut worker = task(
        "worker",
        1,
        json!({"pod-fail.stage.kwok.x-k8s.io/delay": "2s",
               "pod-fail.stage.kwok.x-k8s.io/exit-code": "7"}),
    );
    worker["maxRetry"] = json!(1);
    let jobs = create_job(
        &ns,
        "flaky-task",
        json!({
            "queue": queue,
            "maxRetry": 5,
            "policies": [{"event": "PodFailed", "action": "RestartPod"}],
            "tasks": [
                task("master", 1, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"})),
                worker,
            ],
        }),
    )
    .await;
    let failed = job_in_phase(&jobs, "flaky-task", JobPhase::Failed, 120).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state.reason, "MaxRetryExceeded");
    assert!(
        status
            .state
            .message
            .contains("task worker already restarted 1 times (its maxRetry 1)"),
        "{}",
        status.state.message
    );
    assert_eq!(status.task_retry_count.get("worker"), Some(&1));
    assert_eq!(
        status.retry_count, 1,
        "one restart of the job's 5 was spent"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_that_depends_on_another_makes_nothing_until_that_one_completed() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "chain", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("batch-chain").await;
    let jobs = create_job(
        &ns,
        "train",
        json!({"queue": queue, "dependsOn": {"name": ["prepare"]},
               "tasks": [task("worker", 2, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "2s"}))]}),
    )
    .await;
    eventually("the Job to wait for the one it depends on", 60, || async {
        let state = jobs.get("train").await.ok()?.status?.state;
        (state.reason == "WaitingForDependencies"
            && state.message.contains("prepare (not created yet)"))
        .then_some(())
    })
    .await;
    create_job(
        &ns,
        "prepare",
        json!({"queue": queue, "tasks": [task("fetch", 1, json!({"pod-complete.stage.kwok.x-k8s.io/delay": "5s"}))]}),
    )
    .await;
    let groups = ns.api::<PodGroup>();
    let prepared = eventually(
        "the first Job to complete, the second having no PodGroup meanwhile",
        90,
        || async {
            let prepare = jobs.get("prepare").await.ok()?;
            let train_group = groups.get_opt("train").await.unwrap();
            let done = prepare.status.as_ref()?.state.phase == JobPhase::Completed;
            assert!(
                done || train_group.is_none(),
                "the second Job made its PodGroup before the first completed"
            );
            done.then(|| prepare.status?.state.last_transition_time)
                .flatten()
        },
    )
    .await;
    let completed = job_in_phase(&jobs, "train", JobPhase::Completed, 90).await;
    let train_group = groups.get("train").await.unwrap();
    let made = train_group.metadata.creation_timestamp.unwrap().0;
    assert!(
        made >= prepared.0,
        "the second Job's PodGroup was made at {made}, before the first completed at {}",
        prepared.0
    );
    assert_eq!(completed.status.unwrap().succeeded, 2);
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
