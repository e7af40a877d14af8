//! `helm upgrade` from the previous release to this checkout's chart and image, as an operator
//! runs it (docs/install.md, "Upgrading"), while gangs run, wait and have their binds held, and
//! `helm rollback` to the previous release after. The
//! cluster runs the Deployment layout with the previous release's chart installed by Helm and
//! its image (`e2e/up --layout deployment --chart DIR --image-archive FILE`, both built by
//! `scripts/previous-release`, as `./test.sh` runs it); `e2e/test` leaves these tests out of
//! any other run, and on another cluster they fail, saying so.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gangplank::api::labels::POD_GROUP_LABEL;
use gangplank::api::{PodGroup, Queue, QueueSpec};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::deployment_layout::{
    binds_ok, leader_behind_extender_service, metrics_of, replicas, webhook_service_routes,
};
use crate::queues::{QueueGuard, create_gang};
use crate::support::{
    Cluster, bound_eventually, bound_with_prefix, delete_queue, eventually, managed_pod, pod_group,
    repo_dir, run_dir,
};

const NAMESPACE: &str = "gangplank-system";
const RELEASE: &str = "gangplank";

/// The cluster, which must run the Deployment layout from a chart Helm installed.
async fn upgrade_cluster() -> Cluster {
    let cluster = Cluster::connect().await;
    assert!(
        cluster.env.get("GP_LAYOUT").map(String::as_str) == Some("deployment")
            && cluster.env.get("GP_CHART").is_some_and(|c| !c.is_empty()),
        "the upgrade tests need a cluster started with e2e/up --layout deployment --chart DIR \
         --image-archive FILE (scripts/previous-release builds both)"
    );
    cluster
}

