//! The chart's own layout run for real (`e2e/up --layout deployment`): the Deployment's two
//! replicas run from the image by the pod host (`e2e/lib/podhost.py`, a kubelet's part) on the
//! node `gp-pod-host`, kube-proxy routing the Services, the API server calling the webhooks
//! through the `gangplank` Service and the scheduler calling the extender at the
//! `gangplank-extender` Service's ClusterIP, as the rendered chart and scheduler configuration
//! say. Gangs and a queue's pod are placed through that path, a bad Queue is refused through
//! it, a rotated Secret reaches both replicas through their volumes, a replica deleted as a
//! rollout deletes it fails no webhook call routed through the Service, and stopping the
//! leader's container hands the Lease and the extender Service to the other replica. These
//! tests need a cluster in that layout (`e2e/test --layout deployment --
//! deployment_layout::`, as `./test.sh` runs them); on another they fail, saying so, and
//! `e2e/test` leaves them out of such a run.

use std::collections::BTreeSet;
use std::path::PathBuf;

use gangplank::api::{Queue, QueueSpec};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::queues::{QueueGuard, create_gang, create_queue};
use crate::support::{Cluster, Metrics, bound_eventually, delete_queue, eventually, pod, repo_dir};

const NAMESPACE: &str = "gangplank-system";
const LEASE: &str = "gangplank";
const LEADER_LABEL: &str = "scheduling.gangplank.dev/leader";

/// The cluster, which must run in the Deployment layout.
async fn deployment_cluster() -> Cluster {
    let cluster = Cluster::connect().await;
    assert_eq!(
        cluster.env.get("GP_LAYOUT").map(String::as_str),
        Some("deployment"),
        "the deployment_layout tests need a cluster started with e2e/up --layout deployment"
    );
    cluster
}

/// The Lease's holder: the name of the leading replica's pod.
pub(crate) async fn leader(cluster: &Cluster) -> Option<String> {
    Api::<Lease>::namespaced(cluster.client.clone(), NAMESPACE)
        .get(LEASE)
        .await
        .ok()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// Gangplank's pods, by name, with their IPs, ready or not.
pub(crate) async fn replicas(cluster: &Cluster) -> Vec<(String, String, bool, Pod)> {
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=gangplank"))
        .await
        .expect("failed to list Gangplank's pods");
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (
                p.metadata.name.clone().unwrap_or_default(),
                status.pod_ip.unwrap_or_default(),
                ready,
                p,
            )
        })
        .collect()
}

/// The addresses a Service's EndpointSlices send to, ready endpoints only.
async fn ready_endpoints(cluster: &Cluster, service: &str) -> BTreeSet<String> {
    let slices = Api::<EndpointSlice>::namespaced(cluster.client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .expect("failed to list EndpointSlices");
    slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect()
}

/// The leader's pod IP, once the extender Service sends to exactly it.
pub(crate) async fn leader_behind_extender_service(
    cluster: &Cluster,
    expected: Option<&str>,
) -> (String, String) {
    eventually(
        "one leader, labelled, the only endpoint of gangplank-extender",
        90,
        || async {
            let leader = leader(cluster).await?;
            if expected.is_some_and(|e| e != leader) {
                return None;
            }
            let replicas = replicas(cluster).await;
            let (_, ip, _, pod) = replicas.iter().find(|(name, ..)| *name == leader)?;
            let labelled: Vec<&String> = replicas
                .iter()
                .filter(|(.., p)| {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LEADER_LABEL))
                        .is_some()
                })
                .map(|(name, ..)| name)
                .collect();
            let endpoints = ready_endpoints(cluster, "gangplank-extender").await;
            (labelled == vec![&leader]
                && endpoints == BTreeSet::from([ip.clone()])
                && pod.metadata.labels.as_ref()?.get(LEADER_LABEL)? == "true")
                .then(|| (leader.clone(), ip.clone()))
        },
    )
    .await
}

/// A replica's metrics, read from its pod IP (the pod network is routed on this host).
pub(crate) async fn metrics_of(ip: &str) -> Metrics {
    let body = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{ip}:8080/metrics"))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("failed to read the metrics of the replica at {ip}: {e}"))
        .text()
        .await
        .unwrap();
    Metrics::parse(&body)
}

