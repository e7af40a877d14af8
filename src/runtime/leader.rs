//! Leader election over a `coordination.k8s.io/v1` Lease, so that several replicas can run and
//! one decides. Every replica watches the cluster (its model stays warm for a fast takeover)
//! and serves the webhooks and the metrics port; only the replica that holds the Lease runs
//! the admission loop, the controller, the claim-expiry timer and the scheduler extender
//! ([`crate::server`]). Each take or renewal opens the [`Fence`] until the renew deadline
//! ([`Election::renew_deadline`]) after it was sent, and every write of the leader's parts asks
//! the fence first ([`crate::runtime::fence`]). A leader that fails to renew by then stops leading when
//! the fence closes, before any other replica may take the Lease (its loops and extender stop,
//! held binds are answered with errors, and writes still in progress are refused), and follows
//! until the Lease is free again. So no write of a former leader is sent after another replica
//! may have taken the Lease, unless their clocks run at rates a third apart (the margin is a
//! third of the duration); on shutdown the leader closes the fence and gives the
//! Lease up, so another takes it at its next try ([`Election::retry_every`]) instead of waiting
//! for it to expire.
//!
//! The scheduler reaches the leader only: the leader labels its own pod
//! ([`LEADER_LABEL`]) and the extender's Service selects that label. One
//! task ([`Elector::label_keeper`]) writes the label, retrying with backoff until the pod
//! shows what the elector last wanted: on while leading, off otherwise (a follower takes it
//! off when it starts, as a container restarted after a crash may find it left there, and a
//! leader when it stops leading). A follower does not listen on the extender port, so a call
//! that still reaches it is refused and the scheduler retries the pod.
//!
//! In the sidecar layout (one copy beside each scheduler, `--leader-election-follow` naming the
//! scheduler's own Lease), a copy competes for the Lease only while the scheduler's Lease names
//! the scheduler beside it, and a leader whose scheduler's Lease moves to another node gives
//! Gangplank's Lease up at its next renewal, so the copy beside the new leading scheduler takes
//! it: the scheduler that schedules calls the Gangplank that decides.
//!
//! As in client-go, a Lease counts as expired when its record (holder, renew time) has not
//! changed for its `leaseDurationSeconds` as this replica observed it on its own clock, so the
//! replicas' clocks need not agree. Writes carry the Lease's `resourceVersion`, so of two
//! replicas taking an expired Lease at once only one succeeds.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::fence::Fence;
use crate::runtime::metrics;

/// Label on the pod of the Gangplank replica that holds the leader Lease (`"true"`): the
/// extender's Service selects it, so the scheduler's calls reach the leader only. Re-exported
/// with the other well-known names (`crate::api::labels`).
pub const LEADER_LABEL: &str = "scheduling.gangplank.dev/leader";

/// Where the Lease is and how this replica takes part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease: its pod's name, unique among the replicas and stable
    /// across restarts of its container.
    pub identity: String,
    /// How long a Lease lasts unrenewed before another replica may take it.
    pub duration: Duration,
    /// The pod this replica runs in (namespace, name), to label as the leader's; `None` outside
    /// a pod.
    pub pod: Option<(String, String)>,
    /// The scheduler's leader Lease (namespace, name) when this replica is the sidecar of a
    /// scheduler: it leads only while that Lease names the scheduler beside it.
    pub follow: Option<(String, String)>,
}

impl Election {
    /// How often the leader renews, and a follower tries to take the Lease.
    pub fn retry_every(&self) -> Duration {
        self.duration / 5
    }

    /// How long the leader keeps trying to renew before it gives up leading: well inside the
    /// duration, so it stops before any other replica may take the Lease.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }
}

/// What this replica last saw of the Lease, and when (its own clock).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renewed: Option<Timestamp>,
    duration: Option<i32>,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renewed: spec.renew_time.as_ref().map(|t| t.0),
            duration: spec.lease_duration_seconds,
        }
    }
}

