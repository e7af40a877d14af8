//! `gangplank serve`: wires the cache, the extender, the admission webhooks and the metrics
//! port together and runs them until SIGTERM or SIGINT.
//!
//! The extender and the webhooks listen on separate ports because they trust different
//! callers: the extender's verbs bind pods, so its port can demand the scheduler's client
//! certificate (`--extender-client-ca-file`), while the API server calls the webhooks without
//! one.
//!
//! All three ports are served by [`crate::runtime::port::serve`], each within its [`Bounds`].
//!
//! One [`CancellationToken`] is the shutdown signal for everything: the watch loops stop, and
//! the metrics, extender and webhook servers drain ([`crate::runtime::port::DRAIN`]: their
//! HTTP/1 answers tell clients to connect again), then stop accepting and give open requests
//! [`crate::runtime::port::SHUTDOWN_GRACE`] to finish (a bind in flight should complete rather than be
//! cut); whatever still runs [`SHUTDOWN_DEADLINE`] after the signal is named in an error and
//! left behind ([`crate::shutdown`]). If any part fails (a port already taken, unreadable certificates, the admission loop
//! or the controller ending or panicking), the token is cancelled too, so the process exits
//! instead of running half-alive.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::cache::stores::{Stores, Writers};
use crate::cache::{self, Cache, Mirror};
use crate::config::ServeArgs;
use crate::extender::{self, Capture, Extender, KubeBinder, Permits};
use crate::fence::{self, Fence};
use crate::runtime::connections::Bounds;
use crate::runtime::port::serve;
use crate::shutdown::Parts;
use crate::{admission_loop, batch, build, controller, health, leader, metrics, tls, webhooks};

/// How long the whole process may take to stop after the shutdown signal before it exits
/// with an error naming the parts still running: the extender's grace plus time to give the
/// Lease up, within the kubelet's default grace of 30 s.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(25);

/// How long the admission loop may go without waking before `/livez` fails: it wakes at least
/// every 5 s, and a pass takes seconds at 100,000 pods.
pub const ADMISSION_LOOP_LIMIT: Duration = Duration::from_secs(120);

/// The same for the controller, which wakes at least every 30 s and whose pass may write many
/// statuses through a rate-limited client.
pub const CONTROLLER_LIMIT: Duration = Duration::from_secs(300);

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    args.check()?;
    tls::install_crypto_provider();
    let prometheus = metrics::install()?;
    extender::register_metrics();
    webhooks::register_metrics();
    controller::register_metrics();
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));

    let (client, fenced) = connect(&args).await?;
    let (cache, mirror) = Cache::serving(args.schedulers(), args.growth());
    let extender = extender_from(&args, &cache, &fenced.writes)?;
    let (stores, store_writers) = Stores::new(cache.clone());
    let webhooks = webhooks_from(&args, &stores, &cache, &fenced.fence);
    let webhook_router = webhooks::router(Arc::new(webhooks));
    let parts = Parts::default();
    let leader = Leader::new(&args, fenced, &cache, &stores, extender, &parts);
    let metrics_router = metrics_router(&prometheus, &leader);
    let leading = lead(leader, &shutdown);
    let serving = async {
        let ((), leading, ports) = tokio::join!(
            watch(&parts, mirror, client, stores, store_writers, &shutdown),
            parts.run("leadership", cancel_on_error(leading, &shutdown)),
            serve_ports(
                &parts,
                &args,
                prometheus,
                metrics_router,
                webhook_router,
                &shutdown
            ),
        );
        leading?;
        ports
    };
    tokio::select! {
        result = serving => result?,
        error = parts.overdue(&shutdown, SHUTDOWN_DEADLINE) => return Err(error),
    }
    tracing::info!("stopped");
    Ok(())
}

/// The clients of the leader's parts and the Lease that fences them: every write of the
/// leader's parts goes through a client fenced by the Lease, so a term that lost it makes none
/// after another replica may have taken over (`fence`).
struct Fenced {
    /// `None` without leader election.
    elector: Option<leader::Elector>,
    /// The elector's fence, or one that never closes without leader election.
    fence: Fence,
    writes: kube::Client,
    /// Does not retry HTTP 429 ([`admission_loop::evictions::Reclaimer::new`]).
    evictions: kube::Client,
}

