//! What every end-to-end test needs from the local control plane started by `e2e/up`: a client,
//! a namespace of its own, polling with a deadline, Gangplank's metrics, and the harness's
//! binaries. Tests never sleep for a fixed time; they poll for the outcome they expect.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// The checkout, as cargo names it when it runs the tests: at run time, since a test binary
/// built in another checkout sharing the target dir is reused as it is.
pub fn repo_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// Where `e2e/up` wrote the cluster's files: `GP_RUN_DIR`, as for the scripts, or `e2e/.run`.
pub fn run_dir() -> PathBuf {
    std::env::var_os("GP_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_dir().join("e2e/.run"))
}

/// Reads `KEY=value` lines from a shell-syntax file such as `e2e/.run/env` or `e2e/versions.env`.
pub fn read_env_file(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "failed to read {}: {e} (is the local control plane up? run e2e/up)",
            path.display()
        )
    });
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// `prefix-<hex nanoseconds>`: a name no earlier run used.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{nanos:x}")
}

/// Deletes a Queue, retrying while the webhook refuses because PodGroups of the test's
/// namespace are still being deleted: a queue left behind with a guarantee would hold room
/// back from every later test.
pub async fn delete_queue(client: &Client, name: &str) {
    let queues = Api::<gangplank::api::Queue>::all(client.clone());
    eventually(&format!("queue {name} deleted"), 60, || async {
        match queues.delete(name, &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            _ => None,
        }
    })
    .await;
}

pub struct Cluster {
    pub client: Client,
    pub env: BTreeMap<String, String>,
}

impl Cluster {
    pub async fn connect() -> Cluster {
        Cluster::connect_to(&run_dir()).await
    }

    /// The cluster `e2e/up` started in run directory `dir` (one of several side by side).
    pub async fn connect_to(dir: &Path) -> Cluster {
        let env = read_env_file(&dir.join("env"));
        let kubeconfig = Kubeconfig::read_from(dir.join("kubeconfig"))
            .expect("failed to read the cluster's kubeconfig (is it up? run e2e/up)");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("failed to load the cluster's kubeconfig");
        let client = Client::try_from(config).expect("failed to build a client");
        Cluster { client, env }
    }

    pub fn url(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("e2e/.run/env has no {key}"))
    }

    /// Creates a namespace named after the test, with a random suffix so reruns never collide.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        self.namespace_named(unique(prefix)).await
    }

    /// A namespace of exactly `name` (for a process e2e/up confines to that namespace),
    /// deleted by [`TestNamespace::delete`]; waits while an earlier one of that name is still
    /// being deleted.
    pub async fn namespace_named(&self, name: String) -> TestNamespace {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
        }))
        .unwrap();
        let namespaces = Api::<Namespace>::all(self.client.clone());
        eventually(&format!("namespace {name} created"), 120, || async {
            match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => Some(()),
                Err(kube::Error::Api(s)) if s.code == 409 => None,
                Err(e) => panic!("failed to create the test namespace {name}: {e}"),
            }
        })
        .await;
        // Pods are refused until the service-account controller made the default account.
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), &name);
        eventually("the namespace's default ServiceAccount", 30, || async {
            accounts.get_opt("default").await.ok().flatten().map(|_| ())
        })
        .await;
        TestNamespace {
            name,
            client: self.client.clone(),
        }
    }

    /// Gangplank's Prometheus metrics, as `name{labels}` → value.
    pub async fn gangplank_metrics(&self) -> Metrics {
        let url = format!("{}/metrics", self.url("GANGPLANK_METRICS_URL"));
        let body = reqwest::get(&url)
            .await
            .and_then(|r| r.error_for_status())
            .unwrap_or_else(|e| panic!("failed to scrape {url}: {e:?}"))
            .text()
            .await
            .expect("failed to read the metrics body");
        Metrics::parse(&body)
    }
}

/// One series of a Prometheus instant query: its labels and value (`NaN` is a value too).
pub type Series = (BTreeMap<String, String>, f64);

