//! Kueue v0.17.0 (`e2e/up --operators kueue`) queues, Gangplank places: a ClusterQueue that
//! lists Gangplank's AdmissionCheck lets Kueue admit a Job only once its whole gang fits the
//! nodes, whatever its quota says, so a Job is never started with part of its pods placed.
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use gangplank::api::PodGroup;
use gangplank::api::kueue::{self, KueueAdmissionCheck, KueueWorkload};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::sub_groups::filler;
use crate::support::{Cluster, TestNamespace, eventually, holds_for};

/// Kueue's cluster-scoped objects of one test (a ResourceFlavor, an AdmissionCheck, a
/// ClusterQueue and, on a MultiKueue manager, a MultiKueueConfig, all named `name`) on the
/// cluster of `run_dir`, deleted when it fails.
pub struct KueueGuard {
    pub run_dir: std::path::PathBuf,
    pub name: String,
}

impl KueueGuard {
    pub fn new(name: &str) -> KueueGuard {
        KueueGuard {
            run_dir: crate::support::run_dir(),
            name: name.to_owned(),
        }
    }
}

impl Drop for KueueGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let run = &self.run_dir;
        for kind in CLUSTER_KINDS {
            let status = std::process::Command::new(run.join("bin/kubectl"))
                .arg("--kubeconfig")
                .arg(run.join("kubeconfig"))
                .args([
                    "delete",
                    kind,
                    &self.name,
                    "--wait=false",
                    "--ignore-not-found",
                ])
                .status();
            eprintln!("deleted the failed test's {kind} {}: {status:?}", self.name);
        }
    }
}

/// The cluster-scoped kinds a test's Kueue queue is made of, in the order they go.
const CLUSTER_KINDS: [&str; 4] = [
    "ClusterQueue",
    "AdmissionCheck",
    "MultiKueueConfig",
    "ResourceFlavor",
];

/// One test's namespace, and a ClusterQueue and LocalQueue of its name with 1000 CPUs that list
/// Gangplank's AdmissionCheck.
struct KueueTest {
    cluster: Cluster,
    ns: TestNamespace,
    _guard: KueueGuard,
}

impl KueueTest {
    async fn start(prefix: &str) -> KueueTest {
        let cluster = Cluster::connect().await;
        let ns = cluster.namespace(prefix).await;
        let guard = KueueGuard::new(&ns.name);
        queue_with_gangplanks_check(&cluster.client, &ns.name, &ns.name, 1000).await;
        KueueTest {
            cluster,
            ns,
            _guard: guard,
        }
    }

    /// Deletes the Job `job`, the namespace and the queue's cluster-scoped objects.
    async fn end(self, job: &str) {
        let name = self.ns.name.clone();
        self.ns
            .api::<Job>()
            .delete(job, &DeleteParams::background())
            .await
            .unwrap();
        self.ns.delete().await;
        delete_cluster_objects(&self.cluster.client, &name).await;
    }
}

pub fn kueue_api(client: &Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// A ClusterQueue `name` of `cpus` CPUs that lists Gangplank's AdmissionCheck, and a
/// LocalQueue of the same name in `namespace`; returns once Gangplank marked its check Active.
pub async fn queue_with_gangplanks_check(client: &Client, name: &str, namespace: &str, cpus: u32) {
    let check = json!({"controllerName": kueue::CONTROLLER_NAME});
    queue_with_check(client, name, namespace, cpus, Some(check)).await;
}

/// A ResourceFlavor, an AdmissionCheck of spec `check` (if any), a ClusterQueue of `cpus` CPUs
/// that lists it, all named `name`, and a LocalQueue of that name in `namespace`; returns once
/// the check's controller marked it Active.
pub async fn queue_with_check(
    client: &Client,
    name: &str,
    namespace: &str,
    cpus: u32,
    check: Option<serde_json::Value>,
) {
    let create = |kind: &'static str, object: serde_json::Value| async move {
        kueue_api(client, kind)
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).unwrap(),
            )
            .await
            .unwrap_or_else(|e| panic!("creating the {kind}: {e}"));
    };
    let meta = json!({"name": name});
    create(
        "ResourceFlavor",
        json!({"apiVersion": kueue::API_VERSION,
        "kind": "ResourceFlavor", "metadata": meta}),
    )
    .await;
    let mut queue = json!({"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
        "flavors": [{"name": name, "resources": [{"name": "cpu", "nominalQuota": cpus}]}]}]});
    if let Some(check) = &check {
        create(
            "AdmissionCheck",
            json!({"apiVersion": kueue::API_VERSION,
            "kind": "AdmissionCheck", "metadata": meta, "spec": check}),
        )
        .await;
        queue["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": name}]});
    }
    create(
        "ClusterQueue",
        json!({"apiVersion": kueue::API_VERSION,
        "kind": "ClusterQueue", "metadata": meta, "spec": queue}),
    )
    .await;
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "LocalQueue");
    let local: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk));
    let object = json!({"apiVersion": kueue::API_VERSION, "kind": "LocalQueue",
        "metadata": meta, "spec": {"clusterQueue": name}});
    local
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).unwrap(),
        )
        .await
        .unwrap();
    if check.is_none() {
        return;
    }
    let checks = Api::<KueueAdmissionCheck>::all(client.clone());
    eventually(
        "the AdmissionCheck's controller to mark it Active",
        90,
        || async {
            let check = checks.get(name).await.ok()?;
            let conditions = check.status?.conditions;
            conditions
                .iter()
                .any(|c| c.type_ == "Active" && c.status == "True")
                .then_some(())
        },
    )
    .await;
}