/// One replica's side of the election.
pub struct Elector {
    api: Api<Lease>,
    settings: Election,
    observed: Option<(Record, Instant)>,
    /// Open while this replica may write as the leader; this elector is its one writer.
    fence: Fence,
    /// Whether the leader label should be on this replica's pod ([`Elector::label_keeper`]).
    want_label: watch::Sender<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "lost the leader Lease {namespace}/{name}: not renewed for {seconds}s (last error: {last})"
    )]
    Lost {
        namespace: String,
        name: String,
        seconds: u64,
        last: String,
    },
    #[error(
        "the scheduler beside this replica no longer leads (its Lease {lease} names {holder:?})"
    )]
    SchedulerMoved { lease: String, holder: String },
    #[error("leader Lease {namespace}/{name} is now held by {holder}")]
    Taken {
        namespace: String,
        name: String,
        holder: String,
    },
}

impl Elector {
    pub fn new(client: kube::Client, settings: Election) -> Elector {
        Elector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
            fence: Fence::closed(),
            want_label: watch::Sender::new(false),
        }
    }

    /// The fence this elector opens while it holds the Lease ([`crate::runtime::fence`]).
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Waits until this replica holds the Lease, then labels its pod as the leader's; `false`
    /// if `shutdown` came first.
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        self.want_label.send_replace(false);
        let mut logged = false;
        loop {
            let attempt = match self.scheduler_here().await {
                Ok(true) => self.try_hold().await,
                Ok(false) => Ok(false),
                Err(e) => Err(e),
            };
            match attempt {
                Ok(true) => {
                    tracing::info!(lease = %self.settings.name, identity = %self.settings.identity, "leading");
                    ::metrics::gauge!(metrics::LEADER).set(1.0);
                    self.want_label.send_replace(true);
                    return true;
                }
                Ok(false) if !logged => {
                    let holder = self.holder().unwrap_or_default();
                    tracing::info!(lease = %self.settings.name, %holder, follow = ?self.settings.follow, "following: another replica leads, or the scheduler beside this one does not");
                    logged = true;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.settings.name, error = %e, "failed to read or take the leader Lease")
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep(self.settings.retry_every()) => {}
            }
        }
    }

    /// Renews the Lease until `shutdown`. An error when it could not renew before the fence
    /// closed (the renew deadline after the last renewal was sent) or found another holder: the
    /// caller stops leading at once, and the fence is closed already.
    pub async fn hold(&mut self, shutdown: &CancellationToken) -> Result<(), Error> {
        let mut renewed = Instant::now();
        let mut last = String::new();
        loop {
            let Some(closes) = self.fence.closes_at() else {
                return Err(self.lost(renewed, "not leading".to_owned()));
            };
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.settings.retry_every()) => {}
                () = tokio::time::sleep_until(closes) => return Err(self.lost(renewed, last)),
            }
            let within = closes.min(Instant::now() + self.settings.retry_every());
            let moved = tokio::time::timeout_at(within, self.scheduler_elsewhere()).await;
            if let Ok(Some(holder)) = moved {
                self.release().await;
                let (namespace, name) = self.settings.follow.clone().unwrap_or_default();
                return Err(Error::SchedulerMoved {
                    lease: format!("{namespace}/{name}"),
                    holder,
                });
            }
            match tokio::time::timeout_at(within, self.try_hold()).await {
                Ok(Ok(true)) => renewed = Instant::now(),
                Ok(Ok(false)) => {
                    self.stop_leading();
                    return Err(Error::Taken {
                        namespace: self.settings.namespace.clone(),
                        name: self.settings.name.clone(),
                        holder: self.holder().unwrap_or_default(),
                    });
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".to_owned(),
            }
            if !self.fence.is_open() {
                return Err(self.lost(renewed, last));
            }
        }
    }

    /// Stops leading because the Lease was not renewed since `renewed`; `last`: the last error.
    fn lost(&self, renewed: Instant, last: String) -> Error {
        self.stop_leading();
        Error::Lost {
            namespace: self.settings.namespace.clone(),
            name: self.settings.name.clone(),
            seconds: renewed.elapsed().as_secs(),
            last,
        }
    }

    /// Closes the fence, takes the leader label off and says so in the metrics.
    fn stop_leading(&self) {
        self.fence.close();
        self.want_label.send_replace(false);
        ::metrics::gauge!(metrics::LEADER).set(0.0);
    }

    /// Keeps the leader label on this replica's pod as this elector wants it (on while it
    /// leads, off otherwise), until `shutdown`: the task to run beside the election. Nothing
    /// to do outside a pod.
    pub fn label_keeper(&self, shutdown: CancellationToken) -> impl Future<Output = ()> + 'static {
        let want = self.want_label.subscribe();
        let pod = self.settings.pod.clone();
        let client = self.api.clone().into_client();
        async move {
            let Some((namespace, name)) = pod else {
                return;
            };
            let pods: Api<Pod> = Api::namespaced(client, &namespace);
            let patch = |leading: bool| {
                let (pods, name) = (pods.clone(), name.clone());
                async move {
                    let patch = leader_label_patch(leading);
                    pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                }
            };
            keep_label(want, patch, &shutdown).await;
        }
    }

    /// Whether this replica may lead as far as the scheduler's Lease goes: it follows none, or
    /// that Lease names the scheduler beside it.
    async fn scheduler_here(&self) -> Result<bool, kube::Error> {
        let Some((namespace, name)) = &self.settings.follow else {
            return Ok(true);
        };
        let leases: Api<Lease> = Api::namespaced(self.api.clone().into_client(), namespace);
        let holder = leases
            .get_opt(name)
            .await?
            .and_then(|l| l.spec?.holder_identity);
        Ok(scheduler_beside(holder.as_deref(), &self.settings.identity))
    }

    /// The holder of the scheduler's Lease when it names another scheduler than the one beside
    /// this replica; `None` while it names this one, or cannot be read (the API server away:
    /// renewing Gangplank's own Lease fails then too, and decides).
    async fn scheduler_elsewhere(&self) -> Option<String> {
        let (namespace, name) = self.settings.follow.as_ref()?;
        let leases: Api<Lease> = Api::namespaced(self.api.clone().into_client(), namespace);
        let lease = leases.get_opt(name).await.ok()?;
        let holder = lease.and_then(|l| l.spec?.holder_identity);
        (!scheduler_beside(holder.as_deref(), &self.settings.identity))
            .then(|| holder.unwrap_or_default())
    }

    fn holder(&self) -> Option<String> {
        self.observed.as_ref().and_then(|(r, _)| r.holder.clone())
    }

    /// Takes or renews the Lease if this replica may: it holds it, nobody does, or the holder
    /// let it expire. `Ok(false)`: another replica holds it (or won the race to take it).
    /// On success the fence is open until the renew deadline after this call began: the
    /// Lease's new record is written no earlier, so no other replica sees it sooner.
    async fn try_hold(&mut self) -> Result<bool, kube::Error> {
        let asked = Instant::now();
        let until = asked + self.settings.renew_deadline();
        let name = self.settings.name.clone();
        let Some(lease) = self.api.get_opt(&name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..Default::default()
                },
                spec: Some(self.spec(None, true)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.fence.open_until(until);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        let now = Instant::now();
        if self.observed.as_ref().map(|(r, _)| r) != Some(&record) {
            self.observed = Some((record.clone(), now));
        }
        let seen_since = self.observed.as_ref().map_or(now, |(_, at)| *at);
        let mine = record.holder.as_deref() == Some(self.settings.identity.as_str());
        let duration = record.duration.map_or(self.settings.duration, |s| {
            Duration::from_secs(s.max(0) as u64)
        });
        let expired = now.duration_since(seen_since) > duration;
        if !(mine || record.holder.is_none() || expired) {
            return Ok(false);
        }
        let taken = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(self.spec(Some(&spec), mine)),
        };
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &taken)
            .await
        {
            Ok(written) => {
                let record = Record::of(&written.spec.unwrap_or_default());
                self.observed = Some((record, Instant::now()));
                self.fence.open_until(until);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The Lease's spec with this replica holding it from now; `renewing`: it already did.
    fn spec(&self, old: Option<&LeaseSpec>, renewing: bool) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let old = old.cloned().unwrap_or_default();
        let transitions = old.lease_transitions.unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(self.settings.duration.as_secs() as i32),
            acquire_time: if renewing && old.acquire_time.is_some() {
                old.acquire_time
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if renewing {
                transitions
            } else {
                transitions + 1
            }),
            ..old
        }
    }

    /// Gives the Lease up (at shutdown, once the leader's work has stopped), so another
    /// replica takes it without waiting for it to expire. The fence closes first: nothing is
    /// written once the Lease may be another's.
    pub async fn release(&mut self) {
        self.stop_leading();
        let Ok(Some(mut lease)) = self.api.get_opt(&self.settings.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.settings.name, "gave up the leader Lease"),
            Err(e) => {
                tracing::warn!(lease = %self.settings.name, error = %e, "failed to give up the leader Lease; it expires on its own")
            }
        }
    }
}