/// Runs `program` (a harness binary: helm, kubectl) against the cluster; panics with its
/// output unless it succeeds, and returns its standard output.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(run_dir().join("bin").join(program))
        .arg("--kubeconfig")
        .arg(run_dir().join("kubeconfig"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("failed to run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Helm release's chart (`gangplank-<version>`) and revision.
fn release() -> (String, u64) {
    let list: serde_json::Value = serde_json::from_str(&run(
        "helm",
        &["list", "--namespace", NAMESPACE, "--output", "json"],
    ))
    .expect("helm list printed no JSON");
    let release = list
        .as_array()
        .and_then(|l| l.iter().find(|r| r["name"] == RELEASE))
        .unwrap_or_else(|| panic!("no Helm release {RELEASE} in {NAMESPACE}: {list}"));
    let revision = match &release["revision"] {
        serde_json::Value::String(s) => s.parse().unwrap(),
        other => other.as_u64().unwrap(),
    };
    (release["chart"].as_str().unwrap().to_owned(), revision)
}

/// A chart directory's version.
fn chart_version(dir: &str) -> String {
    let text = std::fs::read_to_string(PathBuf::from(dir).join("Chart.yaml")).unwrap();
    let chart: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    chart["version"].as_str().unwrap().to_owned()
}

/// The bytes of a Secret of Gangplank's namespace, by key.
async fn secret_data(cluster: &Cluster, name: &str) -> BTreeMap<String, Vec<u8>> {
    Api::<Secret>::namespaced(cluster.client.clone(), NAMESPACE)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("failed to read the Secret {name}: {e}"))
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// Each webhook of `installed` (name to CA bundle) keeps its CA bundle, and any webhook the
/// chart now registers beside them trusts one of those CAs.
async fn webhooks_keep_their_ca(cluster: &Cluster, installed: &BTreeMap<String, Vec<u8>>) {
    let now = webhook_ca_bundles(cluster).await;
    for (hook, bundle) in installed {
        assert!(
            now.get(hook) == Some(bundle),
            "webhook {hook}'s CA bundle changed"
        );
    }
    assert!(
        now.values().all(|b| installed.values().any(|ca| ca == b)),
        "a webhook the chart added trusts another CA"
    );
}

/// The caBundle of each of Gangplank's webhooks, by webhook name.
async fn webhook_ca_bundles(cluster: &Cluster) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mutating = Api::<MutatingWebhookConfiguration>::all(cluster.client.clone());
    for config in mutating.list(&ListParams::default()).await.unwrap().items {
        for hook in config.webhooks.unwrap_or_default() {
            if hook.name.ends_with(".gangplank.dev") {
                out.insert(
                    hook.name,
                    hook.client_config.ca_bundle.unwrap_or_default().0,
                );
            }
        }
    }
    let validating = Api::<ValidatingWebhookConfiguration>::all(cluster.client.clone());
    for config in validating.list(&ListParams::default()).await.unwrap().items {
        for hook in config.webhooks.unwrap_or_default() {
            if hook.name.ends_with(".gangplank.dev") {
                out.insert(
                    hook.name,
                    hook.client_config.ca_bundle.unwrap_or_default().0,
                );
            }
        }
    }
    out
}

/// Every Queue's spec and the namespace's PodGroups' specs, as JSON, by name.
async fn specs(cluster: &Cluster, namespace: &str) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    let queues = Api::<Queue>::all(cluster.client.clone());
    for q in queues.list(&ListParams::default()).await.unwrap().items {
        let name = q.metadata.name.clone().unwrap();
        out.insert(
            format!("queue {name}"),
            serde_json::to_value(&q.spec).unwrap(),
        );
    }
    let groups = Api::<PodGroup>::namespaced(cluster.client.clone(), namespace);
    for g in groups.list(&ListParams::default()).await.unwrap().items {
        let name = g.metadata.name.clone().unwrap();
        out.insert(
            format!("podgroup {name}"),
            serde_json::to_value(&g.spec).unwrap(),
        );
    }
    out
}

/// Gangplank's pods, ready, not being deleted, all on `image`, the Deployment rolled out to
/// them, the webhooks' Service routed to them, and one leader labelled and alone behind the
/// extender Service: its pod and IP.
async fn rolled_out_to(cluster: &Cluster, image: &str) -> (String, String) {
    let deployments = Api::<Deployment>::namespaced(cluster.client.clone(), NAMESPACE);
    eventually(
        &format!("the Deployment rolled out: two ready replicas of {image}, no other pod"),
        240,
        || async {
            let d = deployments.get("gangplank").await.ok()?;
            let generation = d.metadata.generation?;
            let status = d.status?;
            let rolled = status.observed_generation? >= generation
                && status.replicas == Some(2)
                && status.updated_replicas == Some(2)
                && status.ready_replicas == Some(2);
            let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
                .list(&ListParams::default().labels("app.kubernetes.io/name=gangplank"))
                .await
                .ok()?;
            // The old pods gone, not only terminating: their containers have stopped.
            let on_image = pods.items.len() == 2
                && pods.items.iter().all(|p| {
                    p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image)
                });
            let ready = replicas(cluster)
                .await
                .iter()
                .all(|(_, _, ready, _)| *ready);
            (rolled && on_image && ready).then_some(())?;
            // kube-proxy lags the EndpointSlices: until it routes the webhooks' Service to the
            // new replicas only, the API server's calls to it can time out and the webhook,
            // failing closed, refuses the pods of gangs and queues.
            webhook_service_routes(cluster).await
        },
    )
    .await;
    leader_behind_extender_service(cluster, None).await
}

/// Gangplank posts a gang's Bindings one after another once the gang is complete, so a poll
/// can see some members bound and not yet the others; a gang seen partly bound must be seen
/// whole within this long, or a pod was bound outside its gang.
const PARTLY_BOUND_AT_MOST: std::time::Duration = std::time::Duration::from_secs(10);

