//! The tenant's suite: each test acts as a namespace user, not as the cluster admin. The user is
//! a ServiceAccount bound to the built-in `edit` ClusterRole in its own namespace only, and
//! works through a kubeconfig of its own (a token from the TokenRequest API) with `kubectl`, as
//! a team member handed a namespace would. It tries what such a user can try against
//! Gangplank's queues (docs/reliability.md) and checks that each attempt is
//! refused or has no effect: nothing runs past a queue's capability, no usage leaves a queue,
//! and Gangplank stays up. The admin's client only sets the stage (queues, quotas).

use std::path::PathBuf;
use std::process::Command;

use gangplank::api::{PodGroup, QueueSpec};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig, NamedAuthInfo};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::queues::{QueueGuard, create_queue, delete_queue};
use crate::support::{
    Cluster, TestNamespace, call_extender, events_about, eventually, gangplank_readyz, holds_for,
    run_dir, running,
};

/// A namespace user: the `edit` role in one namespace, and a kubeconfig of its own.
pub(crate) struct Tenant {
    /// The namespace as the admin sees it (who sets the stage and deletes it) ...
    ns: TestNamespace,
    /// ... and as the tenant does.
    pub(crate) mine: TestNamespace,
    kubeconfig: PathBuf,
}

impl Tenant {
    /// A new namespace and its user, `tenant`, bound to `edit` there.
    pub(crate) async fn new(cluster: &Cluster, prefix: &str) -> Tenant {
        let ns = cluster.namespace(prefix).await;
        let pp = PostParams::default();
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap();
        ns.api::<ServiceAccount>()
            .create(&pp, &account)
            .await
            .expect("failed to create the tenant's ServiceAccount");
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "tenant-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns.name}]
        }))
        .unwrap();
        ns.api::<RoleBinding>()
            .create(&pp, &binding)
            .await
            .expect("failed to bind the tenant to edit");
        let request = serde_json::from_value(json!({"spec": {"expirationSeconds": 3600}})).unwrap();
        let token = ns
            .api::<ServiceAccount>()
            .create_token_request("tenant", &pp, &request)
            .await
            .expect("failed to request the tenant's token")
            .status
            .and_then(|s| s.token)
            .expect("a TokenRequest answers with its token");

        let mut kubeconfig = Kubeconfig::read_from(run_dir().join("kubeconfig"))
            .expect("failed to read the cluster's kubeconfig");
        let user: NamedAuthInfo =
            serde_json::from_value(json!({"name": "tenant", "user": {"token": token}})).unwrap();
        kubeconfig.auth_infos = vec![user];
        for context in &mut kubeconfig.contexts {
            if let Some(context) = context.context.as_mut() {
                context.user = Some("tenant".into());
                context.namespace = Some(ns.name.clone());
            }
        }
        let path = run_dir().join(format!("{}.kubeconfig", ns.name));
        std::fs::write(&path, serde_yaml::to_string(&kubeconfig).unwrap())
            .expect("failed to write the tenant's kubeconfig");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("failed to load the tenant's kubeconfig");
        let client = Client::try_from(config).expect("failed to build the tenant's client");
        Tenant {
            mine: ns.seen_by(client),
            ns,
            kubeconfig: path,
        }
    }

    /// Runs kubectl as the tenant, with `stdin` as its input; `Ok(stdout)` when it succeeded,
    /// `Err(stderr)` when the API server refused.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        use std::io::Write;
        let mut child = Command::new(run_dir().join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("failed to run kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.unwrap_or_default().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        if out.status.success() {
            Ok(text(out.stdout))
        } else {
            Err(text(out.stderr))
        }
    }

    /// `kubectl apply` of one object, as the tenant.
    pub(crate) fn apply(&self, object: serde_json::Value) -> Result<String, String> {
        self.kubectl(&["apply", "-f", "-"], Some(&object.to_string()))
    }

    pub(crate) async fn delete(self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
        self.ns.delete().await;
    }
}

/// A pod of `queue` asking for `cpu` whole CPUs, as a tenant writes one.
fn queue_pod(name: &str, queue: &str, cpu: u32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"scheduling.gangplank.dev/queue": queue}},
        "spec": {"containers": [{"name": "main", "image": "trainer",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    })
}

/// A queue that may hold two CPUs.
async fn two_cpu_queue(cluster: &Cluster, prefix: &str) -> String {
    let spec: QueueSpec = serde_json::from_value(json!({"capability": {"cpu": "2"}})).unwrap();
    create_queue(&cluster.client, prefix, spec).await
}

