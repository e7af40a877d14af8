//! End-to-end load run against the local control plane (`e2e/up`): creates pods as fast as the
//! API server takes them, a share of them in gangs (PodGroups of `--gang-size`, Gangplank's or
//! Kubernetes' own: `--gangs`), and measures
//! how long the stock scheduler (with or without Gangplank, per `e2e/up --mode`) takes to bind
//! them all. `e2e/load-compare` runs it for each mode on the same cluster shape and prints the
//! ratios.
//!
//! Two variants: `live` creates the pods while the scheduler runs and times from the first
//! create (what users see); `preloaded` expects the scheduler stopped, creates the pods, waits
//! until no pod carries a scheduling gate, runs `--after-create` (which starts the scheduler)
//! and times from there (scheduling alone).
//!
//! Bind times come from a watch on the pods (the client's clock, when it first sees
//! `spec.nodeName`). Around the timed part it reads the API server's own counters
//! (`apiserver_request_total` and request seconds by verb and resource, with the 429s the
//! API server's priority and fairness answered counted again apart, webhook calls by name)
//! and the CPU seconds and peak resident memory of the processes named by `--pid`, over the
//! whole run and over the timed part alone (`scheduling_cpu_seconds` and
//! `scheduling_api_requests`; the same for `live`).
//! Once all are bound it tallies the namespace's Events by component and reason (counting
//! repeats), and the scheduler's `FailedScheduling` messages with digits hidden: what made the
//! scheduler try a pod again.
//!
//! Output: one JSON line with all of it, for the comparison script.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use gangplank::api::{PodGroup, PodGroupSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The cluster's kubeconfig (e2e/.run/kubeconfig).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: std::path::PathBuf,
    /// Pods to create.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Share of the pods that are members of gangs, in percent.
    #[arg(long, default_value_t = 33)]
    gang_percent: usize,
    /// Members per gang (minMember).
    #[arg(long, default_value_t = 8)]
    gang_size: usize,
    /// Concurrent create calls.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Label for the output line (the e2e/up mode).
    #[arg(long, default_value = "unknown")]
    mode: String,
    /// Whose PodGroups the gangs are: `gangplank` (`scheduling.gangplank.dev`, members labelled
    /// with the group: Gangplank holds their binds until quorum) or `workload-api` (Kubernetes'
    /// `scheduling.k8s.io/v1beta1`, members naming it in `spec.schedulingGroup` and labelled
    /// with the `default` queue: Gangplank admits them and the scheduler's PodGroup cycle places
    /// them; needs the `GenericWorkload` feature gate).
    #[arg(long, default_value = "gangplank")]
    gangs: String,
    /// `live` or `preloaded` (see the module docs).
    #[arg(long, default_value = "live")]
    variant: String,
    /// Shell command run once every pod exists and none is gated (preloaded: starts the scheduler).
    #[arg(long)]
    after_create: Option<String>,
    /// NAME=PID of a process whose CPU seconds and peak memory to report (repeatable), or
    /// NAME=@FILE to read the PID from FILE at each reading (a process `--after-create` starts).
    #[arg(long = "pid")]
    pids: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        matches!(args.variant.as_str(), "live" | "preloaded"),
        "--variant must be live or preloaded, not {}",
        args.variant
    );
    anyhow::ensure!(
        matches!(args.gangs.as_str(), "gangplank" | "workload-api"),
        "--gangs must be gangplank or workload-api, not {}",
        args.gangs
    );
    let client = common::client(&args.kubeconfig).await?;
    let processes = Processes::parse(&args.pids)?;

    let ns_name = format!("load-{}", std::process::id());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns_name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    wait_for_default_service_account(&client, &ns_name).await?;

    let gang_pods = args.pods * args.gang_percent / 100 / args.gang_size * args.gang_size;
    let gangs = gang_pods / args.gang_size;
    let upstream = args.gangs == "workload-api";
    for g in 0..gangs {
        create_gang(
            &client,
            &ns_name,
            &format!("gang-{g}"),
            args.gang_size,
            upstream,
        )
        .await?;
    }
    if upstream {
        // As with Gangplank's own gangs, each gang's Gangplank PodGroup exists before its pods:
        // the run then times placement, not the controller's first pass.
        let mirrors: Api<PodGroup> = Api::namespaced(client.clone(), &ns_name);
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        while mirrors.list(&Default::default()).await?.items.len() < gangs {
            anyhow::ensure!(
                Instant::now() < deadline,
                "Gangplank made no PodGroup for every gang"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns_name);
    let seen = Seen::watch(pods.clone());
    let api_before = ApiCounters::read(&client).await?;
    let cpu_before = processes.cpu_seconds();
    let started = Instant::now();
    let width = args.pods.saturating_sub(1).to_string().len();
    let created = stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            let gang = (i < gang_pods).then(|| format!("gang-{}", i / args.gang_size));
            let name = format!("p-{i:0width$}");
            async move {
                pods.create(&PostParams::default(), &pod(name, gang, upstream))
                    .await
            }
        })
        .buffer_unordered(args.concurrency)
        .filter(|r| std::future::ready(r.is_ok()))
        .count()
        .await;
    let create_seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        created == args.pods,
        "only {created} of {} pods created",
        args.pods
    );
    let deadline = started + Duration::from_secs(args.timeout);

    let (timed_from, cpu_at_start, api_at_start) = if args.variant == "preloaded" {
        seen.wait(deadline, |s| s.known == args.pods && s.gated == 0)
            .await;
        if let Some(command) = &args.after_create {
            let status = std::process::Command::new("bash")
                .args(["-c", command])
                .status()?;
            anyhow::ensure!(status.success(), "--after-create failed: {status}");
        }
        let api_at_start = ApiCounters::read(&client).await?;
        (Instant::now(), processes.cpu_seconds(), api_at_start)
    } else {
        (started, cpu_before.clone(), api_before.clone())
    };
    let bound = seen
        .wait(deadline, |s| s.bound.len() == args.pods)
        .await
        .bound
        .len();
    let all_bound_seconds = timed_from.elapsed().as_secs_f64();
    let api_at_end = ApiCounters::read(&client).await?;
    let scheduling_api = api_at_end.clone().minus(&api_at_start);
    let api = api_at_end.minus(&api_before);
    let cpu_at_end = processes.cpu_seconds();
    let scheduling_cpu = cpu_at_end.clone().minus(&cpu_at_start);
    let cpu = cpu_at_end.minus(&cpu_before);
    let spread = seen.gang_spread_ms(gangs, args.gang_size);
    let events = EventTally::of_namespace(&client, &ns_name).await?;

    println!(
        "{}",
        json!({
            "mode": args.mode,
            "variant": args.variant,
            "pods": args.pods,
            "gang_pods": gang_pods,
            "gangs": gangs,
            "bound": bound,
            "create_seconds": round(create_seconds),
            "all_bound_seconds": round(all_bound_seconds),
            "pods_per_second": round(bound as f64 / all_bound_seconds),
            "gang_bind_spread_ms": spread,
            "api_requests": api.requests,
            "api_seconds": api.seconds.into_iter().map(|(k, v)| (k, round(v))).collect::<BTreeMap<_, _>>(),
            "webhook_calls": api.webhooks,
            "scheduling_api_requests": scheduling_api.requests,
            "cpu_seconds": cpu.0.into_iter().map(|(k, v)| (k, round(v))).collect::<BTreeMap<_, _>>(),
            "scheduling_cpu_seconds": scheduling_cpu.0.into_iter().map(|(k, v)| (k, round(v))).collect::<BTreeMap<_, _>>(),
            "peak_rss_mib": processes.peak_rss_mib(),
            "events": events.reasons,
            "failed_scheduling": events.failures,
        })
    );
    Api::<Namespace>::all(client)
        .delete(&ns_name, &DeleteParams::default())
        .await?;
    anyhow::ensure!(
        bound == args.pods,
        "only {bound} of {} pods bound",
        args.pods
    );
    Ok(())
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Creates the gang `name` of `size`: Gangplank's PodGroup, or Kubernetes' when `upstream`.
async fn create_gang(
    client: &Client,
    namespace: &str,
    name: &str,
    size: usize,
    upstream: bool,
) -> anyhow::Result<()> {
    if upstream {
        let gvk = GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup");
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk));
        let group: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}
        }))?;
        api.create(&PostParams::default(), &group).await?;
    } else {
        let mut spec = PodGroupSpec::with_min_member(size as i32);
        spec.schedule_timeout_seconds = Some(60);
        Api::<PodGroup>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &PodGroup::new(name, spec))
            .await?;
    }
    Ok(())
}