/// Deletes the test's cluster-scoped Kueue objects named `name` and waits until they are gone.
pub async fn delete_cluster_objects(client: &Client, name: &str) {
    for kind in CLUSTER_KINDS {
        let api = kueue_api(client, kind);
        let _ = api.delete(name, &DeleteParams::default()).await;
        eventually(&format!("the {kind} {name} gone"), 60, || async {
            api.get_opt(name).await.unwrap().is_none().then_some(())
        })
        .await;
    }
}

/// A batch/v1 Job of `pods` pods of `cpus` CPUs each in the LocalQueue `queue`, which kwok keeps
/// running for an hour.
pub fn job(name: &str, queue: &str, pods: u32, cpus: u32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpus.to_string()}}}]}}}
    }))
    .unwrap()
}

/// The Job's pods that exist, and how many of them are bound.
pub async fn job_pods(pods: &Api<Pod>, job: &str) -> (usize, usize) {
    let of_job = kube::api::ListParams::default().labels(&format!("job-name={job}"));
    let list = pods.list(&of_job).await.unwrap().items;
    let bound = list
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .count();
    (list.len(), bound)
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_kueue_has_quota_for_waits_suspended_until_its_whole_gang_fits_then_runs_whole() {
    let test = KueueTest::start("kueue").await;
    let (ns, name) = (&test.ns, test.ns.name.clone());
    let pods = ns.api::<Pod>();
    // Three of the four nodes full: 32 CPUs free, and the Job's gang needs 64.
    for filler_name in ["filler-0", "filler-1", "filler-2"] {
        filler(&pods, filler_name, 32).await;
    }
    ns.api::<Job>()
        .create(&PostParams::default(), &job("train", &name, 4, 16))
        .await
        .unwrap();

    let workloads = ns.api::<KueueWorkload>();
    let waiting = eventually(
        "Kueue to reserve quota for the Job and Gangplank's check to say why it waits",
        60,
        || async {
            let list = workloads.list(&Default::default()).await.unwrap().items;
            let workload = list.into_iter().next()?;
            let check = workload.our_check(&|n| n == name)?.clone();
            (workload.has_quota_reserved()
                && check.state == "Pending"
                && check.message.contains("fit"))
            .then_some((workload, check))
        },
    )
    .await;
    let (workload, check) = waiting;
    eprintln!("the check while the gang does not fit: {}", check.message);
    let workload_name = workload.metadata.name.clone().unwrap();
    let group = ns.api::<PodGroup>().get(&workload_name).await.unwrap();
    assert_eq!(
        group.spec.min_member, 4,
        "the gang is every pod the Job runs"
    );
    holds_for(
        5,
        "no pod of the Job made while its gang does not fit",
        async || job_pods(&pods, "train").await == (0, 0),
    )
    .await;

    for filler_name in ["filler-0", "filler-1"] {
        pods.delete(filler_name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually(
        "the Job's four pods bound, once its gang fits",
        90,
        || async { (job_pods(&pods, "train").await == (4, 4)).then_some(()) },
    )
    .await;
    let of_job = kube::api::ListParams::default().labels("job-name=train");
    for pod in pods.list(&of_job).await.unwrap().items {
        let labels = pod.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(gangplank::api::labels::POD_GROUP_LABEL),
            Some(&workload_name),
            "each pod is a member of the Workload's gang"
        );
    }
    let admitted = workloads.get(&workload_name).await.unwrap();
    assert_eq!(
        admitted.our_check(&|n| n == name).map(|c| c.state.as_str()),
        Some("Ready")
    );
    // Under WorkloadWithJob the Job controller also made the Job a Kubernetes PodGroup, which
    // the pods do not join: it gets no Gangplank PodGroup of its own to wait for ever.
    let groups = ns.api::<PodGroup>();
    holds_for(
        5,
        "the Workload's PodGroup the only Gangplank PodGroup of the namespace",
        async || {
            let list = groups.list(&Default::default()).await.unwrap().items;
            let names: Vec<String> = list.into_iter().filter_map(|g| g.metadata.name).collect();
            let only = names == [workload_name.clone()];
            if !only {
                eprintln!("the namespace's Gangplank PodGroups: {names:?}");
            }
            only
        },
    )
    .await;

    test.end("train").await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_larger_than_gangplanks_largest_gang_is_rejected_saying_so_and_never_started() {
    let test = KueueTest::start("kueue-large").await;
    let (client, ns, name) = (&test.cluster.client, &test.ns, test.ns.name.clone());
    let mut large = job("large", &name, 20_000, 1);
    let container = &mut large
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.resources.as_mut().unwrap().requests = Some(
        [(
            "cpu".to_owned(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1m".into()),
        )]
        .into(),
    );
    ns.api::<Job>()
        .create(&PostParams::default(), &large)
        .await
        .unwrap();

    // Kueue deactivates a Workload whose check is Rejected and resets the check to Pending at
    // once; its Event keeps the check's message.
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns.name, &ApiResource::from_gvk(&gvk));
    eventually("Kueue to deactivate the Workload", 60, || async {
        let list = workloads.list(&Default::default()).await.unwrap().items;
        (list.first()?.data["spec"]["active"] == json!(false)).then_some(())
    })
    .await;
    let events = ns.api::<Event>();
    let rejected = eventually(
        "Kueue's Event saying why the check rejected it",
        30,
        || async {
            let list = events.list(&Default::default()).await.unwrap().items;
            list.into_iter()
                .find(|e| e.reason.as_deref() == Some("AdmissionCheckRejected"))
                .and_then(|e| e.message)
        },
    )
    .await;
    assert!(
        rejected.contains("a gang of 20000 pods is larger than Gangplank's largest gang"),
        "{rejected}"
    );
    let pods = ns.api::<Pod>();
    holds_for(3, "no pod of the Job made", async || {
        job_pods(&pods, "large").await == (0, 0)
    })
    .await;

    test.end("large").await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_job_whose_pods_cannot_be_made_gives_its_room_back_through_retry_and_runs_once_they_can()
{
    let test = KueueTest::start("kueue-retry").await;
    let (client, ns, name) = (&test.cluster.client, &test.ns, test.ns.name.clone());
    // No pod may be made in the namespace: once Kueue starts the Job, its pods never come.
    let quotas = ns.api::<ResourceQuota>();
    let no_pods: ResourceQuota = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}}
    }))
    .unwrap();
    quotas
        .create(&PostParams::default(), &no_pods)
        .await
        .unwrap();
    ns.api::<Job>()
        .create(&PostParams::default(), &job("train", &name, 2, 4))
        .await
        .unwrap();

    // Gangplank keeps the gang's room for its schedule timeout (60 s), then its check says
    // Retry: Kueue evicts the Workload, suspending the Job and giving its quota back.
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns.name, &ApiResource::from_gvk(&gvk));
    eventually(
        "Kueue to evict the Workload because Gangplank's check said Retry",
        150,
        || async {
            let list = workloads.list(&Default::default()).await.ok()?.items;
            let evictions = list.first()?.data["status"]["schedulingStats"]["evictions"].clone();
            evictions
                .as_array()?
                .iter()
                .any(|e| e["reason"] == "AdmissionCheck")
                .then_some(())
        },
    )
    .await;
    let pods = ns.api::<Pod>();
    assert_eq!(job_pods(&pods, "train").await, (0, 0));

    quotas
        .delete("no-pods", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "Kueue to admit the Job again and its two pods to run whole",
        150,
        || async { (job_pods(&pods, "train").await == (2, 2)).then_some(()) },
    )
    .await;

    test.end("train").await;
}