/// The process's clients: the one its watches read with, and the leader's [`Fenced`] ones.
async fn connect(args: &ServeArgs) -> anyhow::Result<(kube::Client, Fenced)> {
    let config = kube::Config::infer()
        .await
        .context("failed to read the Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
    let client = kube::Client::try_from(config.clone())
        .context("failed to create Kubernetes client (in-cluster config or KUBECONFIG)")?;
    let elector = args
        .leader_election()
        .map(|settings| leader::Elector::new(client.clone(), settings));
    let fence = elector
        .as_ref()
        .map_or_else(Fence::always, leader::Elector::fence);
    let writes = fence::client(config.clone(), &fence)
        .context("failed to create Kubernetes client (in-cluster config or KUBECONFIG)")?;
    let mut config = config;
    // Evictions answer 429 when a PodDisruptionBudget says not now; the default client retries
    // 429s for minutes, which would stall the admission loop. Reclaim handles them itself.
    config.default_retry = false;
    let evictions = fence::client(config, &fence)
        .context("failed to create Kubernetes client (in-cluster config or KUBECONFIG)")?;
    let fenced = Fenced {
        elector,
        fence,
        writes,
        evictions,
    };
    Ok((client, fenced))
}

/// The extender, binding through `client`; with --capture-dir, it captures every request body.
fn extender_from(
    args: &ServeArgs,
    cache: &Cache,
    client: &kube::Client,
) -> anyhow::Result<Extender> {
    let extender = Extender::new(
        cache.clone(),
        Arc::new(KubeBinder::new(client.clone())),
        args.gang_settings(),
    );
    let Some(dir) = &args.capture_dir else {
        return Ok(extender);
    };
    let capture = Capture::open(dir)
        .with_context(|| format!("failed to open capture directory {}", dir.display()))?;
    tracing::warn!(dir = %dir.display(), "capturing every extender request body");
    Ok(extender.with_capture(capture))
}

/// The admission webhooks; with --admit-on-arrival, they admit on arrival through the
/// leader's ledger, fenced by `fence`.
fn webhooks_from(
    args: &ServeArgs,
    stores: &Arc<Stores>,
    cache: &Cache,
    fence: &Fence,
) -> webhooks::Webhooks {
    let settings = webhooks::Settings {
        gate_pods: args.gate_pods,
        place_arrivals: args.place_arrivals,
        schedulers: args.schedulers(),
        ..Default::default()
    };
    let webhooks = webhooks::Webhooks::new(stores.clone(), settings);
    if !args.admit_on_arrival {
        return webhooks;
    }
    webhooks.with_arrivals(Arc::new(webhooks::LeaderArrivals::new(
        cache.ledger(),
        fence.clone(),
    )))
}

/// The metrics port's routes: the probes (the watches synced, the `leader`'s loops awake), the
/// metrics with the queues' series and the batch Jobs' census, and the build.
fn metrics_router(prometheus: &PrometheusHandle, leader: &Leader) -> Router {
    let queue_series: metrics::Extra = Arc::new({
        let (published, census) = (leader.published.clone(), leader.census.clone());
        move |out: &mut String| {
            admission_loop::queue_series(&published, out);
            census.render(out);
        }
    });
    health::router(
        cache::unsynced_watches(leader.cache.clone(), leader.stores.clone()),
        leader.heartbeats.to_vec(),
    )
    .merge(metrics::router(prometheus.clone(), queue_series))
    .merge(build::router())
}

/// The watches every replica keeps until shutdown, leader or not: the cache's (and its
/// mirror) and the webhooks' `stores`'.
async fn watch(
    parts: &Parts,
    mirror: Mirror,
    client: kube::Client,
    stores: Arc<Stores>,
    writers: Writers,
    shutdown: &CancellationToken,
) {
    let changes = mirror.changes();
    tokio::join!(
        parts.run("cache mirror", mirror.run(shutdown.clone())),
        parts.run(
            "cache watches",
            cache::watch::run(client.clone(), changes.clone(), shutdown.clone())
        ),
        parts.run(
            "webhook watches",
            stores.run(writers, client, changes, shutdown.clone())
        ),
    );
}

/// The metrics port (and the metrics' upkeep) and the webhook port, until shutdown; the
/// metrics server's error first.
async fn serve_ports(
    parts: &Parts,
    args: &ServeArgs,
    prometheus: PrometheusHandle,
    metrics_router: Router,
    webhook_router: Router,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let ((), metrics_server, webhook_server) = tokio::join!(
        parts.run(
            "metrics upkeep",
            metrics::run_upkeep(prometheus, shutdown.clone())
        ),
        parts.run(
            "metrics server",
            cancel_on_error(
                serve(
                    "metrics",
                    args.metrics_addr,
                    metrics_router,
                    None,
                    Bounds::METRICS,
                    axum_server::Handle::new(),
                    shutdown.clone()
                ),
                shutdown
            )
        ),
        parts.run(
            "webhook server",
            cancel_on_error(
                serve(
                    "webhooks",
                    args.webhook_addr,
                    webhook_router,
                    args.webhook_tls(),
                    Bounds::WEBHOOKS,
                    axum_server::Handle::new(),
                    shutdown.clone()
                ),
                shutdown
            )
        ),
    );
    metrics_server.context("metrics server failed")?;
    webhook_server.context("webhook server failed")?;
    Ok(())
}

/// What only the leader runs, and what it needs.
struct Leader {
    /// `None` without leader election: lead at once.
    elector: Option<leader::Elector>,
    /// The elector's fence, or one that never closes without leader election.
    fence: Fence,
    /// Fenced by `fence`, as every client of the leader's parts.
    client: kube::Client,
    /// Fenced, and does not retry HTTP 429 ([`admission_loop::evictions::Reclaimer::new`]).
    eviction_client: kube::Client,
    cache: Cache,
    stores: Arc<Stores>,
    published: admission_loop::published::Published,
    extender_router: Router,
    extender_addr: SocketAddr,
    extender_tls: Option<tls::Files>,
    permits: Arc<Permits>,
    /// The admission loop's and the controller's: beaten while a term runs, idle between.
    heartbeats: [Arc<health::Heartbeat>; 2],
    census: batch::Census,
    /// What stand-in pods look like, with --node-autoscaling.
    stand_ins: Option<admission_loop::stand_ins::StandInTemplate>,
    /// With --multikueue-dispatcher.
    multikueue: Option<crate::multikueue::Settings>,
    parts: Parts,
}

impl Leader {
    /// The leader's parts with their clients (`fenced`), the `extender` they serve, and what
    /// they publish (their heartbeats, the admission passes, the batch Jobs' census).
    fn new(
        args: &ServeArgs,
        fenced: Fenced,
        cache: &Cache,
        stores: &Arc<Stores>,
        extender: Extender,
        parts: &Parts,
    ) -> Leader {
        Leader {
            elector: fenced.elector,
            fence: fenced.fence,
            client: fenced.writes,
            eviction_client: fenced.evictions,
            cache: cache.clone(),
            stores: stores.clone(),
            published: admission_loop::published::Published::new(),
            permits: extender.permits(),
            extender_router: extender::router(Arc::new(extender)),
            extender_addr: args.extender_addr,
            extender_tls: args.extender_tls(),
            heartbeats: [
                health::Heartbeat::idle("the admission loop", ADMISSION_LOOP_LIMIT),
                health::Heartbeat::idle("the controller", CONTROLLER_LIMIT),
            ],
            census: batch::Census::default(),
            stand_ins: args
                .node_autoscaling
                .then(|| admission_loop::stand_ins::StandInTemplate {
                    namespace: args.leader_election_namespace.clone(),
                    image: args.stand_in_image.clone(),
                    priority_class: args.stand_in_priority_class.clone(),
                }),
            multikueue: args.multikueue_dispatcher(),
            parts: parts.clone(),
        }
    }
}

/// Leads whenever this replica holds the Lease, until shutdown: waits for it, runs a term
/// ([`term`]), and when a term ends because the Lease was lost (not renewed in time, or taken),
/// follows again and waits for the Lease to come free. Gives the Lease up at shutdown, once
/// the term's work has stopped.
async fn lead(mut leader: Leader, shutdown: &CancellationToken) -> anyhow::Result<()> {
    let label = leader
        .elector
        .as_ref()
        .map(|elector| tokio::spawn(elector.label_keeper(shutdown.clone())));
    let led = terms(&mut leader, shutdown).await;
    if let Some(label) = label {
        label.abort();
    }
    led
}

/// [`lead`]'s terms, one after another, until shutdown.
async fn terms(leader: &mut Leader, shutdown: &CancellationToken) -> anyhow::Result<()> {
    loop {
        if let Some(elector) = leader.elector.as_mut()
            && !elector.acquire(shutdown).await
        {
            return Ok(());
        }
        match term(leader, shutdown).await? {
            Some(lost) => {
                tracing::warn!(error = %lost, "stopped leading; following until the Lease is free");
            }
            None => {
                if let Some(elector) = leader.elector.as_mut() {
                    elector.release().await;
                }
                return Ok(());
            }
        }
    }
}

/// One term as the leader: the admission loop, the controller, the batch Job controller, the
/// claim-expiry timer, the extender and (with --multikueue-dispatcher) the MultiKueue
/// dispatcher run, and the Lease is renewed, until shutdown or until the Lease is lost; then
/// held binds are answered with errors (the scheduler retries them) and the term's work
/// stops. A term starts from an empty ledger (no claim, reservation or door of an earlier
/// term) and leaves one. Its parts write through clients fenced by the Lease
/// ([`crate::fence`]), so none writes once the fence closes, even before the term has ended. Returns why the Lease was lost, or `None` at shutdown. A part that fails is an error
/// that shuts the process down.
async fn term(
    leader: &mut Leader,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<leader::Error>> {
    let term = shutdown.child_token();
    leader.cache.ledger().forget();
    for heartbeat in &leader.heartbeats {
        heartbeat.beat();
    }
    let Loops {
        admission_loop,
        controller_loop,
        batch_loop,
        dispatcher,
    } = Loops::spawn(leader, &term);
    let holding = hold_lease(&mut leader.elector, &leader.permits, &term);
    let parts = &leader.parts;
    let dispatching = async {
        match dispatcher {
            Some(task) => supervised(parts, "multikueue dispatcher", task, &term, shutdown).await,
            None => Ok(()),
        }
    };
    let (lost, (), admission_loop, controller_loop, batch_loop, dispatcher, extender_server) = tokio::join!(
        parts.run("lease", holding),
        parts.run(
            "claim expiry",
            extender::expiry::run(leader.cache.ledger(), leader.permits.clone(), term.clone())
        ),
        supervised(parts, "admission loop", admission_loop, &term, shutdown),
        supervised(parts, "controller", controller_loop, &term, shutdown),
        supervised(parts, "batch job controller", batch_loop, &term, shutdown),
        dispatching,
        parts.run(
            "extender server",
            cancel_on_error(
                serve(
                    "extender",
                    leader.extender_addr,
                    leader.extender_router.clone(),
                    leader.extender_tls.clone(),
                    Bounds::EXTENDER,
                    axum_server::Handle::new(),
                    term.clone()
                ),
                shutdown
            )
        ),
    );
    for heartbeat in &leader.heartbeats {
        heartbeat.rest();
    }
    // A follower decides nothing and admits nothing on arrival: what this term left in the
    // ledger (the door, arrivals, claims) is forgotten, not kept until the next term.
    leader.cache.ledger().forget();
    admission_loop?;
    controller_loop?;
    batch_loop?;
    dispatcher?;
    extender_server.context("extender server failed")?;
    Ok(lost)
}

/// The loops of one term, spawned: the admission loop, the controller, the batch Job
/// controller and, with --multikueue-dispatcher, the MultiKueue dispatcher.
struct Loops {
    admission_loop: tokio::task::JoinHandle<()>,
    controller_loop: tokio::task::JoinHandle<()>,
    batch_loop: tokio::task::JoinHandle<()>,
    dispatcher: Option<tokio::task::JoinHandle<()>>,
}

impl Loops {
    fn spawn(leader: &Leader, term: &CancellationToken) -> Loops {
        let [admission_beat, controller_beat] = leader.heartbeats.clone();
        let admission_loop = tokio::spawn(admission_loop::run(
            admission_loop::Clients {
                writes: leader.client.clone(),
                evictions: leader.eviction_client.clone(),
                fence: leader.fence.clone(),
            },
            leader.stand_ins.clone(),
            leader.cache.clone(),
            leader.published.clone(),
            admission_beat,
            term.clone(),
        ));
        let controller_loop = tokio::spawn(controller::run(
            leader.client.clone(),
            leader.cache.clone(),
            leader.stores.clone(),
            leader.published.clone(),
            controller_beat,
            term.clone(),
        ));
        let batch_loop = tokio::spawn(batch::run(
            leader.client.clone(),
            leader.census.clone(),
            term.clone(),
        ));
        let dispatcher = leader.multikueue.clone().map(|settings| {
            tokio::spawn(crate::multikueue::run(
                leader.client.clone(),
                leader.stores.clone(),
                settings,
                term.clone(),
            ))
        });
        Loops {
            admission_loop,
            controller_loop,
            batch_loop,
            dispatcher,
        }
    }
}

/// Holds the Lease for the term (without an elector, until the term ends), then ends the
/// term and fails the held binds (the scheduler retries them); why the Lease was lost, if it
/// was.
async fn hold_lease(
    elector: &mut Option<leader::Elector>,
    permits: &Permits,
    term: &CancellationToken,
) -> Option<leader::Error> {
    let lost = match elector.as_mut() {
        Some(elector) => elector.hold(term).await.err(),
        None => {
            term.cancelled().await;
            None
        }
    };
    term.cancel();
    permits.fail_all(
        "this Gangplank stopped leading or is shutting down; the scheduler will retry the gang",
    );
    lost
}

async fn cancel_on_error<T>(
    task: impl Future<Output = anyhow::Result<T>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<T> {
    let result = task.await;
    if let Err(e) = &result {
        tracing::error!(error = format!("{e:#}"), "shutting down");
        shutdown.cancel();
    }
    result
}

/// [`supervise`]s one of a term's loops, counted in `parts` under its name while it runs.
async fn supervised(
    parts: &Parts,
    name: &'static str,
    task: tokio::task::JoinHandle<()>,
    term: &CancellationToken,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    parts
        .run(name, cancel_on_error(supervise(name, task, term), shutdown))
        .await
}

/// Waits for a background loop that should run until shutdown: one that ends before (it
/// returned or panicked) is an error, so the process exits and is restarted rather than run on
/// without it.
async fn supervise(
    name: &'static str,
    task: tokio::task::JoinHandle<()>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let ended = task.await;
    if shutdown.is_cancelled() {
        return Ok(());
    }
    match ended {
        Ok(()) => anyhow::bail!("the {name} stopped before shutdown"),
        Err(e) => anyhow::bail!("the {name} failed: {e}"),
    }
}

/// Cancels `shutdown` on SIGTERM (kubelet) or SIGINT (Ctrl-C).
async fn cancel_on_signal(shutdown: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::error!(error = %e, "failed to listen for SIGTERM; shutting down");
            shutdown.cancel();
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_loop_that_panics_stops_the_process() {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(async { panic!("bug") });
        let err = cancel_on_error(supervise("admission loop", task, &shutdown), &shutdown)
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("the admission loop failed: "),
            "{err}"
        );
        assert!(shutdown.is_cancelled(), "every other part is told to stop");
    }

    #[tokio::test]
    async fn a_loop_that_returns_before_shutdown_stops_the_process() {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(async {});
        let err = cancel_on_error(supervise("controller", task, &shutdown), &shutdown)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "the controller stopped before shutdown");
        assert!(shutdown.is_cancelled());
    }

    #[tokio::test]
    async fn a_loop_that_returns_at_shutdown_is_fine() {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { shutdown.cancelled().await }
        });
        shutdown.cancel();
        supervise("controller", task, &shutdown).await.unwrap();
    }
}
