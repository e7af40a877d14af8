//! MultiKueue dispatches, Gangplank places (`e2e/multikueue`: a Kueue v0.17.0 manager and two
//! workers, each worker with Gangplank, Kueue and two nodes of 32 CPUs). Each worker's
//! ClusterQueue lists Gangplank's AdmissionCheck, so a worker admits its copy of a Workload only
//! when it can hold the whole gang, and MultiKueue keeps the first worker that admits. With
//! Gangplank as the manager's dispatcher (`e2e/multikueue`'s default), a Workload is copied only
//! to the workers that can hold its whole gang now; with Kueue's own
//! (`GP_KUEUE_DISPATCHER=all-at-once e2e/multikueue test`), to both.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};

use gangplank::api::kueue::{self, KueueWorkload};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::operators::kueue::{
    KueueGuard, delete_cluster_objects, job, job_pods, kueue_api, queue_with_check,
    queue_with_gangplanks_check,
};
use crate::sub_groups::filler;
use crate::support::{Cluster, TestNamespace, component_ctl_in, eventually, holds_for, run_dir};

mod comparison;

const WORKERS: [&str; 2] = ["worker-1", "worker-2"];

/// Whether Gangplank runs on the worker (`e2e/multikueue up --mode baseline` leaves it out).
fn placed_by_gangplank(worker: &Cluster) -> bool {
    worker.env.get("GP_MODE").map(String::as_str) != Some("baseline")
}

/// The three clusters, each in its run directory under `GP_RUN_DIR`.
struct MultiKueue {
    manager: Cluster,
    workers: Vec<Cluster>,
}

impl MultiKueue {
    /// Whether Gangplank is the manager's dispatcher (else Kueue's all-at-once).
    fn dispatched_by_gangplank(&self) -> bool {
        self.manager
            .env
            .get("GP_MULTIKUEUE_DISPATCHER")
            .map(String::as_str)
            == Some("true")
    }
}

/// Every Workload copy MultiKueue makes in a namespace of a worker: their UIDs, as a watch
/// sees them (a copy may live for less than a second).
fn record_copies(workloads: Api<KueueWorkload>) -> Arc<Mutex<BTreeSet<String>>> {
    let seen = Arc::<Mutex<BTreeSet<String>>>::default();
    let record = seen.clone();
    tokio::spawn(async move {
        let events = watcher(workloads, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) = event {
                record.lock().unwrap().insert(w.uid().unwrap_or_default());
            }
        }
    });
    seen
}

impl MultiKueue {
    async fn connect() -> MultiKueue {
        let mut workers = Vec::new();
        for worker in WORKERS {
            workers.push(Cluster::connect_to(&run_dir().join(worker)).await);
        }
        MultiKueue {
            manager: Cluster::connect_to(&run_dir().join("manager")).await,
            workers,
        }
    }

    /// The worker a name such as `worker-2` names.
    fn worker(&self, name: &str) -> &Cluster {
        &self.workers[WORKERS.iter().position(|w| *w == name).unwrap()]
    }

    /// The test's queue `name` on every cluster: on each worker a ClusterQueue of 1000 CPUs
    /// with Gangplank's AdmissionCheck (none where the workers run without Gangplank); on the manager a MultiKueueConfig of both workers and a
    /// ClusterQueue with MultiKueue's AdmissionCheck; a LocalQueue `name` in namespace `name`
    /// on each.
    async fn queue(&self, prefix: &str) -> TestQueue {
        let manager_ns = self.manager.namespace(prefix).await;
        let name = manager_ns.name.clone();
        let mut guards = vec![KueueGuard {
            run_dir: run_dir().join("manager"),
            name: name.clone(),
        }];
        let mut worker_namespaces = Vec::new();
        for (worker, cluster) in WORKERS.iter().zip(&self.workers) {
            guards.push(KueueGuard {
                run_dir: run_dir().join(worker),
                name: name.clone(),
            });
            worker_namespaces.push(cluster.namespace_named(name.clone()).await);
            if placed_by_gangplank(cluster) {
                queue_with_gangplanks_check(&cluster.client, &name, &name, 1000).await;
            } else {
                queue_with_check(&cluster.client, &name, &name, 1000, None).await;
            }
        }
        kueue_api(&self.manager.client, "MultiKueueConfig")
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": kueue::API_VERSION,
                    "kind": "MultiKueueConfig", "metadata": {"name": name},
                    "spec": {"clusters": WORKERS}}))
                .unwrap(),
            )
            .await
            .unwrap();
        let check = json!({"controllerName": "kueue.x-k8s.io/multikueue", "parameters":
            {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name}});
        queue_with_check(&self.manager.client, &name, &name, 1000, Some(check)).await;
        TestQueue {
            name,
            manager: self.manager.client.clone(),
            manager_ns,
            worker_namespaces,
            _guards: guards,
        }
    }
}