/// Ten TCP connections in a row to the `gangplank` Service's webhook port connect: kube-proxy
/// picks an endpoint at random for each, so a replica that does not listen would show.
pub(crate) async fn webhook_service_routes(cluster: &Cluster) -> Option<()> {
    let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
    let ip = services.get("gangplank").await.ok()?.spec?.cluster_ip?;
    for _ in 0..10 {
        let connect = tokio::net::TcpStream::connect((ip.as_str(), 9443));
        tokio::time::timeout(std::time::Duration::from_secs(2), connect)
            .await
            .ok()?
            .ok()?;
    }
    Some(())
}

pub(crate) fn binds_ok(metrics: &Metrics) -> f64 {
    metrics.sum(
        "gangplank_extender_requests_total",
        &[("verb", "bind"), ("outcome", "ok")],
    )
}

/// The container process of a pod the pod host runs: its PID, read from the pod's network
/// namespace (`ip netns pids`), the one that is not buildah.
fn container_pid(cluster: &Cluster, pod: &str) -> u32 {
    let dir = PathBuf::from(cluster.url("POD_HOST_DIR")).join(format!("pods/{NAMESPACE}_{pod}"));
    let netns = std::fs::read_to_string(dir.join("netns")).expect("the pod host's netns file");
    let process =
        std::fs::read_to_string(dir.join("process")).expect("the pod host's process file");
    let out = std::process::Command::new("ip")
        .args(["netns", "pids", netns.trim()])
        .output()
        .expect("failed to run ip netns pids");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|pid| pid.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == process.trim())
        })
        .unwrap_or_else(|| panic!("no container process runs for {pod}"))
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn the_charts_deployment_runs_two_replicas_from_the_image_the_leader_alone_behind_the_extender_service()
 {
    let cluster = deployment_cluster().await;
    let deployments = Api::<Deployment>::namespaced(cluster.client.clone(), NAMESPACE);
    eventually(
        "the chart's Deployment with two ready replicas",
        60,
        || async {
            let status = deployments.get("gangplank").await.ok()?.status?;
            (status.replicas == Some(2) && status.ready_replicas == Some(2)).then_some(())
        },
    )
    .await;

    let (leader, leader_ip) = leader_behind_extender_service(&cluster, None).await;
    let replicas = replicas(&cluster).await;
    assert_eq!(replicas.len(), 2, "{replicas:?}");
    let ips: BTreeSet<String> = replicas.iter().map(|(_, ip, ..)| ip.clone()).collect();
    assert!(ips.contains(&leader_ip));
    // Both serve the webhooks and the metrics.
    assert_eq!(ready_endpoints(&cluster, "gangplank").await, ips);
    for (name, _, ready, pod) in &replicas {
        assert!(ready, "{name} is not ready");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("gp-pod-host"));
        // The image e2e/up built and named in the chart's values.
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("localhost/gangplank-e2e:dev")
        );
        // Its process runs in the image's file system, with the Secret and the service account's
        // token mounted where the pod mounts them.
        let pid = container_pid(&cluster, name);
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
        assert!(passwd.contains("gangplank:x:65532:65532"), "{passwd}");
        assert!(root.join("etc/gangplank/tls/tls.crt").is_file());
        assert!(
            root.join("var/run/secrets/kubernetes.io/serviceaccount/token")
                .is_file()
        );
        // The container's securityContext: its user, no capabilities, no privilege escalation.
        let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| {
            let line = proc_status.lines().find(|l| l.starts_with(name)).unwrap();
            line.split_whitespace().nth(1).unwrap().to_owned()
        };
        assert_eq!(field("Uid:"), "65532", "{proc_status}");
        assert_eq!(field("CapEff:"), "0000000000000000", "{proc_status}");
        assert_eq!(field("NoNewPrivs:"), "1", "{proc_status}");
    }

    // The scheduler's configuration is the shipped one with the extender Service's ClusterIP in
    // its urlPrefix lines, and that is the IP the chart gave the Service.
    let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
    let cluster_ip = services
        .get("gangplank-extender")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip;
    assert_eq!(
        cluster_ip.as_deref(),
        Some(cluster.url("EXTENDER_CLUSTER_IP"))
    );
    let config =
        std::fs::read_to_string(crate::support::run_dir().join("scheduler-config.yaml")).unwrap();
    let prefixes: Vec<&str> = config
        .lines()
        .filter(|l| l.trim_start().starts_with("- urlPrefix:"))
        .collect();
    assert_eq!(prefixes.len(), 2, "{config}");
    for line in prefixes {
        assert!(
            line.contains(&format!(
                "https://{}:8443/scheduler",
                cluster_ip.as_deref().unwrap()
            )),
            "{line}"
        );
    }
    eprintln!("{leader} leads at {leader_ip}");
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn a_gang_and_a_queues_pod_are_placed_through_the_extender_service() {
    let cluster = deployment_cluster().await;
    let (_, leader_ip) = leader_behind_extender_service(&cluster, None).await;
    let before = binds_ok(&metrics_of(&leader_ip).await);

    let queue = create_queue(&cluster.client, "deploy", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("deploy-gang").await;
    let pods = ns.api::<Pod>();
    create_gang(&ns, &queue, "gang", 3, 4, None, None).await;
    bound_eventually("the gang of 3 bound whole", 60, &pods, "gang-", 3).await;

    // A pod of the queue alone: the pods-by-queue webhook (called through the Service) marks it
    // for Gangplank and gates it, the admission loop releases it and the extender binds it.
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo", "labels": {"scheduling.gangplank.dev/queue": queue}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}}}]}
        })),
    )
    .await
    .expect("failed to create the queue's pod");
    let solo = eventually("the queue's pod bound", 60, || async {
        let p = pods.get("solo").await.ok()?;
        p.spec.as_ref()?.node_name.as_ref()?;
        Some(p)
    })
    .await;
    let requests = solo.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    // The webhook's markers (zero units: the scheduler picks the extenders by their names).
    for marker in [
        "scheduling.gangplank.dev/managed",
        "scheduling.gangplank.dev/placement",
    ] {
        assert!(
            requests.contains_key(marker),
            "the mutating webhook did not mark the queue's pod with {marker}: {requests:?}"
        );
    }

    // Every member and the queue's pod were bound by the leader's extender.
    let after = binds_ok(&metrics_of(&leader_ip).await);
    assert!(
        after - before >= 4.0,
        "binds by the leader: {before} before, {after} after"
    );

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn a_bad_queue_is_refused_by_the_webhook_through_the_service_naming_the_field() {
    let cluster = deployment_cluster().await;
    // The registration, as the chart renders it, names the Service, not an address.
    let registrations = Api::<ValidatingWebhookConfiguration>::all(cluster.client.clone());
    let service = registrations
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|r| r.webhooks.unwrap_or_default())
        .find(|w| w.name == "queues.gangplank.dev")
        .expect("the webhook queues.gangplank.dev is registered")
        .client_config;
    assert!(service.url.is_none(), "{service:?}");
    let service = service.service.expect("the webhook names a Service");
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NAMESPACE, "gangplank")
    );

    let queues: Api<Queue> = Api::all(cluster.client.clone());
    let name = crate::support::unique("bad");
    let bad: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"capability": {"cpu": "8"}, "guarantee": {"cpu": "16"}}
    }))
    .unwrap();
    let _guard = QueueGuard(name.clone());
    let message = match queues.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected the webhook to refuse the queue, got {other:?}"),
    };
    assert!(
        message.starts_with("admission webhook \"queues.gangplank.dev\" denied the request:")
            && message
                .ends_with("spec.guarantee[cpu]: must not exceed spec.capability[cpu] (8), got 16"),
        "{message}"
    );
    assert!(queues.get_opt(&name).await.unwrap().is_none());
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn stopping_the_leaders_container_hands_the_lease_and_the_extender_service_to_the_other_replica()
 {
    let cluster = deployment_cluster().await;
    let (old, _) = leader_behind_extender_service(&cluster, None).await;
    let (other, other_ip, ..) = replicas(&cluster)
        .await
        .into_iter()
        .find(|(name, ..)| *name != old)
        .expect("a second replica");
    let restarts = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |c| c[0].restart_count)
    };
    let old_restarts = restarts(
        &replicas(&cluster)
            .await
            .into_iter()
            .find(|r| r.0 == old)
            .unwrap()
            .3,
    );

    // As `crictl stop` would: TERM to the container's process; the leader gives the Lease up.
    let status = std::process::Command::new(repo_dir().join("e2e/lib/podhost.py"))
        .args([
            "stop",
            NAMESPACE,
            &old,
            "--dir",
            cluster.url("POD_HOST_DIR"),
        ])
        .status()
        .expect("failed to run e2e/lib/podhost.py stop");
    assert!(status.success(), "podhost.py stop {old} failed");

    let (leader, ip) = leader_behind_extender_service(&cluster, Some(&other)).await;
    assert_eq!(
        (leader.as_str(), ip.as_str()),
        (other.as_str(), other_ip.as_str())
    );

    // The stopped replica's endpoint is out of the webhooks' Service too (the pods' webhook
    // calls go there) once ten connections in a row reach a replica that answers.
    eventually(
        "the gangplank Service routing to live replicas only",
        60,
        || webhook_service_routes(&cluster),
    )
    .await;

    // The new leader places a gang created now, whole, through the same Service.
    let before = binds_ok(&metrics_of(&other_ip).await);
    let queue = create_queue(&cluster.client, "handover", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("deploy-handover").await;
    let pods = ns.api::<Pod>();
    create_gang(&ns, &queue, "after", 3, 4, None, None).await;
    bound_eventually(
        "the gang created after the handover bound whole",
        60,
        &pods,
        "after-",
        3,
    )
    .await;
    let after = binds_ok(&metrics_of(&other_ip).await);
    assert!(
        after - before >= 3.0,
        "binds by the new leader: {before} before, {after} after"
    );

    // The stopped container is started again (the pod host's back-off) and follows.
    eventually(
        "the stopped replica restarted, ready, following",
        90,
        || async {
            let replicas = replicas(&cluster).await;
            let (_, _, ready, pod) = replicas.iter().find(|r| r.0 == old)?;
            let labelled = pod.metadata.labels.as_ref()?.contains_key(LEADER_LABEL);
            (*ready && restarts(pod) > old_restarts && !labelled).then_some(())
        },
    )
    .await;
    assert_eq!(
        leader_behind_extender_service(&cluster, None).await.0,
        other
    );

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// The SHA-256 fingerprint of the certificate a replica serves on its webhook port, as openssl
/// prints it, or None while it cannot be read.
fn served_fingerprint(ip: &str) -> Option<String> {
    let script = format!(
        "openssl s_client -connect {ip}:9443 -servername gangplank.{NAMESPACE}.svc </dev/null 2>/dev/null \
         | openssl x509 -noout -fingerprint -sha256"
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && text.contains('=')).then_some(text)
}

/// The fingerprint of a PEM certificate, as openssl prints it.
fn fingerprint_of(pem: &[u8]) -> String {
    let dir = std::env::temp_dir().join(crate::support::unique("cert"));
    std::fs::write(&dir, pem).unwrap();
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(&dir)
        .output()
        .expect("failed to run openssl");
    std::fs::remove_file(&dir).ok();
    assert!(
        out.status.success(),
        "openssl x509 failed on the certificate"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Waits until both replicas serve the certificate of `fingerprint` on their webhook port.
async fn every_replica_serves(cluster: &Cluster, fingerprint: &str, what: &str) {
    eventually(what, 90, || async {
        let replicas = replicas(cluster).await;
        (replicas.len() == 2
            && replicas
                .iter()
                .all(|(_, ip, ..)| served_fingerprint(ip).as_deref() == Some(fingerprint)))
        .then_some(())
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn a_rotated_tls_secret_reaches_every_replica_through_its_volume_without_a_restart() {
    let cluster = deployment_cluster().await;
    let secrets = Api::<Secret>::namespaced(cluster.client.clone(), NAMESPACE);
    let original = secrets
        .get("gangplank-tls")
        .await
        .expect("the chart's Secret gangplank-tls");
    let data = original.data.clone().expect("the Secret's data");
    let original_fingerprint = fingerprint_of(&data["tls.crt"].0);
    every_replica_serves(
        &cluster,
        &original_fingerprint,
        "every replica serving the chart's certificate",
    )
    .await;
    let restarts_before: Vec<(String, i32)> = replicas(&cluster)
        .await
        .iter()
        .map(|(name, _, _, pod)| {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref());
            (name.clone(), statuses.map_or(0, |c| c[0].restart_count))
        })
        .collect();

    // New certificates from another CA, as webhooks/gen-certs.sh makes them.
    let dir = std::env::temp_dir().join(crate::support::unique("rotated-certs"));
    let status = std::process::Command::new(repo_dir().join("webhooks/gen-certs.sh"))
        .arg(&dir)
        .args([&format!("gangplank.{NAMESPACE}.svc"), "127.0.0.1"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("failed to run webhooks/gen-certs.sh");
    assert!(status.success(), "webhooks/gen-certs.sh failed");
    let file = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let rotated = |crt: &[u8], key: &[u8], ca: &[u8]| {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        json!({"data": {"tls.crt": b64(crt), "tls.key": b64(key), "ca.crt": b64(ca)}})
    };
    let patch = async |body: serde_json::Value| {
        secrets
            .patch(
                "gangplank-tls",
                &PatchParams::default(),
                &Patch::Merge(body),
            )
            .await
            .expect("failed to patch the Secret gangplank-tls");
    };
    patch(rotated(&file("tls.crt"), &file("tls.key"), &file("ca.crt"))).await;
    let new_fingerprint = fingerprint_of(&file("tls.crt"));
    std::fs::remove_dir_all(&dir).ok();

    // The pod host writes the volume again, and Gangplank reloads the files it watches.
    every_replica_serves(
        &cluster,
        &new_fingerprint,
        "every replica serving the rotated certificate",
    )
    .await;

    // Back to the chart's certificates, which the webhook registrations and the scheduler trust.
    patch(rotated(
        &data["tls.crt"].0,
        &data["tls.key"].0,
        &data["ca.crt"].0,
    ))
    .await;
    every_replica_serves(
        &cluster,
        &original_fingerprint,
        "every replica serving the chart's certificate again",
    )
    .await;
    let restarts_after: Vec<(String, i32)> = replicas(&cluster)
        .await
        .iter()
        .map(|(name, _, _, pod)| {
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref());
            (name.clone(), statuses.map_or(0, |c| c[0].restart_count))
        })
        .collect();
    assert_eq!(
        restarts_after, restarts_before,
        "a replica restarted during the rotation"
    );
}

#[tokio::test]
#[ignore = "needs the local control plane in the Deployment layout: run e2e/test --layout deployment"]
async fn a_replica_deleted_as_a_rollout_deletes_it_fails_no_webhook_call_routed_through_the_service()
 {
    let cluster = deployment_cluster().await;
    let (leader, _) = leader_behind_extender_service(&cluster, None).await;
    eventually(
        "both replicas ready behind the gangplank Service",
        120,
        || async { (ready_endpoints(&cluster, "gangplank").await.len() == 2).then_some(()) },
    )
    .await;
    let follower = replicas(&cluster)
        .await
        .into_iter()
        .find(|(name, ..)| *name != leader)
        .map(|(name, ..)| name)
        .expect("a replica that does not lead");
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    pods.delete(&follower, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("failed to delete {follower}: {e}"));

    // A dry run calls the queues webhook through the Service and creates nothing.
    let queues: Api<Queue> = Api::all(cluster.client.clone());
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let (mut answered, mut failed) = (0, Vec::new());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let gone = pods.get_opt(&follower).await.unwrap().is_none();
        if gone && ready_endpoints(&cluster, "gangplank").await.len() == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{follower} not replaced by a ready replica within 120 s"
        );
        let queue: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": crate::support::unique("rollout")},
            "spec": {"capability": {"cpu": "8"}}
        }))
        .unwrap();
        match queues.create(&dry_run, &queue).await {
            Ok(_) => answered += 1,
            Err(e) => failed.push(e.to_string()),
        }
        // Paced as a busy cluster's creations come, not as fast as the client goes.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        answered >= 20,
        "the calls went on while {follower} stopped and its replacement started: {answered}"
    );
    assert!(
        failed.is_empty(),
        "{} of {} webhook calls failed while {follower} stopped: {failed:?}",
        failed.len(),
        failed.len() + answered
    );
}
