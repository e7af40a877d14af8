//! Liveness and readiness probes.
//!
//! `/livez` answers 200 while the process serves HTTP and each background loop (the admission
//! loop, the controller) has gone round recently: each beats its [`Heartbeat`] every time it
//! wakes (at least every 5 s and 30 s, ready or not), so a loop stuck in a pass (a deadlock, a
//! call that never returns) turns `/livez` to 503 after its limit and the kubelet restarts the
//! process; a loop at rest (a replica that does not lead runs neither, `crate::runtime::leader`) is
//! never late. A loop that ends or panics ends the process already (`server.rs`). `/readyz` answers 200 only while every watch (the cache's and the stores')
//! has completed a list since it started or last failed, because decisions made from a
//! half-filled or stale cache would be wrong; otherwise it answers 503 and says which watches
//! are listing again. Both live on the metrics port and are not traced (kubelets probe every
//! few seconds).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// The names of the watches that are not synced; empty when ready (`gangplank serve` asks the
/// cache's and the stores' watches, `crate::cache::unsynced_watches`).
pub type Unsynced = Arc<dyn Fn() -> Vec<&'static str> + Send + Sync>;

/// [`Heartbeat::last`] of a loop that is not running.
const RESTING: u64 = u64::MAX;

/// When one background loop last went round.
#[derive(Debug)]
pub struct Heartbeat {
    name: &'static str,
    /// How long it may go without a beat before `/livez` fails.
    limit: Duration,
    start: Instant,
    /// Milliseconds from `start` to the last beat.
    last: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat that counts as beaten now.
    pub fn new(name: &'static str, limit: Duration) -> Arc<Heartbeat> {
        Arc::new(Heartbeat {
            name,
            limit,
            start: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    /// A heartbeat of a loop that does not run yet: it counts as on time until its first
    /// beat (a replica's loops run only while it leads, `crate::runtime::leader`).
    pub fn idle(name: &'static str, limit: Duration) -> Arc<Heartbeat> {
        let heartbeat = Heartbeat::new(name, limit);
        heartbeat.rest();
        heartbeat
    }

    /// The loop stopped on purpose (its term as the leader ended): on time until it beats again.
    pub fn rest(&self) {
        self.last.store(RESTING, Ordering::Relaxed);
    }

    /// A heartbeat last beaten `ago` (tests).
    #[cfg(test)]
    fn beaten_ago(name: &'static str, limit: Duration, ago: Duration) -> Arc<Heartbeat> {
        Arc::new(Heartbeat {
            name,
            limit,
            start: Instant::now()
                .checked_sub(ago)
                .expect("the clock goes back that far"),
            last: AtomicU64::new(0),
        })
    }

    pub fn beat(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }

    /// How long since the last beat, when longer than the limit.
    fn late(&self) -> Option<Duration> {
        let last = self.last.load(Ordering::Relaxed);
        if last == RESTING {
            return None;
        }
        let since = self
            .start
            .elapsed()
            .saturating_sub(Duration::from_millis(last));
        (since > self.limit).then_some(since)
    }
}

#[derive(Clone)]
struct Probes {
    unsynced: Unsynced,
    heartbeats: Vec<Arc<Heartbeat>>,
}

pub fn router(unsynced: Unsynced, heartbeats: Vec<Arc<Heartbeat>>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(Probes {
            unsynced,
            heartbeats,
        })
}

async fn livez(State(probes): State<Probes>) -> (StatusCode, String) {
    let late: Vec<String> = probes
        .heartbeats
        .iter()
        .filter_map(|h| {
            let since = h.late()?;
            Some(format!(
                "{} has not gone round for {} s (limit {} s)",
                h.name,
                since.as_secs(),
                h.limit.as_secs()
            ))
        })
        .collect();
    if late.is_empty() {
        (StatusCode::OK, "ok\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not live: {}\n", late.join("; ")),
        )
    }
}

async fn readyz(State(Probes { unsynced, .. }): State<Probes>) -> (StatusCode, String) {
    let names = unsynced();
    if names.is_empty() {
        return (StatusCode::OK, "ok\n".to_owned());
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not ready: not synced: {}\n", names.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Cache, Change, Watched};
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(router: Router, path: &str) -> (StatusCode, String) {
        let response = router
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn live_is_ok_even_before_the_cache_synced() {
        let (status, body) = get(router(of(Cache::new().0), vec![]), "/livez").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    }

    #[tokio::test]
    async fn a_loop_that_stops_going_round_makes_the_process_not_live_until_it_beats_again() {
        let limit = Duration::from_secs(2);
        let stuck = Heartbeat::beaten_ago("admission loop", limit, Duration::from_secs(5));
        let fine = Heartbeat::beaten_ago("controller", limit, Duration::ZERO);
        let probes = || router(of(Cache::new().0), vec![stuck.clone(), fine.clone()]);
        let (status, body) = get(probes(), "/livez").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not live: admission loop has not gone round for 5 s (limit 2 s)\n"
        );
        stuck.beat();
        assert_eq!(get(probes(), "/livez").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_loop_at_rest_on_a_follower_keeps_the_process_live_however_long() {
        let limit = Duration::from_secs(2);
        let resting = Heartbeat::beaten_ago("admission loop", limit, Duration::from_secs(5));
        resting.rest();
        let probes = || router(of(Cache::new().0), vec![resting.clone()]);
        assert_eq!(get(probes(), "/livez").await.0, StatusCode::OK);
        let idle = Heartbeat::idle("controller", limit);
        assert_eq!(idle.late(), None, "not started yet");
    }

    /// Readiness from the cache's watches alone.
    fn of(cache: Cache) -> Unsynced {
        Arc::new(move || cache.unsynced().into_iter().map(Watched::as_str).collect())
    }

    #[tokio::test]
    async fn ready_names_the_watchers_still_listing_until_all_synced() {
        let (cache, mut mirror) = Cache::new();
        let (status, body) = get(router(of(cache.clone()), vec![]), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: not synced: nodes, pods, podgroups, queues, topologies, deviceclasses, \
             resourceslices, resourceclaimtemplates, resourceclaims\n"
        );
        for dra in Watched::ALL.into_iter().filter(|w| w.is_dra()) {
            mirror.apply(Change::Listed(dra, None));
        }
        mirror.apply(Change::Listed(Watched::Nodes, None));
        mirror.apply(Change::Listed(Watched::PodGroups, None));
        mirror.apply(Change::Listed(Watched::Queues, None));
        mirror.apply(Change::Listed(Watched::Topologies, None));
        let (_, body) = get(router(of(cache.clone()), vec![]), "/readyz").await;
        assert_eq!(body, "not ready: not synced: pods\n");

        mirror.apply(Change::Listed(Watched::Pods, None));
        let (status, body) = get(router(of(cache.clone()), vec![]), "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));

        mirror.apply(Change::Failed(Watched::Pods));
        let (status, body) = get(router(of(cache), vec![]), "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: not synced: pods\n"
            ),
            "a failed watch makes it unready until it lists again"
        );
    }
}