impl Cluster {
    /// Runs `expr` on the Prometheus that `e2e/up` started (it scrapes Gangplank every second);
    /// panics with Prometheus's error when the query is refused.
    pub async fn prometheus_query(&self, expr: &str) -> Vec<Series> {
        let url = format!("{}/api/v1/query", self.url("PROMETHEUS_URL"));
        let body = reqwest::Client::new()
            .get(&url)
            .query(&[("query", expr)])
            .send()
            .await
            .unwrap_or_else(|e| panic!("failed to reach Prometheus at {url}: {e}"))
            .text()
            .await
            .expect("failed to read Prometheus's answer");
        let answer: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("Prometheus answered {body:?} to `{expr}`: {e}"));
        assert_eq!(
            answer["status"], "success",
            "Prometheus refused `{expr}`: {body}"
        );
        let result = &answer["data"]["result"];
        let series = result.as_array().map(Vec::as_slice).unwrap_or_default();
        series
            .iter()
            .map(|s| {
                let labels = serde_json::from_value(s["metric"].clone()).unwrap_or_default();
                let value = s["value"][1].as_str().and_then(|v| v.parse().ok());
                (labels, value.unwrap_or(f64::NAN))
            })
            .collect()
    }
}

pub struct TestNamespace {
    pub name: String,
    client: Client,
}

/// A test that fails leaves its namespace behind, and its pods would hold the fake nodes for
/// the tests after it: a panicking test's namespace is deleted on the way out, with kubectl,
/// as the test's runtime cannot be blocked on from `drop`.
impl Drop for TestNamespace {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let run = run_dir();
        describe_failure(&run, &self.name);
        let status = std::process::Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args([
                "delete",
                "namespace",
                &self.name,
                "--wait=true",
                "--timeout=90s",
            ])
            .status();
        eprintln!(
            "deleted the failed test's namespace {}: {status:?}",
            self.name
        );
    }
}

/// Prints what a failed test leaves: the queues, its namespace's groups with the reason each
/// waits, as `gangplank` tells them, its events, and the pods that hold the nodes in every
/// namespace (last, as the longest: CI shows the start of a failure's output).
fn describe_failure(run: &Path, namespace: &str) {
    let kubeconfig = run.join("kubeconfig");
    let show = |what: &str, command: &mut std::process::Command| {
        let output = command.env("KUBECONFIG", &kubeconfig).output();
        match output {
            Ok(o) => eprintln!(
                "{what} when the test failed:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("could not show {what}: {e}"),
        }
    };
    let gangplank = || std::process::Command::new(env!("CARGO_BIN_EXE_gangplank"));
    show("the queues", gangplank().arg("queues"));
    show(
        "the failed test's groups",
        gangplank().args(["groups", "-n", namespace]),
    );
    show(
        "the failed test's events",
        std::process::Command::new(run.join("bin/kubectl")).args(["events", "-n", namespace]),
    );
    show(
        "pods not finished, in every namespace,",
        std::process::Command::new(run.join("bin/kubectl")).args([
            "get",
            "pods",
            "-A",
            "-o",
            "wide",
            "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
        ]),
    );
    // In the Deployment layout Gangplank's logs are its containers' (e2e/lib/podhost.py), and
    // the pod host's own says what it did with them.
    let containers = std::fs::read_dir(run.join("podhost/pods"))
        .map(|dirs| {
            dirs.filter_map(|d| Some(d.ok()?.path().join("container.log")))
                .collect()
        })
        .unwrap_or_else(|_| vec![run.join("logs/gangplank.log")]);
    for log in containers {
        show_warnings(&log, "gangplank");
    }
    for component in ["podhost", "kube-scheduler"] {
        let log = run.join(format!("logs/{component}.log"));
        if component != "podhost" || log.exists() {
            show_warnings(&log, component);
        }
    }
}

/// The last warnings and errors of a component's log: why the scheduler's calls failed, or
/// what Gangplank refused, which its state alone does not say.
fn show_warnings(log: &Path, component: &str) {
    const LAST: usize = 15;
    let Ok(text) = std::fs::read_to_string(log) else {
        return eprintln!("no log of {component} at {}", log.display());
    };
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with('E') || l.starts_with('W') || l.contains("WARN") || l.contains("ERROR")
        })
        .collect();
    let shown = &warnings[warnings.len().saturating_sub(LAST)..];
    eprintln!(
        "the last {} of {} warnings in {}:",
        shown.len(),
        warnings.len(),
        log.display()
    );
    for line in shown {
        eprintln!("  {}", line.chars().take(400).collect::<String>());
    }
}