/// A queue of one test on all three clusters, and its namespaces.
struct TestQueue {
    name: String,
    manager: Client,
    manager_ns: TestNamespace,
    worker_namespaces: Vec<TestNamespace>,
    _guards: Vec<KueueGuard>,
}

impl TestQueue {
    /// Sends `job` to the manager, as a user does.
    async fn submit(&self, job: &Job) {
        let jobs = self.manager_ns.api::<Job>();
        jobs.create(&PostParams::default(), job).await.unwrap();
    }

    fn worker_pods(&self, worker: &str) -> Api<Pod> {
        let index = WORKERS.iter().position(|w| *w == worker).unwrap();
        self.worker_namespaces[index].api::<Pod>()
    }

    /// The manager's Workload of the test's one Job.
    async fn manager_workload(&self) -> Option<DynamicObject> {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
        let workloads: Api<DynamicObject> = Api::namespaced_with(
            self.manager.clone(),
            &self.name,
            &ApiResource::from_gvk(&gvk),
        );
        let list = workloads.list(&Default::default()).await.unwrap();
        list.items.into_iter().next()
    }

    /// Deletes the test's Jobs and JobSets on the manager, waits until MultiKueue removed their
    /// copies from the workers, then deletes the namespaces and the queue's cluster-scoped
    /// objects.
    async fn delete(self, clusters: &MultiKueue) {
        let all = kube::api::ListParams::default();
        let background = DeleteParams::background();
        let manager_jobs = self.manager_ns.api::<Job>();
        manager_jobs
            .delete_collection(&background, &all)
            .await
            .unwrap();
        let manager_job_sets = job_sets(&self.manager, &self.name);
        manager_job_sets
            .delete_collection(&background, &all)
            .await
            .unwrap();
        for (ns, cluster) in self.worker_namespaces.iter().zip(&clusters.workers) {
            let jobs = ns.api::<Job>();
            let copies = job_sets(&cluster.client, &self.name);
            eventually("MultiKueue to delete the copies", 60, || async {
                let jobs = jobs.list(&all).await.ok()?.items;
                let copies = copies.list(&all).await.ok()?.items;
                (jobs.is_empty() && copies.is_empty()).then_some(())
            })
            .await;
        }
        self.manager_ns.delete().await;
        delete_cluster_objects(&clusters.manager.client, &self.name).await;
        for (ns, cluster) in self.worker_namespaces.into_iter().zip(&clusters.workers) {
            ns.delete().await;
            delete_cluster_objects(&cluster.client, &self.name).await;
        }
    }
}

/// The note of Gangplank's Event on the manager's Workload saying why no worker can hold its
/// gang (its dispatcher nominates none), once one says `why` of every worker. (An earlier one
/// may say that a worker's nodes are not read yet, before its watches have listed them.)
async fn why_no_worker_fits(queue: &TestQueue, why: &str) -> String {
    let events = queue
        .manager_ns
        .api::<k8s_openapi::api::events::v1::Event>();
    let of_each = |note: &String| {
        WORKERS
            .iter()
            .all(|worker| note.contains(&format!("{worker}: {why}")))
    };
    eventually(
        "Gangplank's Event on the manager's Workload saying why no worker can hold it",
        60,
        || async {
            let list = events.list(&Default::default()).await.ok()?.items;
            list.into_iter()
                .filter(|e| e.reason.as_deref() == Some("NoWorkerFits"))
                .filter_map(|e| e.note)
                .find(of_each)
        },
    )
    .await
}