/// The CPUs the pods bound in the tenant's namespace request, in millicores.
async fn bound_cpu(pods: &Api<Pod>) -> i64 {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .flat_map(|p| p.spec.as_ref().unwrap().containers.iter())
        .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
        .map(|q| q.0.parse::<i64>().map(|cpu| cpu * 1000).unwrap_or(i64::MAX))
        .sum()
}

fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| {
            g.iter()
                .any(|g| g.name == gangplank::api::labels::ADMISSION_GATE)
        })
}

/// A full queue: `first` runs with its two CPUs, `second` waits at the gate.
async fn full_queue(tenant: &Tenant, queue: &str) -> Api<Pod> {
    let pods = tenant.mine.api::<Pod>();
    tenant.apply(queue_pod("first", queue, 2)).unwrap();
    running(&pods, "first", 60).await;
    tenant.apply(queue_pod("second", queue, 2)).unwrap();
    eventually("the second pod to wait at the gate", 30, || async {
        gated(&pods.get("second").await.ok()?).then_some(())
    })
    .await;
    pods
}

/// The second pod stays gated and unbound, and the queue holds two CPUs, no more.
async fn nothing_runs_past_the_capability(pods: &Api<Pod>) {
    holds_for(5, "the queue's capability", async || {
        let second = pods.get("second").await.unwrap();
        gated(&second) && second.spec.unwrap().node_name.is_none() && bound_cpu(pods).await <= 2000
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_with_the_edit_role_submits_groups_and_jobs_and_reads_queues_but_writes_no_queue()
{
    let cluster = Cluster::connect().await;
    let tenant = Tenant::new(&cluster, "tenant-roles").await;
    tenant
        .apply(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "gang"}, "spec": {"minMember": 2}
        }))
        .expect("edit lets a tenant create a PodGroup");
    tenant
        .apply(json!({
            "apiVersion": "batch.gangplank.dev/v1alpha1", "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {"minAvailable": 1, "tasks": [{"name": "worker", "replicas": 1,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "trainer"}]}}}]}
        }))
        .expect("edit lets a tenant create a batch Job");
    tenant
        .kubectl(&["get", "queues"], None)
        .expect("edit lets a tenant read queues");
    let refused = tenant
        .apply(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": "mine"}, "spec": {"weight": 100}
        }))
        .expect_err("a tenant must not create a Queue");
    assert!(refused.contains("forbidden"), "{refused}");
    let refused = tenant
        .kubectl(
            &[
                "patch",
                "podgroups.scheduling.gangplank.dev",
                "gang",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Running"}}"#,
            ],
            None,
        )
        .expect_err("a tenant must not write a PodGroup's status");
    assert!(refused.contains("forbidden"), "{refused}");
    tenant.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_who_removes_the_gate_from_a_waiting_pod_is_refused_and_it_keeps_waiting() {
    let cluster = Cluster::connect().await;
    let queue = two_cpu_queue(&cluster, "tenant-gate").await;
    let _guard = QueueGuard(queue.clone());
    let tenant = Tenant::new(&cluster, "tenant-gate").await;
    let pods = full_queue(&tenant, &queue).await;

    let refused = tenant
        .kubectl(
            &[
                "patch",
                "pod",
                "second",
                "--type=json",
                "-p",
                r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
            ],
            None,
        )
        .expect_err("the gate must stay");
    assert!(
        refused.contains("only Gangplank removes the gate scheduling.gangplank.dev/admission"),
        "{refused}"
    );
    nothing_runs_past_the_capability(&pods).await;
    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gate_removed_past_the_api_servers_policy_still_binds_nothing_past_the_capability() {
    let cluster = Cluster::connect().await;
    let queue = two_cpu_queue(&cluster, "tenant-record").await;
    let _guard = QueueGuard(queue.clone());
    let tenant = Tenant::new(&cluster, "tenant-record").await;
    let pods = full_queue(&tenant, &queue).await;
    let admitted = pods.get("first").await.unwrap();
    assert!(
        (admitted.metadata.annotations.unwrap_or_default())
            .contains_key(gangplank::api::labels::ADMITTED_ANNOTATION),
        "Gangplank records its admission on the pod it released"
    );
    let refused = tenant
        .kubectl(
            &[
                "annotate",
                "pod",
                "second",
                "scheduling.gangplank.dev/admitted=2026-11-28T00:00:00Z",
            ],
            None,
        )
        .expect_err("a tenant must not write Gangplank's record");
    assert!(
        refused.contains("written by Gangplank alone, when the pod's queue admits it"),
        "{refused}"
    );

    // The cluster's admin is exempt from the policy: the gate goes, and the bind verb is the
    // line that holds.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "remove", "path": "/spec/schedulingGates"}
    ]))
    .unwrap();
    let admin_pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &tenant.mine.name);
    admin_pods
        .patch("second", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .expect("an admin removes the gate");
    // The scheduler tries to place it, and Gangplank's filter answers `Error`: the scheduler
    // says so on the pod.
    let refusal = "someone other than Gangplank removed the gate";
    eventually("the scheduler to report the filter's Error", 60, || async {
        let events = events_about(&cluster.client, &tenant.ns.name, "second").await;
        let failed = events.get("FailedScheduling")?;
        failed.contains(refusal).then_some(())
    })
    .await;
    // A bind sent past the scheduler's filter (with its certificate) is refused the same way.
    let second = pods.get("second").await.unwrap();
    let bind = json!({
        "PodName": "second", "PodNamespace": tenant.ns.name,
        "PodUID": second.metadata.uid, "Node": "kwok-node-0"
    });
    let (answered, printed) = call_extender(&cluster, "bind", &bind, true);
    assert!(answered, "the extender did not answer the bind: {printed}");
    let answer: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let error = answer["Error"].as_str().unwrap_or_default();
    assert!(error.contains(refusal), "{answer}");
    holds_for(5, "the queue's capability", async || {
        let second = pods.get("second").await.unwrap();
        second.spec.unwrap().node_name.is_none() && bound_cpu(&pods).await <= 2000
    })
    .await;
    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_who_relabels_a_running_pod_out_of_its_queue_is_refused_and_its_usage_stays() {
    let cluster = Cluster::connect().await;
    let queue = two_cpu_queue(&cluster, "tenant-label").await;
    let _guard = QueueGuard(queue.clone());
    let tenant = Tenant::new(&cluster, "tenant-label").await;
    let pods = full_queue(&tenant, &queue).await;

    for change in [
        vec!["label", "pod", "first", "scheduling.gangplank.dev/queue-"],
        vec![
            "label",
            "pod",
            "first",
            "scheduling.gangplank.dev/queue=default",
            "--overwrite",
        ],
        vec![
            "label",
            "pod",
            "first",
            "scheduling.gangplank.dev/pod-group=elsewhere",
        ],
        vec![
            "annotate",
            "pod",
            "first",
            "scheduling.volcano.sh/queue-name=default",
        ],
    ] {
        let refused = tenant
            .kubectl(&change, None)
            .expect_err("a running pod's group and queue are fixed");
        assert!(
            refused.contains("cannot change once the pod exists"),
            "{refused}"
        );
    }
    nothing_runs_past_the_capability(&pods).await;
    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_who_writes_gangplanks_admitted_ahead_annotation_is_refused() {
    let cluster = Cluster::connect().await;
    let tenant = Tenant::new(&cluster, "tenant-ahead").await;
    let group = |annotations: serde_json::Value| {
        json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "gang", "annotations": annotations},
            "spec": {"minMember": 2}
        })
    };
    let forged = json!({"scheduling.gangplank.dev/admitted-ahead": "2030-01-01T00:00:00Z"});
    let refused = tenant
        .apply(group(forged.clone()))
        .expect_err("a new group must not come admitted ahead");
    assert!(refused.contains("written by Gangplank alone"), "{refused}");
    tenant.apply(group(json!({}))).unwrap();
    let refused = tenant
        .kubectl(
            &[
                "annotate",
                "podgroups.scheduling.gangplank.dev",
                "gang",
                "scheduling.gangplank.dev/admitted-ahead=2030-01-01T00:00:00Z",
            ],
            None,
        )
        .expect_err("an existing group must not be marked admitted ahead");
    assert!(refused.contains("written by Gangplank alone"), "{refused}");
    let stored = tenant.mine.api::<PodGroup>().get("gang").await.unwrap();
    assert!(
        !stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(gangplank::api::labels::ADMITTED_AHEAD_ANNOTATION),
        "the group carries no forged annotation"
    );
    tenant.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_cannot_submit_to_a_queue_that_does_not_select_their_namespace_nor_label_it_in() {
    let cluster = Cluster::connect().await;
    let spec: QueueSpec = serde_json::from_value(json!({
        "namespaceSelector": {"matchLabels": {"team": "vision"}}
    }))
    .unwrap();
    let queue = create_queue(&cluster.client, "tenant-vision", spec).await;
    let _guard = QueueGuard(queue.clone());
    let tenant = Tenant::new(&cluster, "tenant-other-team").await;

    let refused = tenant
        .apply(queue_pod("sneak", &queue, 1))
        .expect_err("a pod of another team's queue");
    assert!(
        refused.contains(&format!(
            "queue \"{queue}\" admits work only from namespaces matching its spec.namespaceSelector (team=vision)"
        )),
        "{refused}"
    );
    let refused = tenant
        .apply(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "gang"}, "spec": {"minMember": 1, "queue": queue}
        }))
        .expect_err("a PodGroup of another team's queue");
    assert!(refused.contains("spec.namespaceSelector"), "{refused}");
    let refused = tenant
        .kubectl(
            &["label", "namespace", &tenant.ns.name, "team=vision"],
            None,
        )
        .expect_err("a tenant must not relabel their namespace");
    assert!(refused.contains("forbidden"), "{refused}");

    let shown = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .args(["queues"])
        .env("KUBECONFIG", run_dir().join("kubeconfig"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let line = shown
        .lines()
        .find(|l| l.starts_with(&queue))
        .unwrap_or_default();
    assert!(
        line.ends_with("team=vision"),
        "gangplank queues shows the rule: {shown}"
    );
    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_pod_of_a_queue_created_on_a_node_is_refused() {
    let cluster = Cluster::connect().await;
    let queue = two_cpu_queue(&cluster, "tenant-node").await;
    let _guard = QueueGuard(queue.clone());
    let tenant = Tenant::new(&cluster, "tenant-node").await;
    let mut bound = queue_pod("bound", &queue, 8);
    bound["spec"]["nodeName"] = json!("kwok-node-0");
    let refused = tenant.apply(bound).expect_err("a pod of a queue on a node");
    assert!(refused.contains("spec.nodeName"), "{refused}");
    assert!(
        tenant
            .mine
            .api::<Pod>()
            .get_opt("bound")
            .await
            .unwrap()
            .is_none()
    );
    tenant.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_tenant_gang_of_two_billion_members_is_refused_and_gangplank_stays_up() {
    let cluster = Cluster::connect().await;
    let tenant = Tenant::new(&cluster, "tenant-huge").await;
    let refused = tenant
        .apply(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "huge"}, "spec": {"minMember": 2147483647}
        }))
        .expect_err("a gang of 2^31-1");
    assert!(refused.contains("spec.minMember"), "{refused}");
    let refused = tenant
        .apply(json!({
            "apiVersion": "batch.gangplank.dev/v1alpha1", "kind": "Job",
            "metadata": {"name": "huge"},
            "spec": {"tasks": [{"name": "worker", "replicas": 2147483647,
                "template": {"spec": {"containers": [{"name": "main", "image": "trainer"}]}}}]}
        }))
        .expect_err("a Job of 2^31-1 replicas");
    assert!(refused.contains("replicas"), "{refused}");
    assert_eq!(gangplank_readyz(&cluster).await, Some(200));
    tenant.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn an_admin_keeps_a_tenant_off_a_priority_class_with_a_resource_quota() {
    let cluster = Cluster::connect().await;
    let class_name = crate::support::unique("tenant-urgent");
    let class: PriorityClass = serde_json::from_value(json!({
        "metadata": {"name": class_name}, "value": 100000
    }))
    .unwrap();
    let classes = Api::<PriorityClass>::all(cluster.client.clone());
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let tenant = Tenant::new(&cluster, "tenant-priority").await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-urgent"},
        "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": [class_name]}
        ]}}
    }))
    .unwrap();
    tenant
        .ns
        .api::<ResourceQuota>()
        .create(&PostParams::default(), &quota)
        .await
        .unwrap();
    // The quota controller fills in what the quota holds before the API server enforces it.
    eventually("the quota's usage to be counted", 30, || async {
        let q = tenant
            .ns
            .api::<ResourceQuota>()
            .get("no-urgent")
            .await
            .ok()?;
        q.status?.used.map(|_| ())
    })
    .await;
    let mut urgent = queue_pod("urgent", "default", 1);
    urgent["spec"]["priorityClassName"] = json!(class_name);
    let refused = tenant
        .apply(urgent)
        .expect_err("a pod of a class the quota forbids");
    assert!(refused.contains("exceeded quota: no-urgent"), "{refused}");
    tenant.delete().await;
    classes
        .delete(&class_name, &DeleteParams::default())
        .await
        .unwrap();
}