/// Polls the namespace's gangs until stopped, comparing at every poll each gang's bound pods
/// with its minMember: records every gang seen with members bound but fewer than minMember
/// for longer than [`PARTLY_BOUND_AT_MOST`] (to the end of the watch, if it never became
/// whole). A gang the test is deleting (a member or the group marked for deletion) is no
/// longer judged.
struct WholeGangs {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl WholeGangs {
    fn watch(cluster: &Cluster, namespace: &str) -> WholeGangs {
        let stop = Arc::new(AtomicBool::new(false));
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), namespace);
        let groups = Api::<PodGroup>::namespaced(cluster.client.clone(), namespace);
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let (mut polls, mut broken) = (0, Vec::new());
            // Per gang seen partly bound: when first, and the most members seen bound since.
            let mut partly: BTreeMap<String, (std::time::Instant, Vec<String>)> = BTreeMap::new();
            let mut judge = |name: &str, since: std::time::Instant, bound: &[String], min| {
                if since.elapsed() > PARTLY_BOUND_AT_MOST {
                    broken.push(format!(
                        "gang {name} of minMember {min}: only {bound:?} bound for {:.1?}",
                        since.elapsed()
                    ));
                }
            };
            let mut mins: BTreeMap<String, i32> = BTreeMap::new();
            while !stopped.load(Ordering::SeqCst) {
                let listed = (
                    groups.list(&ListParams::default()).await,
                    pods.list(&ListParams::default()).await,
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                let (Ok(groups), Ok(pods)) = listed else {
                    continue;
                };
                let mut members: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
                for p in &pods.items {
                    if let Some(g) = p
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(POD_GROUP_LABEL))
                    {
                        members.entry(g.clone()).or_default().push(p);
                    }
                }
                for g in &groups.items {
                    let name = g.metadata.name.clone().unwrap();
                    let members = members.remove(&name).unwrap_or_default();
                    if g.metadata.deletion_timestamp.is_some()
                        || members
                            .iter()
                            .any(|p| p.metadata.deletion_timestamp.is_some())
                    {
                        partly.remove(&name);
                        continue;
                    }
                    let bound: Vec<String> = members
                        .iter()
                        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                        .map(|p| p.metadata.name.clone().unwrap())
                        .collect();
                    mins.insert(name.clone(), g.spec.min_member);
                    if bound.is_empty() || bound.len() as i32 >= g.spec.min_member {
                        if let Some((since, seen)) = partly.remove(&name) {
                            judge(&name, since, &seen, g.spec.min_member);
                        }
                    } else {
                        let entry = partly
                            .entry(name)
                            .or_insert_with(|| (std::time::Instant::now(), Vec::new()));
                        if bound.len() > entry.1.len() {
                            entry.1 = bound;
                        }
                    }
                }
                polls += 1;
            }
            for (name, (since, seen)) in partly {
                judge(&name, since, &seen, mins[&name]);
            }
            (polls, broken)
        });
        WholeGangs { stop, task }
    }

    /// Stops watching; panics naming every gang that was partly bound for longer than
    /// [`PARTLY_BOUND_AT_MOST`].
    async fn assert_never_partly_bound(self) {
        self.stop.store(true, Ordering::SeqCst);
        let (polls, broken) = self.task.await.unwrap();
        assert!(polls > 0, "the gangs were never read");
        assert!(
            broken.is_empty(),
            "pods bound outside their gang (in {polls} polls): {broken:?}"
        );
        eprintln!("no gang partly bound for more than {PARTLY_BOUND_AT_MOST:?} in {polls} polls");
    }
}