/// The message of Gangplank's check on a worker's copy of the test's Workload, once it says
/// why the copy waits (Kueue's all-at-once dispatcher copies to every worker).
async fn why_the_copy_waits(ns: &TestNamespace, check: &str) -> String {
    let copies = ns.api::<KueueWorkload>();
    eventually(
        "the worker's Gangplank to say why its copy waits",
        60,
        || async {
            let list = copies.list(&Default::default()).await.ok()?.items;
            let check = list.first()?.our_check(&|n| n == check)?.clone();
            (check.state == "Pending" && check.message.contains("cpu 96 needed"))
                .then_some(check.message)
        },
    )
    .await
}

/// The JobSets of `namespace`.
fn job_sets(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// A JobSet `svc` in the LocalQueue `queue`: the roles of a disaggregated inference service,
/// 2 prefill Jobs of 2 pods and 1 decode Job of 2, every pod of 8 CPUs (48 in all), which kwok
/// keeps running for an hour.
fn service(queue: &str) -> DynamicObject {
    let role = |name: &str, jobs: u32| {
        json!({"name": name, "replicas": jobs, "template": {"spec": {
            "parallelism": 2, "completions": 2,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": name,
                    "image": "busybox", "resources": {"requests": {"cpu": "8"}}}]}}}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "svc", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"replicatedJobs": [role("prefill", 2), role("decode", 1)]}
    }))
    .unwrap()
}

/// The JobSet `svc`'s pods that exist, and how many of them are bound.
async fn service_pods(pods: &Api<Pod>) -> (usize, usize) {
    let of_service = kube::api::ListParams::default().labels("jobset.sigs.k8s.io/jobset-name=svc");
    let list = pods.list(&of_service).await.unwrap().items;
    let bound = list
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .count();
    (list.len(), bound)
}

/// Where MultiKueue says the manager's Workload runs (`status.clusterName`).
fn cluster_name(workload: &DynamicObject) -> Option<String> {
    workload.data["status"]["clusterName"]
        .as_str()
        .map(str::to_owned)
}

/// The manager's MultiKueueClusters (e2e/lib/operators.sh makes one per worker).
fn multikueue_clusters(cluster: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "MultiKueueCluster");
    Api::all_with(cluster.clone(), &ApiResource::from_gvk(&gvk))
}

/// Starts a killed API server again when the test fails before it does, so the tests after it
/// find the worker up.
struct StartAgainIfFailed(PathBuf);

impl Drop for StartAgainIfFailed {
    fn drop(&mut self) {
        let status = std::process::Command::new(crate::support::repo_dir().join("e2e/component"))
            .args(["kube-apiserver", "start"])
            .env("GP_RUN_DIR", &self.0)
            .status();
        eprintln!("started the lost worker's API server again: {status:?}");
    }
}

