//! The ground everything else stands on: the stock scheduler places plain pods and Jobs on kwok
//! nodes by itself, and sends exactly the pods that carry Gangplank's marker resource through
//! Gangplank's extender.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::support::{
    Cluster, eventually, holds_for, pod, read_env_file, repo_dir, run_dir, running,
};

const EXTENDER_REQUESTS: &str = "gangplank_extender_requests_total";

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn kube_scheduler_reports_the_release_e2e_up_ran() {
    // The pinned one (e2e/versions.env) unless e2e/up was given another (GP_K8S_VERSION).
    let release = read_env_file(&run_dir().join("env"))["K8S_VERSION"].clone();
    let output = std::process::Command::new(run_dir().join("bin/kube-scheduler"))
        .arg("--version")
        .output()
        .expect("failed to run kube-scheduler --version");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(printed.trim(), format!("Kubernetes v{release}"));
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn plain_pod_is_scheduled_by_the_stock_scheduler_without_gangplank() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("plain-pod").await;
    let before = cluster.gangplank_metrics().await;

    let pods = ns.api::<Pod>();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
        })),
    )
    .await
    .unwrap();
    let placed = running(&pods, "plain", 60).await;
    let node = placed.spec.unwrap().node_name.unwrap();
    assert!(node.starts_with("kwok-node-"), "placed on {node}");

    let after = cluster.gangplank_metrics().await;
    for verb in ["filter", "prioritize", "bind"] {
        assert_eq!(
            after.sum(EXTENDER_REQUESTS, &[("verb", verb)]),
            before.sum(EXTENDER_REQUESTS, &[("verb", verb)]),
            "a pod without the marker resource reached the extender's {verb}"
        );
    }
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn job_with_three_completions_runs_to_complete() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("plain-job").await;
    let jobs = ns.api::<Job>();
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "three"},
        "spec": {"completions": 3, "parallelism": 3, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "500m"}}}]}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();

    let done = eventually("job three to complete", 120, || async {
        let job = jobs.get("three").await.ok()?;
        let status = job.status?;
        let complete = status
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        complete.then_some(status.succeeded)
    })
    .await;
    assert_eq!(done, Some(3));
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_of_a_queue_with_the_marker_resources_is_filtered_and_bound_through_gangplank_and_one_of_no_queue_is_not()
 {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("managed-pod").await;
    let before = cluster.gangplank_metrics().await;

    let pods = ns.api::<Pod>();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "managed", "labels": {"scheduling.gangplank.dev/queue": "default"}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {
                    "requests": {"cpu": "1", "scheduling.gangplank.dev/managed": "1",
                        "scheduling.gangplank.dev/placement": "1"},
                    "limits": {"scheduling.gangplank.dev/managed": "1",
                        "scheduling.gangplank.dev/placement": "1"}}}]}
        })),
    )
    .await
    .unwrap();
    let placed = running(&pods, "managed", 60).await;
    assert!(
        placed
            .spec
            .unwrap()
            .node_name
            .unwrap()
            .starts_with("kwok-node-")
    );

    let after = cluster.gangplank_metrics().await;
    let delta = |verb| {
        after.sum(EXTENDER_REQUESTS, &[("verb", verb)])
            - before.sum(EXTENDER_REQUESTS, &[("verb", verb)])
    };
    assert!(
        delta("filter") >= 1.0,
        "filter was not called for the managed pod"
    );
    assert!(
        delta("bind") >= 1.0,
        "bind was not called for the managed pod"
    );
    let ok_binds = after.sum(EXTENDER_REQUESTS, &[("verb", "bind"), ("outcome", "ok")])
        - before.sum(EXTENDER_REQUESTS, &[("verb", "bind"), ("outcome", "ok")]);
    assert_eq!(
        ok_binds, 1.0,
        "the managed pod was not bound by Gangplank exactly once"
    );

    // The same markers written by the pod's owner, on a pod of no group or queue: the webhook
    // never saw it, and Gangplank's bind refuses it.
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "forged"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {
                    "requests": {"cpu": "1", "scheduling.gangplank.dev/managed": "1"},
                    "limits": {"scheduling.gangplank.dev/managed": "1"}}}]}
        })),
    )
    .await
    .unwrap();
    holds_for(5, "the forged pod stays unbound", async || {
        let forged = pods.get("forged").await.unwrap();
        forged.spec.unwrap().node_name.is_none()
    })
    .await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_charts_deployment_layout_is_accepted_by_the_api_server_without_a_warning() {
    // e2e/up applied the sidecar layout; the Deployment layout's objects (its Deployment under
    // the namespace's restricted Pod Security level, Services, PodDisruptionBudget,
    // PriorityClass, NetworkPolicy, generated certificates) are checked by the API server's
    // dry run.
    let run = run_dir();
    let release = read_env_file(&run_dir().join("env"))["K8S_VERSION"].clone();
    let rendered = std::process::Command::new(run.join("bin/helm"))
        .args(["template", "gangplank"])
        .arg(repo_dir().join("charts/gangplank"))
        .args([
            "--namespace",
            "gangplank-system",
            "--kube-version",
            &release,
            // The NetworkPolicy's IPv4 and IPv6 exceptions, for the API server to check.
            "--set",
            "networkPolicy.podCIDRs={10.244.0.0/16,fd00:10:244::/56}",
        ])
        .output()
        .expect("failed to run helm");
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let mut apply = std::process::Command::new(run.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(run.join("kubeconfig"))
        .args(["apply", "--server-side", "--dry-run=server", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("failed to run kubectl");
    use std::io::Write;
    apply
        .stdin
        .take()
        .unwrap()
        .write_all(&rendered.stdout)
        .unwrap();
    let applied = apply.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr),
    );
    assert!(applied.status.success(), "{err}");
    assert!(!err.contains("Warning"), "{err}");
    for object in [
        "deployment.apps/gangplank",
        "service/gangplank-extender",
        "poddisruptionbudget.policy/gangplank",
        "networkpolicy.networking.k8s.io/gangplank",
        "secret/gangplank-scheduler-client",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/gangplank",
    ] {
        assert!(out.contains(object), "{object} not applied: {out}");
    }
}

/// Runs the local control plane's kubectl with `args`, and panics naming them if it fails.
fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let run = run_dir();
    let mut child = std::process::Command::new(run.join("bin/kubectl"))
        .arg("--kubeconfig")
        .arg(run.join("kubeconfig"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("failed to run kubectl");
    let input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        { input }.write_all(text.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Deletes the object `kubectl delete` names with `args` when dropped, test passed or not.
struct Deleted(&'static [&'static str]);

impl Drop for Deleted {
    fn drop(&mut self) {
        let mut args = vec!["delete", "--ignore-not-found"];
        args.extend_from_slice(self.0);
        kubectl(&args, None);
    }
}

/// Creates the ConfigMap kube-system/`name` with one key, `literal` being `KEY=VALUE`.
fn create_system_config_map(name: &str, literal: &str) {
    let literal = format!("--from-literal={literal}");
    kubectl(
        &["create", "configmap", "-n", "kube-system", name, &literal],
        None,
    );
}

/// The chart's NetworkPolicy as `helm install` renders it on this cluster (its lookups asked
/// of the API server), its comment included.
fn network_policy_rendered_at_install() -> String {
    let run = run_dir();
    let release = read_env_file(&run.join("env"))["K8S_VERSION"].clone();
    let rendered = std::process::Command::new(run.join("bin/helm"))
        .env("KUBECONFIG", run.join("kubeconfig"))
        .args(["template", "gangplank"])
        .arg(repo_dir().join("charts/gangplank"))
        .args([
            "--namespace",
            "gangplank-system",
            "--kube-version",
            &release,
        ])
        .args([
            "--dry-run=server",
            "--show-only",
            "templates/network-policy.yaml",
        ])
        .output()
        .expect("failed to run helm");
    let text = String::from_utf8_lossy(&rendered.stdout).into_owned();
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    text
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_charts_network_policy_keeps_out_the_pod_network_the_cluster_tells_at_install() {
    let open = network_policy_rendered_at_install();
    assert!(
        open.contains("every address (no pod network CIDRs set, and none learned)")
            && !open.contains("except"),
        "a cluster that tells no pod network leaves the ports open and says so: {open}"
    );

    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "pod-cidr-check", "labels": {"gangplank.dev/e2e": "pod-cidr-check"}},
        "spec": {"podCIDR": "10.250.7.0/24", "podCIDRs": ["10.250.7.0/24"],
            "unschedulable": true}});
    let _node = Deleted(&["node", "pod-cidr-check"]);
    kubectl(&["create", "-f", "-"], Some(&node.to_string()));
    let from_nodes = network_policy_rendered_at_install();
    assert!(
        from_nodes.contains(r#"except: ["10.250.7.0/24"]"#)
            && from_nodes.contains("as the nodes' spec.podCIDRs said at install"),
        "{from_nodes}"
    );

    let proxy = "config.conf=apiVersion: kubeproxy.config.k8s.io/v1alpha1\n\
        kind: KubeProxyConfiguration\nclusterCIDR: 10.244.0.0/16,fd00:10:244::/56\n";
    let _proxy = Deleted(&["configmap", "-n", "kube-system", "kube-proxy"]);
    create_system_config_map("kube-proxy", proxy);
    let from_proxy = network_policy_rendered_at_install();
    assert!(
        from_proxy.contains(r#"except: ["10.244.0.0/16"]"#)
            && from_proxy.contains(r#"except: ["fd00:10:244::/56"]"#)
            && from_proxy.contains("as kube-proxy's clusterCIDR (kube-system/kube-proxy) said"),
        "kube-proxy's range, IPv4 and IPv6, comes before the nodes': {from_proxy}"
    );

    let kubeadm = "ClusterConfiguration=apiVersion: kubeadm.k8s.io/v1beta4\n\
        kind: ClusterConfiguration\nnetworking:\n  podSubnet: 192.168.0.0/16\n";
    let _kubeadm = Deleted(&["configmap", "-n", "kube-system", "kubeadm-config"]);
    create_system_config_map("kubeadm-config", kubeadm);
    let from_kubeadm = network_policy_rendered_at_install();
    assert!(
        from_kubeadm.contains(r#"except: ["192.168.0.0/16"]"#)
            && from_kubeadm.contains("as kubeadm's podSubnet (kube-system/kubeadm-config) said"),
        "kubeadm's podSubnet comes first: {from_kubeadm}"
    );
}