#[tokio::test]
#[ignore = "needs the previous release installed by Helm: run e2e/test --layout deployment --chart DIR --image-archive FILE"]
async fn helm_upgrade_from_the_previous_release_keeps_gangs_whole_certificates_queues_and_the_schedulers_calls()
 {
    let cluster = upgrade_cluster().await;
    let previous = chart_version(cluster.url("GP_CHART"));
    let current = env!("CARGO_PKG_VERSION");
    assert_ne!(
        previous, current,
        "the installed chart is this checkout's version"
    );
    let repository = "localhost/gangplank-e2e";
    // Installed by e2e/up (revision 1), or rolled back to it.
    let (chart, revision) = release();
    assert_eq!(chart, format!("gangplank-{previous}"));
    let (old_leader, old_leader_ip) =
        rolled_out_to(&cluster, &format!("{repository}:{previous}")).await;

    let tls = secret_data(&cluster, "gangplank-tls").await;
    let scheduler_client = secret_data(&cluster, "gangplank-scheduler-client").await;
    let ca_bundles = webhook_ca_bundles(&cluster).await;
    assert!(!ca_bundles.is_empty() && !tls.is_empty() && !scheduler_client.is_empty());

    // Two nodes of 32 CPUs. A gang of four members of 12 runs (two on each node, 8 CPUs left on
    // each); a gang of four of 4 has three members placed and their binds held, waiting for a
    // fourth no node accepts; a gang of two of 16 waits for room no node has.
    let queue = crate::queues::create_queue(&cluster.client, "upgrade", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("upgrade").await;
    let pods = ns.api::<Pod>();
    let gangs = WholeGangs::watch(&cluster, &ns.name);
    create_gang(&ns, &queue, "running", 4, 12, None, None).await;
    bound_eventually(
        "the gang of four of 12 CPUs bound",
        60,
        &pods,
        "running-",
        4,
    )
    .await;

    let mut held = pod_group("held", 4, None);
    held.spec.queue = Some(queue.clone());
    // Longer than the upgrade: the binds stay held across the leader's handover.
    held.spec.schedule_timeout_seconds = Some(600);
    ns.api::<PodGroup>()
        .create(&PostParams::default(), &held)
        .await
        .unwrap();
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("held-{i}"), Some("held"), 4, json!({})),
        )
        .await
        .unwrap();
    }
    let mut stuck = managed_pod("held-3", Some("held"), 4, json!({}));
    stuck.spec.as_mut().unwrap().node_selector =
        Some([("no-such-node".to_owned(), "anywhere".to_owned())].into());
    pods.create(&PostParams::default(), &stuck).await.unwrap();
    eventually("3 bind calls held by the old leader", 60, || async {
        let held = metrics_of(&old_leader_ip)
            .await
            .sum("gangplank_gang_binds_held", &[]);
        (held == 3.0).then_some(())
    })
    .await;

    create_gang(&ns, &queue, "waiting", 2, 16, None, None).await;
    let groups = ns.api::<PodGroup>();
    // Not admitted, for a reason of its own (not while being admitted, nor for want of members).
    let why = eventually("the gang of two of 16 waiting for room", 60, || async {
        let status = groups.get("waiting").await.ok()?.status?;
        let waits = status.conditions.iter().find(|c| {
            c.type_ == "Admitted"
                && c.status == "False"
                && !matches!(c.reason.as_str(), "Admitting" | "NoMembers")
        })?;
        (status.phase.as_str() == "Pending").then(|| waits.message.clone())
    })
    .await;
    eprintln!("the waiting gang waits: {why}");
    assert!(bound_with_prefix(&pods, "waiting-").await.is_empty());
    let specs_before = specs(&cluster, &ns.name).await;

    // As docs/install.md says: the CRDs first (Helm leaves crds/ alone on upgrade), then the
    // chart, with the same values.
    let crds = repo_dir().join("charts/gangplank/crds");
    run(
        "kubectl",
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            crds.to_str().unwrap(),
        ],
    );
    let started = std::time::Instant::now();
    let chart = repo_dir().join("charts/gangplank");
    let values = run_dir().join("chart-values.yaml");
    run(
        "helm",
        &[
            "upgrade",
            RELEASE,
            chart.to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "-f",
            values.to_str().unwrap(),
        ],
    );
    assert_eq!(release(), (format!("gangplank-{current}"), revision + 1));
    let (leader, leader_ip) = rolled_out_to(&cluster, &format!("{repository}:{current}")).await;
    eprintln!(
        "rolled out from {old_leader} to {leader} in {:.0?}",
        started.elapsed()
    );
    assert_ne!(leader, old_leader);

    // The certificates are the ones installed: the webhooks' CA, Gangplank's serving
    // certificate and the scheduler's client certificate, byte for byte.
    assert!(secret_data(&cluster, "gangplank-tls").await == tls);
    assert!(secret_data(&cluster, "gangplank-scheduler-client").await == scheduler_client);
    webhooks_keep_their_ca(&cluster, &ca_bundles).await;
    assert_eq!(specs(&cluster, &ns.name).await, specs_before);

    // The running gang runs on, counted by its group and its queue.
    assert_eq!(bound_with_prefix(&pods, "running-").await.len(), 4);
    eventually(
        "the running gang Running, counted by its queue",
        60,
        || async {
            let group = groups.get("running").await.ok()?.status?;
            let queue = Api::<Queue>::all(cluster.client.clone())
                .get(&queue)
                .await
                .ok()?
                .status?;
            (group.phase.as_str() == "Running" && group.running == 4 && queue.running >= 1)
                .then_some(())
        },
    )
    .await;

    // The scheduler's calls reach the new leader with the client certificate it had. The held
    // gang gets a member that fits for the one that fit nowhere and is bound whole in the room
    // it had, which the new leader did not give the waiting gang, first in line; once the
    // running gang goes, the waiting one is bound whole, then a gang created now.
    let binds_before = binds_ok(&metrics_of(&leader_ip).await);
    pods.delete("held-3", &Default::default()).await.unwrap();
    pods.create(
        &PostParams::default(),
        &managed_pod("held-4", Some("held"), 4, json!({})),
    )
    .await
    .unwrap();
    bound_eventually("the held gang bound whole", 90, &pods, "held-", 4).await;
    for i in 0..4 {
        pods.delete(&format!("running-{i}"), &Default::default())
            .await
            .unwrap();
    }
    bound_eventually("the waiting gang bound whole", 90, &pods, "waiting-", 2).await;
    create_gang(&ns, &queue, "after", 3, 2, None, None).await;
    bound_eventually(
        "a gang created after the upgrade bound whole",
        60,
        &pods,
        "after-",
        3,
    )
    .await;
    let binds = binds_ok(&metrics_of(&leader_ip).await) - binds_before;
    assert!(
        binds >= 9.0,
        "the new leader bound {binds} pods, not the 4 + 2 + 3 members"
    );

    // And back: helm rollback to the release installed first puts its chart and image back,
    // with the same certificates; the gangs stay bound, and the old version's leader binds a
    // gang created then.
    let specs_before = specs(&cluster, &ns.name).await;
    run(
        "helm",
        &[
            "rollback",
            RELEASE,
            &revision.to_string(),
            "--namespace",
            NAMESPACE,
        ],
    );
    assert_eq!(release(), (format!("gangplank-{previous}"), revision + 2));
    let (_, leader_ip) = rolled_out_to(&cluster, &format!("{repository}:{previous}")).await;
    assert!(secret_data(&cluster, "gangplank-tls").await == tls);
    assert!(secret_data(&cluster, "gangplank-scheduler-client").await == scheduler_client);
    webhooks_keep_their_ca(&cluster, &ca_bundles).await;
    assert_eq!(specs(&cluster, &ns.name).await, specs_before);
    for (prefix, count) in [("held-", 4), ("waiting-", 2), ("after-", 3)] {
        assert_eq!(
            bound_with_prefix(&pods, prefix).await.len(),
            count,
            "{prefix}"
        );
    }
    let binds_before = binds_ok(&metrics_of(&leader_ip).await);
    create_gang(&ns, &queue, "back", 2, 2, None, None).await;
    bound_eventually(
        "a gang created after the rollback bound whole",
        60,
        &pods,
        "back-",
        2,
    )
    .await;
    assert!(binds_ok(&metrics_of(&leader_ip).await) - binds_before >= 2.0);

    gangs.assert_never_partly_bound().await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