/// Whether the scheduler Lease's `holder` is the scheduler on the host named `identity`:
/// kube-scheduler writes `<host name>_<uuid>` (host names have no `_`).
fn scheduler_beside(holder: Option<&str>, identity: &str) -> bool {
    holder
        .and_then(|h| h.rsplit_once('_'))
        .is_some_and(|(host, _)| host == identity)
}

/// The first wait before the leader label is patched again after a failure; it doubles up to
/// [`LABEL_RETRY_MAX`].
pub const LABEL_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two tries of the leader label.
pub const LABEL_RETRY_MAX: Duration = Duration::from_secs(30);

/// Patches the leader label to what `want` says (on: `true`) with `patch`, retrying with
/// backoff until a patch succeeds, and again each time `want` changes; until `shutdown`. A
/// failed patch cannot leave the extender's Service without endpoints for a whole term.
async fn keep_label<F, P>(
    mut want: watch::Receiver<bool>,
    mut patch: F,
    shutdown: &CancellationToken,
) where
    F: FnMut(bool) -> P,
    P: Future<Output = Result<(), kube::Error>>,
{
    'wanted: loop {
        let leading = *want.borrow_and_update();
        let mut wait = LABEL_RETRY_FIRST;
        loop {
            let result = tokio::select! {
                () = shutdown.cancelled() => return,
                result = patch(leading) => result,
            };
            let Err(e) = result else { break };
            tracing::warn!(leading, error = %e, retry_in = ?wait, "failed to label Gangplank's own pod; the extender's Service selects the leader by it");
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(LABEL_RETRY_MAX);
            if want.has_changed().unwrap_or(false) {
                continue 'wanted;
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = want.changed() => if changed.is_err() { return },
        }
    }
}

