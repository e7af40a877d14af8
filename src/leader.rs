//! Leader election over a `coordination.k8s.io/v1` Lease, so that several replicas can run and
//! one decides. Every replica watches the cluster (its model stays warm for a fast takeover)
//! and serves the webhooks and the metrics port; only the replica that holds the Lease runs
//! the admission loop, the controller, the claim-expiry timer and the scheduler extender
//! ([`crate::server`]). A leader that fails to renew within [`Settings::renew_deadline`] stops
//! leading before any other replica may take the Lease (its loops and extender stop, held binds
//! are answered with errors) and follows until the Lease is free again, so two replicas never
//! decide at once for longer than the clock drift between them; on shutdown the leader gives
//! the Lease up, so another takes it at its next try ([`Settings::retry_every`]) instead of
//! waiting for it to expire.
//!
//! The scheduler reaches the leader only: the leader labels its own pod
//! ([`crate::api::labels::LEADER_LABEL`]) and the extender's Service selects that label; a
//! follower takes the label off its pod when it starts (a container restarted after a crash
//! may find it left there) and does not listen on the extender port, so a call that still
//! reaches it is refused and the scheduler retries the pod.
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
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::labels::LEADER_LABEL;
use crate::metrics;

/// Where the Lease is and how this replica takes part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
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

impl Settings {
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
    settings: Settings,
    observed: Option<(Record, Instant)>,
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
    pub fn new(client: kube::Client, settings: Settings) -> Elector {
        Elector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    /// Waits until this replica holds the Lease, then labels its pod as the leader's; `false`
    /// if `shutdown` came first.
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        self.label_pod(false).await;
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
                    self.label_pod(true).await;
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

    /// Renews the Lease until `shutdown`. An error when it could not renew within the renew
    /// deadline or found another holder: the caller stops leading at once.
    pub async fn hold(&mut self, shutdown: &CancellationToken) -> Result<(), Error> {
        let mut renewed = Instant::now();
        let mut last = String::new();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.settings.retry_every()) => {}
            }
            if let Some(holder) = self.scheduler_elsewhere().await {
                ::metrics::gauge!(metrics::LEADER).set(0.0);
                self.release().await;
                let (namespace, name) = self.settings.follow.clone().unwrap_or_default();
                return Err(Error::SchedulerMoved {
                    lease: format!("{namespace}/{name}"),
                    holder,
                });
            }
            match tokio::time::timeout(self.settings.retry_every(), self.try_hold()).await {
                Ok(Ok(true)) => renewed = Instant::now(),
                Ok(Ok(false)) => {
                    ::metrics::gauge!(metrics::LEADER).set(0.0);
                    return Err(Error::Taken {
                        namespace: self.settings.namespace.clone(),
                        name: self.settings.name.clone(),
                        holder: self.holder().unwrap_or_default(),
                    });
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timed out".to_owned(),
            }
            if renewed.elapsed() > self.settings.renew_deadline() {
                ::metrics::gauge!(metrics::LEADER).set(0.0);
                return Err(Error::Lost {
                    namespace: self.settings.namespace.clone(),
                    name: self.settings.name.clone(),
                    seconds: renewed.elapsed().as_secs(),
                    last,
                });
            }
        }
    }

    /// Puts the leader label on this replica's pod, or takes it off. A failure is logged: the
    /// Lease, not the label, decides who leads; the label only routes the scheduler's calls.
    async fn label_pod(&self, leading: bool) {
        let Some((namespace, name)) = &self.settings.pod else {
            return;
        };
        let pods: Api<Pod> = Api::namespaced(self.api.clone().into_client(), namespace);
        let patch = leader_label_patch(leading);
        if let Err(e) = pods
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(pod = %name, leading, error = %e, "failed to label Gangplank's own pod");
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
    async fn try_hold(&mut self) -> Result<bool, kube::Error> {
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
                Ok(_) => Ok(true),
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
    /// replica takes it without waiting for it to expire.
    pub async fn release(&mut self) {
        ::metrics::gauge!(metrics::LEADER).set(0.0);
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
        let settings = Settings {
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
