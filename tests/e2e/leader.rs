//! Two replicas and one Lease: a second `gangplank serve`, started beside the one `e2e/up` runs
//! with the same flags but its own ports and name, follows while the first leads, takes over
//! when the first is killed (the first comes back as a follower), and hands back when it is
//! stopped. And two sidecars of schedulers: each leads only while the scheduler's Lease names
//! the scheduler beside it. The Lease's renewals are served at the API server's leader-election
//! priority level (the chart's FlowSchema `gangplank-leader-election`).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde_json::json;

use crate::queues::{QueueGuard, create_gang, create_queue};
use crate::support::{
    Cluster, Metrics, TestNamespace, bound_eventually, delete_queue, eventually, gangplank_ctl,
    managed_pod, pod_group, run_dir,
};
use gangplank::api::PodGroup;

const LEASE_NAMESPACE: &str = "gangplank-system";
const LEASE: &str = "gangplank";

/// A second Gangplank: the first's flags with its own ports and identity. Killed when dropped.
struct Standby {
    child: Child,
    identity: String,
    metrics_url: String,
    extender_addr: String,
}

impl Standby {
    fn start() -> Standby {
        Standby::launch("standby", &[], false, None)
    }

    /// A second Gangplank named `prefix-<random>`, with `extra` flags. With `shared_extender`,
    /// on the first's extender address, where only the replica that leads listens: as the
    /// `gangplank-extender` Service sends the scheduler to the leader.
    /// With `pod`, as if it ran in that pod of gangplank-system (the downward API's POD_NAME
    /// and POD_NAMESPACE): it labels the pod while it leads.
    fn launch(prefix: &str, extra: &[&str], shared_extender: bool, pod: Option<&str>) -> Standby {
        let args = std::fs::read_to_string(run_dir().join("gangplank.args")).unwrap();
        let mut args: Vec<String> = args.lines().map(str::to_owned).collect();
        let mut own = |flag: &str| {
            let at = args.iter().position(|a| a == flag).unwrap() + 1;
            if !(shared_extender && flag == "--extender-addr") {
                args[at] = format!("127.0.0.1:{}", free_port());
            }
            args[at].clone()
        };
        let extender_addr = own("--extender-addr");
        own("--webhook-addr");
        let metrics_addr = own("--metrics-addr");
        let identity = crate::support::unique(prefix);
        args.extend(["--leader-election-identity".to_owned(), identity.clone()]);
        args.extend(extra.iter().map(|a| a.to_string()));
        let log = std::fs::File::create(run_dir().join(format!("logs/gangplank-{identity}.log")))
            .unwrap();
        let mut command = Command::new(run_dir().join("bin/gangplank"));
        if let Some(pod) = pod {
            command
                .env("POD_NAMESPACE", LEASE_NAMESPACE)
                .env("POD_NAME", pod);
        }
        let child = command
            .args(&args)
            .env("KUBECONFIG", run_dir().join("gangplank.kubeconfig"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("failed to start a second gangplank");
        Standby {
            child,
            identity,
            metrics_url: format!("http://{metrics_addr}"),
            extender_addr,
        }
    }

    async fn metrics(&self) -> Option<crate::support::Metrics> {
        let body = reqwest::get(format!("{}/metrics", self.metrics_url))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        Some(crate::support::Metrics::parse(&body))
    }

    async fn leads(&self) -> Option<bool> {
        Some(self.metrics().await?.sum("gangplank_leader", &[]) == 1.0)
    }

    /// Waits until it answers and follows.
    async fn until_following(&self) {
        eventually(&format!("{} to follow", self.identity), 30, || async {
            (self.leads().await == Some(false)).then_some(())
        })
        .await;
    }

    /// SIGTERM, and wait for it to exit: a graceful stop gives the Lease up.
    /// A standby that has not exited within [`STOP_DEADLINE`] is killed and the test fails.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let deadline = std::time::Instant::now() + STOP_DEADLINE;
        let exited = loop {
            if let Some(exited) = self.child.try_wait().unwrap() {
                break exited;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not exit within {STOP_DEADLINE:?} of SIGTERM (see its log)",
                self.identity
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(exited.success(), "the standby exited with {exited}");
    }
}

/// How long a standby may take to exit after SIGTERM: the extender's grace for requests in
/// flight (`runtime::port::SHUTDOWN_GRACE`, 20 s) and the Lease given up, with room to spare.
const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

impl Drop for Standby {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now, and one this suite has not handed out before: a replica binds
/// its extender port only once it leads, and the kernel may offer that port again meanwhile (a
/// sidecar's metrics port once took its twin's extender port).
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap();
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.ok()??.spec?.holder_identity
}

/// Waits at most `seconds` until the replica named `identity` holds the Lease.
async fn until_held_by(leases: &Api<Lease>, identity: &str, seconds: u64, what: &str) {
    eventually(what, seconds, || async {
        (holder(leases).await? == identity).then_some(())
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_second_replica_follows_takes_over_when_the_leader_dies_and_hands_back_on_stop() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let leader = eventually("a leader holds the Lease", 30, || holder(&leases)).await;
    assert!(
        cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 1.0
    );

    let standby = Standby::start();
    eventually("the standby answers its metrics port", 30, || async {
        standby.leads().await.map(|_| ())
    })
    .await;
    assert_eq!(standby.leads().await, Some(false), "the standby follows");
    assert_eq!(holder(&leases).await.as_deref(), Some(leader.as_str()));
    assert!(
        std::net::TcpStream::connect(&standby.extender_addr).is_err(),
        "a follower does not serve the extender"
    );

    gangplank_ctl("kill");
    let took_over = std::time::Instant::now();
    eventually("the standby leads", 30, || async {
        let leads = standby.leads().await == Some(true);
        let holds = holder(&leases).await.as_deref() == Some(standby.identity.as_str());
        (leads && holds).then_some(())
    })
    .await;
    eprintln!("failover took {:?}", took_over.elapsed());
    eventually("the standby serves the extender", 30, || async {
        std::net::TcpStream::connect(&standby.extender_addr)
            .ok()
            .map(|_| ())
    })
    .await;
    // The first comes back as a follower; its webhooks take pods again, and the new leader's
    // admission loop releases them.
    gangplank_ctl("start");
    assert!(
        cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 0.0
    );
    let ns = cluster.namespace("leader").await;
    let pods = ns.api::<Pod>();
    let labels = json!({"labels": {"scheduling.gangplank.dev/queue": "default"}});
    pods.create(
        &PostParams::default(),
        &managed_pod("solo", None, 1, labels),
    )
    .await
    .unwrap();
    eventually(
        "the new leader releases the pod from the gate",
        30,
        || async {
            let pod = pods.get("solo").await.ok()?;
            let gates = pod.spec?.scheduling_gates.unwrap_or_default();
            gates.is_empty().then_some(())
        },
    )
    .await;

    // The standby's graceful stop hands the Lease back; the first, leading again, serves the
    // extender the scheduler calls, and the pod is bound.
    standby.stop();
    eventually("the first leads again", 30, || async {
        let leads = cluster
            .gangplank_metrics()
            .await
            .sum("gangplank_leader", &[])
            == 1.0;
        let holds = holder(&leases).await.as_deref() == Some(leader.as_str());
        (leads && holds).then_some(())
    })
    .await;
    bound_eventually(
        "the pod bound through the first's extender",
        60,
        &pods,
        "solo",
        1,
    )
    .await;
    ns.delete().await;
}

/// The scheduler's Lease as kube-scheduler writes it: `<host>_<uuid>`.
fn scheduler_lease(host: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": format!("{host}_{}", crate::support::unique("uuid")),
            "leaseDurationSeconds": 15,
        },
    }))
    .unwrap()
}

/// Brings the suite's Gangplank back and removes the test's scheduler Lease, also when the
/// test fails.
struct SidecarsGuard;

impl Drop for SidecarsGuard {
    fn drop(&mut self) {
        let run = run_dir();
        let _ = Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args([
                "-n",
                "kube-system",
                "delete",
                "lease",
                "kube-scheduler",
                "--ignore-not-found",
            ])
            .status();
        gangplank_ctl("start");
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_sidecar_leads_only_while_the_scheduler_beside_it_leads() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let schedulers: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
    // The suite's Gangplank gives its Lease up; two sidecars take part instead.
    gangplank_ctl("stop");
    let _guard = SidecarsGuard;
    let follow = ["--leader-election-follow", "kube-system/kube-scheduler"];
    let a = Standby::launch("side-a", &follow, false, None);
    let b = Standby::launch("side-b", &follow, false, None);
    schedulers
        .create(&PostParams::default(), &scheduler_lease(&a.identity))
        .await
        .unwrap();
    eventually(
        "the sidecar beside the leading scheduler leads",
        30,
        || async {
            let holds = holder(&leases).await.as_deref() == Some(a.identity.as_str());
            (holds && a.leads().await == Some(true)).then_some(())
        },
    )
    .await;
    assert_eq!(b.leads().await, Some(false), "the other sidecar follows");

    // The scheduler's Lease moves to the other node: its sidecar takes over.
    let moved = std::time::Instant::now();
    let mut lease = schedulers.get("kube-scheduler").await.unwrap();
    lease.spec = scheduler_lease(&b.identity).spec;
    schedulers
        .replace("kube-scheduler", &PostParams::default(), &lease)
        .await
        .unwrap();
    eventually("the sidecar beside the new scheduler leads", 30, || async {
        let holds = holder(&leases).await.as_deref() == Some(b.identity.as_str());
        let only_b = b.leads().await == Some(true) && a.leads().await == Some(false);
        (holds && only_b).then_some(())
    })
    .await;
    eprintln!("the lead followed the scheduler in {:?}", moved.elapsed());
    b.stop();
    a.stop();
}

/// How many times the campaign kills the leader: `GP_LEADER_KILLS`, or 3 (the suite's run;
/// `e2e/campaign` runs 20).
fn leader_kills() -> usize {
    std::env::var("GP_LEADER_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
}

/// Gangs of the campaign's stream: 4 members of 2 CPUs that run 4 s once all are bound.
const STREAM_GANG: usize = 4;

/// Creates a gang `s<i>` every second in `queue` until `stop`; returns how many it made. The
/// webhooks are registered at the suite's Gangplank, so while it is killed creations are
/// refused (they fail closed): each is tried again until it is made.
async fn stream_of_gangs(
    ns: &TestNamespace,
    queue: &str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> usize {
    let mut made = 0;
    while !*stop.borrow() {
        let name = format!("s{made:03}");
        let mut group = pod_group(&name, STREAM_GANG as i32, None);
        group.spec.queue = Some(queue.to_owned());
        create_until_made(&ns.api::<PodGroup>(), &group).await;
        let run_for = json!({"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "4s"}});
        for i in 0..STREAM_GANG {
            let member = managed_pod(&format!("{name}-{i}"), Some(&name), 2, run_for.clone());
            create_until_made(&ns.api::<Pod>(), &member).await;
        }
        made += 1;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    made
}

/// Creates `object`, again after each refusal, for at most a minute; one that exists already
/// (a create whose answer was lost) counts as made.
async fn create_until_made<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    eventually(&format!("{name} to be created"), 60, || async {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Some(()),
            Err(_) => None,
        }
    })
    .await;
}

/// When each pod of a namespace was first seen bound (`spec.nodeName` set), on the test's clock,
/// by a watch started before the pods exist: each time is within the watch's delay (a local API
/// server's, milliseconds) of the Binding. (A finished pod's `PodScheduled` condition has been
/// seen gone, so the times do not rest on it.) The watch stops when this is dropped.
struct BindTimes {
    seen: Arc<Mutex<BTreeMap<String, Instant>>>,
    listed: Arc<AtomicBool>,
    watch: tokio::task::JoinHandle<()>,
}

impl BindTimes {
    /// Starts watching `pods`, and waits until the watch has listed them.
    async fn watch(pods: &Api<Pod>) -> BindTimes {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let listed = Arc::new(AtomicBool::new(false));
        let events = watcher(pods.clone(), watcher::Config::default()).default_backoff();
        let watch = tokio::spawn({
            let (seen, listed) = (seen.clone(), listed.clone());
            async move {
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    let pod = match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                        Ok(watcher::Event::InitDone) => {
                            listed.store(true, Ordering::SeqCst);
                            continue;
                        }
                        _ => continue,
                    };
                    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                        let name = pod.metadata.name.unwrap_or_default();
                        let mut seen = seen.lock().unwrap();
                        seen.entry(name).or_insert_with(Instant::now);
                    }
                }
            }
        });
        let times = BindTimes {
            seen,
            listed,
            watch,
        };
        eventually("the watch of bindings to list the pods", 30, || async {
            times.listed.load(Ordering::SeqCst).then_some(())
        })
        .await;
        times
    }

    /// Per gang of the stream (by name before `-`), when each member was seen bound.
    fn by_gang(&self) -> BTreeMap<String, Vec<Instant>> {
        let mut gangs: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
        for (name, at) in self.seen.lock().unwrap().iter() {
            let gang = name.split('-').next().unwrap_or_default().to_owned();
            gangs.entry(gang).or_default().push(*at);
        }
        gangs
    }
}

impl Drop for BindTimes {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// The most a gang's members may be seen bound apart: Gangplank binds a gang's members
/// together once the last is placed (seconds apart would mean the gang ran partly).
const BIND_SPREAD: Duration = Duration::from_secs(5);

/// The longest a failover may take from the kill to another replica holding the Lease: the
/// Lease's duration (a follower counts it expired that long after it last saw it renewed), two
/// of the follower's tries (a fifth of the duration apart: one to see the last renewal, one to
/// find the Lease expired), and 2 s for the API calls and this test's polling.
fn failover_bound(lease: Duration) -> Duration {
    lease + lease * 2 / 5 + Duration::from_secs(2)
}

/// The Lease's duration, as its holder wrote it.
async fn lease_duration(leases: &Api<Lease>) -> Duration {
    let lease = leases.get(LEASE).await.unwrap();
    let seconds = lease.spec.and_then(|s| s.lease_duration_seconds);
    Duration::from_secs(seconds.expect("the Lease has a duration") as u64)
}

/// A kill of the leader: when it was killed, and how long until another replica held the Lease.
struct Kill {
    at: Instant,
    failover: Duration,
}

/// Kills the replica that leads: the suite's Gangplank (then starts it again, to follow) or the
/// standby (then starts another), once the other replica answers and follows (so the failover
/// is a follower's, not a start-up's); waits until the other holds the Lease. What blocks (the
/// kill, e2e/gangplank start waiting for /readyz) runs off the test's tasks, so the watch of
/// bindings and the stream go on meanwhile.
async fn kill_the_leader(
    cluster: &Cluster,
    leases: &Api<Lease>,
    main: &str,
    standby: &mut Option<Standby>,
) -> Kill {
    let before = eventually("a leader", 60, || holder(leases)).await;
    let main_led = before == main;
    if main_led {
        standby.as_ref().unwrap().until_following().await;
    } else {
        eventually("the suite's Gangplank to follow", 60, || async {
            let leads = cluster
                .gangplank_metrics()
                .await
                .sum("gangplank_leader", &[]);
            (leads == 0.0).then_some(())
        })
        .await;
    }
    let at = Instant::now();
    let killed = standby.take_if(|_| !main_led);
    tokio::task::spawn_blocking(move || match killed {
        None => gangplank_ctl("kill"),
        Some(standby) => drop(standby),
    })
    .await
    .unwrap();
    eventually("another replica takes the Lease", 60, || async {
        let now = holder(leases).await?;
        (now != before).then_some(())
    })
    .await;
    let failover = at.elapsed();
    if main_led {
        tokio::task::spawn_blocking(|| gangplank_ctl("start"))
            .await
            .unwrap();
    } else {
        *standby = Some(Standby::launch("standby", &[], true, None));
    }
    Kill { at, failover }
}

// Two threads: the watch of bindings keeps its times while another task waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: run e2e/test"]
async fn killing_the_leader_during_a_stream_of_gangs_leaves_every_gang_whole_and_counted() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let main = eventually("a leader holds the Lease", 30, || holder(&leases)).await;
    let bound = failover_bound(lease_duration(&leases).await);
    let queue = create_queue(&cluster.client, "kills", Default::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("leader-kills").await;
    let pods = ns.api::<Pod>();
    let bind_times = BindTimes::watch(&pods).await;
    let mut standby = Some(Standby::launch("standby", &[], true, None));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut kills = Vec::new();
    let made = {
        let stream = stream_of_gangs(&ns, &queue, stopped);
        let killing = async {
            for _ in 0..leader_kills() {
                kills.push(kill_the_leader(&cluster, &leases, &main, &mut standby).await);
                // Gangs keep coming and running whole under the new leader before the next kill.
                let ran = finished_gangs(&pods).await;
                eventually("two more gangs to run whole", 90, || async {
                    (finished_gangs(&pods).await >= ran + 2).then_some(())
                })
                .await;
            }
            stop.send(true).unwrap();
        };
        let (made, ()) = tokio::join!(stream, killing);
        made
    };
    eventually(
        "every gang of the stream to run whole and finish",
        180,
        || async { (finished_gangs(&pods).await == made).then_some(()) },
    )
    .await;

    let failovers: Vec<Duration> = kills.iter().map(|k| k.failover).collect();
    eprintln!(
        "{} leader kills: failover (kill to a new Lease holder) {failovers:?}, at most {bound:?} allowed",
        kills.len()
    );
    for failover in &failovers {
        assert!(
            *failover <= bound,
            "another replica held the Lease {failover:?} after the kill, more than {bound:?}"
        );
    }
    // Every gang bound whole, its members together. A kill between the Bindings of one gang
    // (Kubernetes binds one pod per request) leaves the members bound before it; the new leader
    // binds the rest together once the scheduler places them again. Nothing binds between a
    // kill and the next leader's term, so a member seen bound before the middle of that gap was
    // bound by the killed leader.
    let gangs = bind_times.by_gang();
    assert_eq!(
        gangs.len(),
        made,
        "every gang of the stream was bound: {gangs:?}"
    );
    // When a member was seen bound, from the kill nearest to it (for the messages).
    let from_kill = |at: &Instant| {
        let kill = kills
            .iter()
            .map(|k| k.at)
            .min_by_key(|&k| k.max(*at) - k.min(*at))
            .unwrap();
        match at.checked_duration_since(kill) {
            Some(after) => format!("{after:.1?} after a kill"),
            None => format!("{:.1?} before a kill", kill - *at),
        }
    };
    let (mut spread, mut widest) = (Duration::ZERO, String::new());
    let mut cut = Vec::new();
    for (gang, times) in &gangs {
        assert_eq!(times.len(), STREAM_GANG, "{gang} was bound whole");
        let when: Vec<String> = times.iter().map(from_kill).collect();
        let mut parts: BTreeMap<usize, Vec<Instant>> = BTreeMap::new();
        for at in times {
            let kills_before = kills.iter().filter(|k| k.at + k.failover / 2 < *at).count();
            parts.entry(kills_before).or_default().push(*at);
        }
        if parts.len() > 1 {
            cut.push(format!("{gang} ({})", when.join(", ")));
        }
        for part in parts.values() {
            let apart = *part.iter().max().unwrap() - *part.iter().min().unwrap();
            if apart > spread {
                (spread, widest) = (apart, format!("{gang} ({})", when.join(", ")));
            }
            assert!(
                apart <= BIND_SPREAD,
                "{gang}'s members were bound {apart:?} apart, more than {BIND_SPREAD:?}: {}",
                when.join(", ")
            );
        }
    }
    eprintln!(
        "{made} gangs, all bound whole; members bound at most {spread:?} apart ({widest}); \
         gangs whose Bindings a kill cut: {cut:?}"
    );
    drop(bind_times);

    // The accounting of the leader now in charge: a gang that keeps running is what the
    // queue's status counts, no more (nothing left over from the killed leaders).
    create_gang(&ns, &queue, "last", STREAM_GANG, 2, None, None).await;
    let queues = kube::Api::<gangplank::api::Queue>::all(cluster.client.clone());
    eventually("the queue to count the running gang alone", 60, || async {
        let status = queues.get(&queue).await.ok()?.status?;
        let cpu = status.allocated.get("cpu")?.0.clone();
        (cpu == (2 * STREAM_GANG).to_string() && status.running == 1).then_some(())
    })
    .await;
    drop(standby);
    until_held_by(&leases, &main, 60, "the suite's Gangplank leads again").await;
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

/// How many of the stream's gangs have all their members succeeded.
async fn finished_gangs(pods: &Api<Pod>) -> usize {
    let mut done: std::collections::BTreeMap<String, usize> = Default::default();
    for pod in pods.list(&Default::default()).await.unwrap().items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if name.starts_with('s') && phase == Some("Succeeded") {
            *done
                .entry(name.split('-').next().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
    }
    done.values().filter(|&&n| n == STREAM_GANG).count()
}

/// The `gangplank-extender` Service of `manifests/deployment.yaml`, as shipped.
fn extender_service() -> k8s_openapi::api::core::v1::Service {
    let text =
        std::fs::read_to_string(crate::support::repo_dir().join("manifests/deployment.yaml"))
            .unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|doc| {
            let doc: serde_json::Value = serde::Deserialize::deserialize(doc).ok()?;
            (doc["kind"] == "Service" && doc["metadata"]["name"] == "gangplank-extender")
                .then(|| serde_json::from_value(doc).unwrap())
        })
        .next()
        .expect("deployment.yaml has the gangplank-extender Service")
}

/// A stand-in for a Gangplank replica's pod, run by kwok on a fake node (nothing runs in it:
/// the replica is a process of the test, told this pod is its own); restricted, as
/// gangplank-system enforces.
fn replica_pod(name: &str) -> Pod {
    crate::support::pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE,
                     "labels": {"app.kubernetes.io/name": "gangplank"}},
        "spec": {"nodeName": "kwok-node-0",
                 "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                     "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "gangplank", "image": "gangplank",
                                 "securityContext": {"allowPrivilegeEscalation": false,
                                                     "capabilities": {"drop": ["ALL"]}},
                                 "ports": [{"name": "extender", "containerPort": 8443}]}]}
    }))
}