impl TestNamespace {
    /// The same namespace as seen by another user's `client` (for tests that act as a tenant);
    /// deleting it is still the admin's view's to do.
    pub fn seen_by(&self, client: Client) -> TestNamespace {
        TestNamespace {
            name: self.name.clone(),
            client,
        }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes the namespace and waits until its pods are gone, so the next test finds the
    /// fake nodes empty.
    pub async fn delete(self) {
        let pods: Api<Pod> = self.api();
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
            .expect("failed to delete the test namespace");
        eventually("the test namespace's pods to be deleted", 60, || async {
            let list = pods.list(&Default::default()).await.ok()?;
            list.items.is_empty().then_some(())
        })
        .await;
    }
}

/// Polls `check` every 200 ms until it returns `Some`, for at most `seconds`; panics naming
/// `what` on timeout.
pub async fn eventually<T, F, Fut>(what: &str, seconds: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {seconds}s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits `seconds` and checks on every poll that `check` holds throughout.
pub async fn holds_for(seconds: u64, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    while tokio::time::Instant::now() < deadline {
        assert!(check().await, "{what} stopped holding");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A parsed Prometheus text exposition, keyed by the sample's full name with labels as printed.
#[derive(Debug, Default)]
pub struct Metrics(BTreeMap<String, f64>);

impl Metrics {
    pub fn parse(text: &str) -> Metrics {
        Metrics(
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .filter_map(|l| {
                    let (key, value) = l.rsplit_once(' ')?;
                    Some((key.to_string(), value.parse().ok()?))
                })
                .collect(),
        )
    }

    /// Sum of every sample of `name` whose labels include all of `labels` (`k="v"` pairs).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(key, _)| {
                let (n, rest) = key.split_once('{').unwrap_or((key.as_str(), ""));
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
            })
            .map(|(_, v)| v)
            .sum()
    }
}

/// A pod object from JSON, for tests that read better with the manifest in view.
pub fn pod(manifest: serde_json::Value) -> Pod {
    serde_json::from_value(manifest).expect("test pod manifest is not a valid Pod")
}

/// Waits until the pod is bound and running, and returns it.
pub async fn running(pods: &Api<Pod>, name: &str, seconds: u64) -> Pod {
    eventually(&format!("pod {name} to run"), seconds, || async {
        let pod = pods.get(name).await.ok()?;
        let phase = pod.status.as_ref()?.phase.as_deref()?;
        (phase == "Running" && pod.spec.as_ref()?.node_name.is_some()).then_some(pod)
    })
    .await
}

/// A pod that carries Gangplank's marker resource (as the mutating webhook would add it),
/// optionally in a gang, requesting `cpu` whole cores. `extra` is merged into its metadata
/// (for example annotations).
pub fn managed_pod(name: &str, group: Option<&str>, cpu: u32, extra: serde_json::Value) -> Pod {
    let mut metadata = serde_json::json!({"name": name, "labels": {}});
    if let Some(group) = group {
        metadata["labels"]["scheduling.gangplank.dev/pod-group"] = group.into();
    }
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            metadata[k] = v.clone();
        }
    }
    pod(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {
                "requests": {"cpu": cpu.to_string(), "scheduling.gangplank.dev/managed": "1"},
                "limits": {"scheduling.gangplank.dev/managed": "1"}}}]}
    }))
}

/// A PodGroup of `min_member`, optionally elastic up to `max_member`, with a short schedule
/// timeout so tests of waiting gangs do not wait long.
pub fn pod_group(name: &str, min_member: i32, max_member: Option<i32>) -> gangplank::api::PodGroup {
    let mut spec = gangplank::api::PodGroupSpec::with_min_member(min_member);
    spec.max_member = max_member;
    spec.schedule_timeout_seconds = Some(15);
    gangplank::api::PodGroup::new(name, spec)
}