/// The merge patch that puts the leader label on a pod (`leading`) or takes it off.
fn leader_label_patch(leading: bool) -> serde_json::Value {
    let value = if leading {
        serde_json::Value::from("true")
    } else {
        serde_json::Value::Null
    };
    serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_labels_its_pod_and_a_follower_takes_the_label_off() {
        assert_eq!(
            leader_label_patch(true),
            serde_json::json!({"metadata": {"labels": {"scheduling.gangplank.dev/leader": "true"}}})
        );
        assert_eq!(
            leader_label_patch(false),
            serde_json::json!({"metadata": {"labels": {"scheduling.gangplank.dev/leader": null}}})
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_leader_label_is_retried_with_backoff_until_set_and_taken_off_on_losing() {
        let calls: std::sync::Arc<std::sync::Mutex<Vec<(bool, Instant)>>> = Default::default();
        let patch = {
            let calls = calls.clone();
            move |leading: bool| {
                let calls = calls.clone();
                async move {
                    let mut calls = calls.lock().unwrap();
                    calls.push((leading, Instant::now()));
                    if calls.len() <= 3 && leading {
                        return Err(kube::Error::Service("API server unreachable".into()));
                    }
                    Ok(())
                }
            }
        };
        let (want, wanted) = watch::channel(false);
        let shutdown = CancellationToken::new();
        let start = Instant::now();
        let keeper = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { keep_label(wanted, patch, &shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        want.send_replace(true);
        tokio::time::sleep(Duration::from_secs(60)).await;
        want.send_replace(false);
        tokio::time::sleep(Duration::from_secs(1)).await;
        shutdown.cancel();
        keeper.await.unwrap();

        let calls = calls.lock().unwrap();
        let seen: Vec<(bool, u64)> = calls
            .iter()
            .map(|(leading, at)| (*leading, at.duration_since(start).as_millis() as u64))
            .collect();
        assert_eq!(
            seen,
            [
                (false, 0),
                (true, 10),
                (true, 1_010),
                (true, 3_010),
                (false, 60_010)
            ],
            "taken off at start, set after two failures retried 1 s then 2 s later, taken off on losing"
        );
    }

    /// A fake API server holding the Lease: reads answer it, replacements store and echo it;
    /// once `hang` is set, no request is answered (the API server is away).
    fn lease_server(hang: std::sync::Arc<std::sync::atomic::AtomicBool>) -> kube::Client {
        use http_body_util::BodyExt;
        let stored = std::sync::Arc::new(std::sync::Mutex::new(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gangplank", "namespace": "gangplank-system", "resourceVersion": "1"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        })));
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (hang, stored) = (hang.clone(), stored.clone());
            async move {
                if hang.load(std::sync::atomic::Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                if request.method() == http::Method::PUT {
                    let body = request.into_body().collect().await?.to_bytes();
                    *stored.lock().unwrap() = serde_json::from_slice(&body)?;
                }
                let body = serde_json::to_vec(&*stored.lock().unwrap())?;
                Ok::<_, tower::BoxError>(
                    http::Response::builder()
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(body))?,
                )
            }
        });
        kube::Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_renewals_stop_closes_its_fence_and_stops_leading_before_the_lease_expires()
     {
        let hang = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let settings = Election {
            namespace: "gangplank-system".into(),
            name: "gangplank".into(),
            identity: "a".into(),
            duration: Duration::from_secs(15),
            pod: None,
            follow: None,
        };
        let mut elector = Elector::new(lease_server(hang.clone()), settings);
        let fence = elector.fence();
        assert!(!fence.is_open(), "closed before the Lease is taken");
        let shutdown = CancellationToken::new();
        assert!(elector.acquire(&shutdown).await);
        assert!(fence.is_open());
        let holding = tokio::spawn(async move { elector.hold(&shutdown).await });
        // Renewed every 3 s; the API server goes away 7 s in, after the renewal at 6 s.
        tokio::time::sleep(Duration::from_secs(7)).await;
        let last_renewal = fence.closes_at().unwrap() - Duration::from_secs(10);
        hang.store(true, std::sync::atomic::Ordering::SeqCst);
        let lost = holding.await.unwrap().unwrap_err();
        assert!(matches!(lost, Error::Lost { .. }), "{lost}");
        let stopped = Instant::now();
        assert!(!fence.is_open());
        assert_eq!(
            stopped.duration_since(last_renewal),
            Duration::from_secs(10),
            "stops leading when the fence closes, two thirds into the Lease's 15 s"
        );
    }

    #[test]
    fn a_sidecar_leads_only_beside_the_scheduler_its_lease_names() {
        let holder = Some("cp-1_0b6e4c1a-8d2f-4e8e-9a51-6f0d1c2b3a4d");
        assert!(scheduler_beside(holder, "cp-1"));
        assert!(!scheduler_beside(holder, "cp-2"));
        assert!(
            !scheduler_beside(holder, "cp"),
            "a prefix of the host name is another host"
        );
        assert!(
            !scheduler_beside(Some("cp-1"), "cp-1"),
            "not written by a kube-scheduler"
        );
        assert!(!scheduler_beside(None, "cp-1"), "no scheduler leads");
    }

    #[test]
    fn the_leader_renews_often_and_gives_up_well_before_another_may_take_over() {
        let settings = Election {
            namespace: "gangplank-system".into(),
            name: "gangplank".into(),
            identity: "a".into(),
            duration: Duration::from_secs(15),
            pod: None,
            follow: None,
        };
        assert_eq!(settings.retry_every(), Duration::from_secs(3));
        assert_eq!(settings.renew_deadline(), Duration::from_secs(10));
    }
}