/// A pod named `name`: `p-` and its index, zero-padded so that name order is creation order
/// and a gang's members sort together, as an operator's pods of one job do. A member of a
/// Kubernetes PodGroup (`upstream`) names it in `spec.schedulingGroup` and its queue in a label,
/// which brings it to Gangplank's webhook.
fn pod(name: String, gang: Option<String>, upstream: bool) -> Pod {
    let mut labels = serde_json::Map::new();
    let mut spec = json!({"containers": [{"name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]});
    match gang {
        Some(gang) if upstream => {
            labels.insert("scheduling.gangplank.dev/queue".into(), "default".into());
            spec["schedulingGroup"] = json!({"podGroupName": gang});
        }
        Some(gang) => {
            labels.insert("scheduling.gangplank.dev/pod-group".into(), gang.into());
        }
        None => {}
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
        .expect("a valid pod")
}

/// What the watch has shown of the load's pods: when each was first seen bound, and how many
/// exist and carry a scheduling gate now.
#[derive(Default)]
struct Sighting {
    bound: HashMap<String, Instant>,
    gates: HashMap<String, bool>,
    known: usize,
    gated: usize,
}

#[derive(Clone)]
struct Seen(Arc<Mutex<Sighting>>);

impl Seen {
    fn watch(pods: Api<Pod>) -> Seen {
        let seen = Seen(Arc::default());
        let writer = seen.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
            while let Ok(Some(event)) = events.try_next().await {
                if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event {
                    writer.record(&pod);
                }
            }
        });
        seen
    }

    fn record(&self, pod: &Pod) {
        let Some(name) = pod.metadata.name.clone() else {
            return;
        };
        let spec = pod.spec.as_ref();
        let gated = spec
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        let mut s = self.0.lock().expect("not poisoned");
        if spec.and_then(|s| s.node_name.as_ref()).is_some() {
            s.bound.entry(name.clone()).or_insert_with(Instant::now);
        }
        match s.gates.insert(name, gated) {
            None => s.known += 1,
            Some(was) if was => s.gated -= 1,
            Some(_) => {}
        }
        if gated {
            s.gated += 1;
        }
    }

    /// Waits until `done` holds of what was seen, or the deadline passes.
    async fn wait(&self, deadline: Instant, done: impl Fn(&Sighting) -> bool) -> Sighting {
        loop {
            {
                let s = self.0.lock().expect("not poisoned");
                if done(&s) || Instant::now() >= deadline {
                    return Sighting {
                        bound: s.bound.clone(),
                        known: s.known,
                        gated: s.gated,
                        gates: HashMap::new(),
                    };
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Per gang, the time from its first member bound to its last: p50, p99 and max, in ms.
    fn gang_spread_ms(&self, gangs: usize, size: usize) -> Value {
        let s = self.0.lock().expect("not poisoned");
        let mut spreads: Vec<f64> = (0..gangs)
            .filter_map(|g| {
                let times: Vec<Instant> = (g * size..(g + 1) * size)
                    .filter_map(|i| s.bound.get(&format!("p-{i}")).copied())
                    .collect();
                let first = times.iter().min()?;
                let last = times.iter().max()?;
                Some(last.duration_since(*first).as_secs_f64() * 1000.0)
            })
            .collect();
        if spreads.is_empty() {
            return Value::Null;
        }
        spreads.sort_by(f64::total_cmp);
        let at = |q: f64| round(spreads[((spreads.len() - 1) as f64 * q).round() as usize]);
        json!({"p50": at(0.5), "p99": at(0.99), "max": at(1.0)})
    }
}

/// The API server's counters of requests (by verb and resource) and webhook calls (by name).
#[derive(Default, Clone)]
struct ApiCounters {
    requests: BTreeMap<String, u64>,
    seconds: BTreeMap<String, f64>,
    webhooks: BTreeMap<String, u64>,
}

impl ApiCounters {
    async fn read(client: &Client) -> anyhow::Result<ApiCounters> {
        let text = client
            .request_text(http::Request::get("/metrics").body(Vec::new())?)
            .await?;
        let mut counters = ApiCounters::default();
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let Some((name, labels)) = series.split_once('{') else {
                continue;
            };
            let label = |key: &str| {
                labels
                    .split("\",")
                    .filter_map(|kv| kv.split_once("=\""))
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| v.trim_end_matches("\"}").trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            let request = || {
                let sub = label("subresource");
                let resource = label("resource");
                let resource = if sub.is_empty() {
                    resource
                } else {
                    format!("{resource}/{sub}")
                };
                format!("{} {}", label("verb"), resource)
            };
            match name {
                "apiserver_request_total" => {
                    *counters.requests.entry(request()).or_default() += value as u64;
                    if label("code") == "429" {
                        *counters
                            .requests
                            .entry(format!("{} (429)", request()))
                            .or_default() += value as u64;
                    }
                }
                "apiserver_request_duration_seconds_sum" => {
                    *counters.seconds.entry(request()).or_default() += value;
                }
                "apiserver_admission_webhook_admission_duration_seconds_count" => {
                    let key = format!("{} {}", label("type"), label("name"));
                    *counters.webhooks.entry(key).or_default() += value as u64;
                }
                _ => {}
            }
        }
        Ok(counters)
    }

    fn minus(self, before: &ApiCounters) -> ApiCounters {
        fn diff<V: Copy + PartialOrd + Default + std::ops::Sub<Output = V>>(
            after: BTreeMap<String, V>,
            before: &BTreeMap<String, V>,
        ) -> BTreeMap<String, V> {
            after
                .into_iter()
                .map(|(k, v)| {
                    let b = before.get(&k).copied().unwrap_or_default();
                    (k, v - b)
                })
                .filter(|(_, v)| *v > V::default())
                .collect()
        }
        ApiCounters {
            requests: diff(self.requests, &before.requests),
            seconds: diff(self.seconds, &before.seconds),
            webhooks: diff(self.webhooks, &before.webhooks),
        }
    }
}

/// The processes named by `--pid`, read from /proc.
struct Processes(Vec<(String, Pid)>);

/// A process ID, or the file that holds the current one.
enum Pid {
    Fixed(u32),
    File(std::path::PathBuf),
}

impl Pid {
    fn now(&self) -> Option<u32> {
        match self {
            Pid::Fixed(pid) => Some(*pid),
            Pid::File(path) => std::fs::read_to_string(path).ok()?.trim().parse().ok(),
        }
    }
}

#[derive(Clone)]
struct CpuSeconds(BTreeMap<String, f64>);

impl Processes {
    fn parse(pairs: &[String]) -> anyhow::Result<Processes> {
        pairs
            .iter()
            .map(|p| {
                let (name, pid) = p
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--pid {p}: expected NAME=PID or NAME=@FILE"))?;
                let pid = match pid.strip_prefix('@') {
                    Some(file) => Pid::File(file.into()),
                    None => Pid::Fixed(pid.parse()?),
                };
                Ok((name.to_string(), pid))
            })
            .collect::<anyhow::Result<_>>()
            .map(Processes)
    }

    /// Each named process's ID now, leaving out those not running.
    fn running(&self) -> impl Iterator<Item = (&String, u32)> {
        self.0
            .iter()
            .filter_map(|(name, pid)| Some((name, pid.now()?)))
    }

    /// User plus system CPU seconds of each process (fields 14 and 15 of /proc/PID/stat, in
    /// clock ticks of 1/100 s, the value on every Linux this runs on).
    fn cpu_seconds(&self) -> CpuSeconds {
        CpuSeconds(
            self.running()
                .filter_map(|(name, pid)| {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                    let after_name = &stat[stat.rfind(')')? + 2..];
                    let fields: Vec<&str> = after_name.split(' ').collect();
                    let ticks: f64 =
                        fields[11].parse::<f64>().ok()? + fields[12].parse::<f64>().ok()?;
                    Some((name.clone(), ticks / 100.0))
                })
                .collect(),
        )
    }

    /// Peak resident memory (VmHWM) of each process, in MiB.
    fn peak_rss_mib(&self) -> BTreeMap<String, u64> {
        self.running()
            .filter_map(|(name, pid)| {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
                let kib: u64 = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))?
                    .trim()
                    .trim_end_matches(" kB")
                    .parse()
                    .ok()?;
                Some((name.clone(), kib / 1024))
            })
            .collect()
    }
}

impl CpuSeconds {
    fn minus(self, before: &CpuSeconds) -> CpuSeconds {
        CpuSeconds(
            self.0
                .into_iter()
                .map(|(k, v)| {
                    let b = before.0.get(&k).copied().unwrap_or_default();
                    (k, v - b)
                })
                .collect(),
        )
    }
}

/// The load namespace's Events: occurrences by "component reason", and the
/// `FailedScheduling` messages (digits replaced by `N`), with their occurrences.
struct EventTally {
    reasons: BTreeMap<String, u64>,
    failures: BTreeMap<String, u64>,
}

impl EventTally {
    async fn of_namespace(client: &Client, ns: &str) -> anyhow::Result<EventTally> {
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
        let mut tally = EventTally {
            reasons: BTreeMap::new(),
            failures: BTreeMap::new(),
        };
        let mut params = kube::api::ListParams::default().limit(1000);
        loop {
            let page = events.list(&params).await?;
            for event in &page.items {
                let times = event
                    .series
                    .as_ref()
                    .and_then(|s| s.count)
                    .or(event.count)
                    .unwrap_or(1)
                    .max(1) as u64;
                let component = event
                    .reporting_component
                    .clone()
                    .filter(|c| !c.is_empty())
                    .or_else(|| event.source.as_ref().and_then(|s| s.component.clone()))
                    .unwrap_or_default();
                let reason = event.reason.clone().unwrap_or_default();
                if reason == "FailedScheduling" {
                    let message: String = event
                        .message
                        .as_deref()
                        .unwrap_or_default()
                        .chars()
                        .map(|c| if c.is_ascii_digit() { 'N' } else { c })
                        .collect();
                    *tally.failures.entry(message).or_default() += times;
                }
                *tally
                    .reasons
                    .entry(format!("{component} {reason}"))
                    .or_default() += times;
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(tally),
            }
        }
    }
}

async fn wait_for_default_service_account(client: &Client, ns: &str) -> anyhow::Result<()> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), ns);
    for _ in 0..300 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no default ServiceAccount in {ns}")
}