/// A plain pod that takes a whole 32-CPU node, so the gangs a test makes next have less room.
pub async fn fill_one_node(pods: &Api<Pod>) {
    pods.create(
        &PostParams::default(),
        &pod(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "filler"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "32"}}}]}
        })),
    )
    .await
    .unwrap();
    running(pods, "filler", 60).await;
}

/// Waits until the controller shows PodGroup `name` in `phase`, and returns it.
pub async fn pod_group_in_phase(
    groups: &Api<gangplank::api::PodGroup>,
    name: &str,
    phase: &str,
) -> gangplank::api::PodGroup {
    eventually(&format!("PodGroup {name} {phase}"), 30, || async {
        let group = groups.get(name).await.ok()?;
        let now = group.status.as_ref()?.phase.as_str();
        (now == phase).then_some(group)
    })
    .await
}

/// Waits until PodGroup `name` is gone (the garbage collector deleted it with its owner);
/// `owner` says which, for the timeout message.
pub async fn pod_group_collected(groups: &Api<gangplank::api::PodGroup>, name: &str, owner: &str) {
    eventually(
        &format!("PodGroup {name} collected with {owner}"),
        60,
        || async { groups.get_opt(name).await.unwrap().is_none().then_some(()) },
    )
    .await;
}

/// Waits, for at most `seconds`, until `count` pods of `pods` whose names start with `prefix`
/// are bound; panics naming `what` on timeout.
pub async fn bound_eventually(
    what: &str,
    seconds: u64,
    pods: &Api<Pod>,
    prefix: &str,
    count: usize,
) {
    eventually(what, seconds, || async {
        (bound_with_prefix(pods, prefix).await.len() == count).then_some(())
    })
    .await;
}

/// The names of the pods in `pods` whose name starts with `prefix` and that are bound.
pub async fn bound_with_prefix(pods: &Api<Pod>, prefix: &str) -> Vec<String> {
    bound_where(pods, prefix, |_| true).await
}

/// [`bound_with_prefix`] without the pods being deleted (an eviction's, until they are gone).
pub async fn bound_and_staying_with_prefix(pods: &Api<Pod>, prefix: &str) -> Vec<String> {
    bound_where(pods, prefix, |p| p.metadata.deletion_timestamp.is_none()).await
}

async fn bound_where(pods: &Api<Pod>, prefix: &str, keep: impl Fn(&Pod) -> bool) -> Vec<String> {
    let list = pods
        .list(&Default::default())
        .await
        .expect("failed to list pods");
    list.items
        .into_iter()
        .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter(|p| keep(p))
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Runs `e2e/gangplank ACTION` (stop, kill, start, restart) against this cluster.
pub fn gangplank_ctl(action: &str) {
    let status = std::process::Command::new(repo_dir().join("e2e/gangplank"))
        .arg(action)
        .env("GP_RUN_DIR", run_dir())
        .status()
        .expect("failed to run e2e/gangplank");
    assert!(status.success(), "e2e/gangplank {action} failed");
}

/// Gang `held` of 4 in `ns` (schedule timeout 60 s): three members placed and their binds held,
/// waiting for the fourth, which no node accepts. Returns the namespace's pods.
pub async fn gang_with_three_binds_held(cluster: &Cluster, ns: &TestNamespace) -> Api<Pod> {
    let mut group = pod_group("held", 4, None);
    group.spec.schedule_timeout_seconds = Some(60);
    ns.api::<gangplank::api::PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .unwrap();
    let pods = ns.api::<Pod>();
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("held-{i}"), Some("held"), 4, serde_json::json!({})),
        )
        .await
        .unwrap();
    }
    let mut stuck = managed_pod("held-3", Some("held"), 4, serde_json::json!({}));
    stuck.spec.as_mut().unwrap().node_selector =
        Some([("no-such-node".to_string(), "anywhere".to_string())].into());
    pods.create(&PostParams::default(), &stuck).await.unwrap();
    eventually("3 bind calls held", 30, || async {
        let held = cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_gang_binds_held", &[]);
        (held == 3.0).then_some(())
    })
    .await;
    pods
}