#[tokio::test]
#[ignore = "needs the local MultiKueue clusters: run e2e/multikueue test"]
async fn a_job_sent_to_the_manager_runs_whole_on_the_one_worker_that_can_hold_it() {
    let clusters = MultiKueue::connect().await;
    let queue = clusters.queue("mk-whole").await;
    // worker-1: one node of two full, 32 CPUs free; the Job's gang needs 64.
    let worker_1 = queue.worker_pods("worker-1");
    filler(&worker_1, "filler", 32).await;
    let copies_on_worker_1 = record_copies(queue.worker_namespaces[0].api::<KueueWorkload>());
    queue.submit(&job("train", &queue.name, 4, 16)).await;

    let worker_2 = queue.worker_pods("worker-2");
    eventually(
        "the Job's four pods bound on worker-2, none ever on worker-1",
        90,
        || async {
            let on_worker_1 = job_pods(&worker_1, "train").await;
            assert_eq!(on_worker_1, (0, 0), "a pod of the Job on worker-1");
            (job_pods(&worker_2, "train").await == (4, 4)).then_some(())
        },
    )
    .await;
    let workload = queue.manager_workload().await.unwrap();
    assert_eq!(cluster_name(&workload).as_deref(), Some("worker-2"));
    let jobs = queue.manager_ns.api::<Job>();
    eventually(
        "the Job's status on the manager to show its pods",
        30,
        || async {
            let status = jobs.get("train").await.ok()?.status?;
            (status.active == Some(4)).then_some(())
        },
    )
    .await;
    let copies = queue.worker_namespaces[0].api::<KueueWorkload>();
    eventually("no copy left on worker-1", 30, || async {
        copies
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    if clusters.dispatched_by_gangplank() {
        assert!(
            copies_on_worker_1.lock().unwrap().is_empty(),
            "Gangplank's dispatcher nominated worker-1, which cannot hold the gang"
        );
    }

    worker_1
        .delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    queue.delete(&clusters).await;
}

#[tokio::test]
#[ignore = "needs the local MultiKueue clusters: run e2e/multikueue test"]
async fn a_jobset_sent_to_the_manager_runs_all_its_roles_whole_on_one_worker() {
    let clusters = MultiKueue::connect().await;
    let queue = clusters.queue("mk-jobset").await;
    // worker-1: 32 CPUs free; the service needs 48.
    let worker_1 = queue.worker_pods("worker-1");
    filler(&worker_1, "filler", 32).await;
    job_sets(&queue.manager, &queue.name)
        .create(&PostParams::default(), &service(&queue.name))
        .await
        .unwrap();

    let worker_2 = queue.worker_pods("worker-2");
    eventually(
        "the JobSet's six pods bound on worker-2, none ever on worker-1",
        90,
        || async {
            assert_eq!(service_pods(&worker_1).await, (0, 0), "a pod on worker-1");
            (service_pods(&worker_2).await == (6, 6)).then_some(())
        },
    )
    .await;
    let workload = queue.manager_workload().await.unwrap();
    assert_eq!(cluster_name(&workload).as_deref(), Some("worker-2"));
    let manager_job_sets = job_sets(&queue.manager, &queue.name);
    eventually(
        "the JobSet's status on the manager to show its three Jobs active",
        30,
        || async {
            let job_set = manager_job_sets.get("svc").await.ok()?;
            let statuses = job_set.data["status"]["replicatedJobsStatus"]
                .as_array()?
                .clone();
            let active: i64 = statuses.iter().filter_map(|s| s["active"].as_i64()).sum();
            (active == 3).then_some(())
        },
    )
    .await;

    worker_1
        .delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    queue.delete(&clusters).await;
}

#[tokio::test]
#[ignore = "needs the local MultiKueue clusters: run e2e/multikueue test"]
async fn a_job_no_worker_can_hold_waits_with_no_pod_anywhere_saying_why_each_worker_cannot() {
    let clusters = MultiKueue::connect().await;
    let queue = clusters.queue("mk-none").await;
    // Four pods of 24 CPUs: a node of 32 holds one, a worker of two nodes two.
    queue.submit(&job("wide", &queue.name, 4, 24)).await;

    if clusters.dispatched_by_gangplank() {
        let note = why_no_worker_fits(&queue, "cpu 96 needed").await;
        eprintln!("{note}");
    } else {
        for (worker, ns) in WORKERS.iter().zip(&queue.worker_namespaces) {
            let message = why_the_copy_waits(ns, &queue.name).await;
            eprintln!("{worker}: {message}");
        }
    }
    let dispatched_by_gangplank = clusters.dispatched_by_gangplank();
    holds_for(
        5,
        "no pod of the Job anywhere, no worker chosen",
        async || {
            let mut pods = 0;
            let mut copies = 0;
            for (worker, ns) in WORKERS.iter().zip(&queue.worker_namespaces) {
                pods += job_pods(&queue.worker_pods(worker), "wide").await.0;
                copies += ns
                    .api::<KueueWorkload>()
                    .list(&Default::default())
                    .await
                    .unwrap()
                    .items
                    .len();
            }
            let workload = queue.manager_workload().await;
            pods == 0
                && workload.as_ref().and_then(cluster_name).is_none()
                && (!dispatched_by_gangplank || copies == 0)
        },
    )
    .await;

    queue.delete(&clusters).await;
}

/// A worker's API server stops while a Job runs there: MultiKueue gives up on it after its
/// `workerLostTimeout` (30 s here) and the Job runs again, whole, on the other worker. Before
/// the lost worker comes back, it is taken out of MultiKueue and its MultiKueue objects are
/// deleted (docs/multi-cluster.md, "When a worker is lost"): Kueue v0.17.0 would otherwise keep
/// the returning worker's older copy and delete the new one.
#[tokio::test]
#[ignore = "needs the local MultiKueue clusters: run e2e/multikueue test"]
async fn a_job_on_a_lost_worker_runs_again_whole_on_the_other_and_its_return_brings_back_no_copy() {
    let clusters = MultiKueue::connect().await;
    let queue = clusters.queue("mk-lost").await;
    queue.submit(&job("train", &queue.name, 4, 16)).await;
    let first = eventually("the Job to run whole on one worker", 90, || async {
        let workload = queue.manager_workload().await?;
        let worker = cluster_name(&workload)?;
        (job_pods(&queue.worker_pods(&worker), "train").await == (4, 4)).then_some(worker)
    })
    .await;
    let other = WORKERS.into_iter().find(|w| *w != first).unwrap();
    let lost_dir: PathBuf = run_dir().join(&first);

    component_ctl_in(&lost_dir, "kube-apiserver", "kill");
    let restart = StartAgainIfFailed(lost_dir.clone());
    eventually(
        &format!("the Job to run whole on {other} after {first} was lost"),
        180,
        || async {
            let workload = queue.manager_workload().await?;
            (cluster_name(&workload).as_deref() == Some(other)
                && job_pods(&queue.worker_pods(other), "train").await == (4, 4))
                .then_some(())
        },
    )
    .await;

    // The lost worker's return, as docs/multi-cluster.md says: out of MultiKueue first, its
    // MultiKueue objects deleted, then back in.
    let remotes = multikueue_clusters(&clusters.manager.client);
    let entry = remotes.get(&first).await.unwrap();
    remotes
        .delete(&first, &DeleteParams::default())
        .await
        .unwrap();
    component_ctl_in(&lost_dir, "kube-apiserver", "start");
    std::mem::forget(restart);
    let lost = clusters.worker(&first);
    let jobs =
        queue.worker_namespaces[WORKERS.iter().position(|w| *w == first).unwrap()].api::<Job>();
    eventually(&format!("{first}'s API server back"), 60, || async {
        jobs.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    let of_multikueue = kube::api::ListParams::default().labels("kueue.x-k8s.io/multikueue-origin");
    jobs.delete_collection(&DeleteParams::background(), &of_multikueue)
        .await
        .unwrap();
    let copies = Api::<KueueWorkload>::namespaced(lost.client.clone(), &queue.name);
    copies
        .delete_collection(&DeleteParams::default(), &of_multikueue)
        .await
        .unwrap();
    let lost_pods = queue.worker_pods(&first);
    eventually(&format!("the Job's pods gone from {first}"), 60, || async {
        (job_pods(&lost_pods, "train").await.0 == 0).then_some(())
    })
    .await;
    let mut back: DynamicObject = serde_json::from_value(json!({
        "apiVersion": kueue::API_VERSION, "kind": "MultiKueueCluster",
        "metadata": {"name": first}, "spec": entry.data["spec"]}))
    .unwrap();
    back.metadata.name = Some(first.clone());
    remotes.create(&PostParams::default(), &back).await.unwrap();
    eventually(&format!("{first} connected again"), 60, || async {
        let entry = remotes.get(&first).await.ok()?;
        let active = entry.data["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Active" && c["status"] == "True");
        active.then_some(())
    })
    .await;
    holds_for(10, &format!("the Job on {other} only"), async || {
        let workload = queue.manager_workload().await;
        workload.as_ref().and_then(cluster_name).as_deref() == Some(other)
            && job_pods(&queue.worker_pods(other), "train").await == (4, 4)
            && job_pods(&lost_pods, "train").await.0 == 0
    })
    .await;

    queue.delete(&clusters).await;
}