/// The pods behind the `gangplank-extender` Service now, by name, from its EndpointSlices.
async fn extender_endpoints(
    slices: &Api<k8s_openapi::api::discovery::v1::EndpointSlice>,
) -> Vec<String> {
    let params =
        kube::api::ListParams::default().labels("kubernetes.io/service-name=gangplank-extender");
    let mut names: Vec<String> = slices
        .list(&params)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|s| s.endpoints.unwrap_or_default())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .filter_map(|e| e.target_ref?.name)
        .collect();
    names.sort();
    names
}

/// Deletes what the Service test made in gangplank-system, also when it fails.
struct ServiceGuard;

impl Drop for ServiceGuard {
    fn drop(&mut self) {
        let run = run_dir();
        let _ = Command::new(run.join("bin/kubectl"))
            .arg("--kubeconfig")
            .arg(run.join("kubeconfig"))
            .args([
                "-n",
                LEASE_NAMESPACE,
                "delete",
                "service/gangplank-extender",
                "pod/replica-a",
                "pod/replica-b",
                "--ignore-not-found",
                "--wait=false",
            ])
            .status();
        gangplank_ctl("start");
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_extender_service_sends_the_scheduler_to_the_leaders_pod_only() {
    let cluster = Cluster::connect().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(cluster.client.clone(), LEASE_NAMESPACE);
    // The suite's Gangplank gives its Lease up; two replicas "in" pods take part instead.
    gangplank_ctl("stop");
    let _guard = ServiceGuard;
    services
        .create(&PostParams::default(), &extender_service())
        .await
        .unwrap();
    for name in ["replica-a", "replica-b"] {
        pods.create(&PostParams::default(), &replica_pod(name))
            .await
            .unwrap();
    }
    let a = Standby::launch("a", &[], false, Some("replica-a"));
    until_held_by(&leases, &a.identity, 30, "a leads").await;
    let b = Standby::launch("b", &[], false, Some("replica-b"));
    eventually("the Service selecting a's pod alone", 60, || async {
        (extender_endpoints(&slices).await == ["replica-a"]).then_some(())
    })
    .await;
    b.until_following().await;

    // a dies; b takes over and labels its pod. a's container comes back (as the kubelet
    // restarts it) and takes the label off its own pod as it starts to follow.
    drop(a);
    until_held_by(&leases, &b.identity, 60, "b leads").await;
    let a = Standby::launch("a", &[], false, Some("replica-a"));
    eventually("the Service selecting b's pod alone", 60, || async {
        (extender_endpoints(&slices).await == ["replica-b"]).then_some(())
    })
    .await;
    a.until_following().await;
    b.stop();
    a.stop();
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_leaders_lease_renewals_are_served_at_the_leader_election_priority_level() {
    let cluster = Cluster::connect().await;
    let dispatched = async || {
        let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = cluster.client.request_text(request).await.unwrap();
        Metrics::parse(&text).sum(
            "apiserver_flowcontrol_dispatched_requests_total",
            &[
                ("flow_schema", "gangplank-leader-election"),
                ("priority_level", "leader-election"),
            ],
        )
    };
    let before = dispatched().await;
    // The leader renews every fifth of its 15 s Lease.
    eventually(
        "a renewal of Gangplank's Lease dispatched under the FlowSchema gangplank-leader-election",
        30,
        || async { (dispatched().await > before).then_some(()) },
    )
    .await;
}