/// Replaces the member of [`gang_with_three_binds_held`] that no node accepts with one that
/// fits, and waits until the whole gang is bound.
pub async fn complete_the_held_gang(pods: &Api<Pod>) {
    pods.delete("held-3", &Default::default()).await.unwrap();
    pods.create(
        &PostParams::default(),
        &managed_pod("held-4", Some("held"), 4, serde_json::json!({})),
    )
    .await
    .unwrap();
    bound_eventually("the whole gang bound", 90, pods, "held", 4).await;
}

/// Runs `e2e/component NAME ACTION` (kill, start, restart) against this cluster.
pub fn component_ctl(name: &str, action: &str) {
    component_ctl_in(&run_dir(), name, action);
}

/// Runs `e2e/component NAME ACTION` against the cluster of run directory `dir`.
pub fn component_ctl_in(dir: &Path, name: &str, action: &str) {
    let status = std::process::Command::new(repo_dir().join("e2e/component"))
        .args([name, action])
        .env("GP_RUN_DIR", dir)
        .status()
        .expect("failed to run e2e/component");
    assert!(status.success(), "e2e/component {name} {action} failed");
}

/// The HTTP status of Gangplank's `/readyz`; `None` when it does not answer.
pub async fn gangplank_readyz(cluster: &Cluster) -> Option<u16> {
    let url = format!("{}/readyz", cluster.url("GANGPLANK_METRICS_URL"));
    reqwest::get(&url).await.ok().map(|r| r.status().as_u16())
}

/// POSTs `body` to the extender's `verb` (filter, bind, ...) with curl, presenting the
/// scheduler's client certificate when `as_scheduler`; returns curl's exit status and what it
/// printed.
pub fn call_extender(
    cluster: &Cluster,
    verb: &str,
    body: &serde_json::Value,
    as_scheduler: bool,
) -> (bool, String) {
    let mut curl = std::process::Command::new("curl");
    curl.args(["-sS", "--max-time", "30", "--cacert"])
        .arg(cluster.url("GANGPLANK_CA_FILE"))
        .args(["-H", "content-type: application/json", "-d"])
        .arg(body.to_string())
        .arg(format!(
            "{}/scheduler/{verb}",
            cluster.url("GANGPLANK_EXTENDER_URL")
        ));
    if as_scheduler {
        curl.arg("--cert")
            .arg(cluster.url("GANGPLANK_SCHEDULER_CLIENT_CERT"))
            .arg("--key")
            .arg(cluster.url("GANGPLANK_SCHEDULER_CLIENT_KEY"));
    }
    let out = curl.output().expect("failed to run curl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Gangs whose binds the suite's Gangplank held until quorum and then bound together, since it
/// started (`gangplank_gang_bind_wait_seconds_count`): a process-wide total, so a test compares
/// it before and after.
pub async fn held_gangs(cluster: &Cluster) -> f64 {
    cluster
        .gangplank_metrics()
        .await
        .sum("gangplank_gang_bind_wait_seconds_count", &[])
}

/// Reasons of the Events about `object` in the namespace, with their messages.
pub async fn events_about(
    client: &Client,
    namespace: &str,
    object: &str,
) -> BTreeMap<String, String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&Default::default())
        .await
        .expect("failed to list events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .filter_map(|e| Some((e.reason?, e.message.unwrap_or_default())))
        .collect()
}

/// Freezes Gangplank (SIGSTOP) until dropped (SIGCONT): its port still accepts connections but
/// nothing answers, as with a hung or unreachable Gangplank.
pub struct Frozen(i32);

impl Frozen {
    pub fn gangplank() -> Frozen {
        let pid: i32 = std::fs::read_to_string(run_dir().join("pids/gangplank.pid"))
            .expect("no Gangplank pid (is the cluster up, and not in baseline mode?)")
            .trim()
            .parse()
            .unwrap();
        signal(pid, "STOP");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

fn signal(pid: i32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .expect("failed to run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Labels the namespace with its default queue.
pub async fn default_queue(cluster: &Cluster, namespace: &str, queue: &str) {
    Api::<Namespace>::all(cluster.client.clone())
        .patch(
            namespace,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {(gangplank::api::labels::QUEUE_LABEL): queue}}})),
        )
        .await
        .unwrap();
}
