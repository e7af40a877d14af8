//! The timer that expires gang claims and abandoned held binds in a quiet cluster. Filter
//! expires claims and bind forgets abandoned binds on their way, but when no call comes (the
//! scheduler gave up on a gang or restarted, or nothing else is pending), a dead gang's claim
//! would hold its room past its timeout, and a held bind whose scheduler hung up would keep
//! its reservation until the next bind call. This task checks every [`CHECK_EVERY`] on tokio's
//! clock, so paused-clock tests drive it, and takes the cache's write lock only when some claim
//! is due or some held bind was abandoned.

use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use super::Permits;
use crate::cache::LedgerWriter;

/// How often claims and held binds are checked; how late a claim may expire, or an abandoned
/// bind be released, at most.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Expires due claims and releases abandoned held binds until `shutdown`.
pub async fn run(ledger: LedgerWriter, permits: Arc<Permits>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        ledger.expire_due(Instant::now().into_std());
        permits.forget_abandoned();
    }
}

#[cfg(test)]
mod tests {
    use gangplank_core::claims;
    use gangplank_core::model::{GroupKey, Pod};
    use gangplank_core::policy::constraints::Constraints;
    use gangplank_core::policy::placement::Strategy;

    use super::*;
    use crate::cache::Cache;
    use crate::testing::{node, pod, pod_group};

    /// No bind call comes in these tests.
    struct NoBinds;

    impl crate::extender::Binder for NoBinds {
        fn bind<'a>(
            &'a self,
            request: &'a crate::extender::BindRequest,
        ) -> futures::future::BoxFuture<'a, Result<(), crate::extender::Error>> {
            Box::pin(async { Err(request.failed("no bind call is expected")) })
        }
    }

    fn cluster_with_one_gang_claim(timeout: Duration) -> (Cache, GroupKey) {
        let (cache, mut mirror) = Cache::new();
        mirror.apply_node(node("n0", 8_000, 110));
        let key = GroupKey::new("ns", "train");
        mirror.apply_pod_group(pod_group("train", 2, "default", timeout));
        let pod = Pod {
            pod_group: Some("train".into()),
            ..pod("train-0", 2_000)
        };
        mirror.apply_pod(pod.clone());
        let settings = claims::Settings {
            strategy: Strategy::Binpack,
            max_hold: Duration::from_secs(60),
            bind_unmarked: false,
            hold_scheduler_gangs: false,
            gated_admission: false,
        };
        let now = Instant::now().into_std();
        cache
            .ledger()
            .claim(&pod, &Constraints::default(), &["n0"], &settings, now)
            .unwrap();
        assert!(cache.read(|s| s.ledger().claims().contains_key(&key)));
        (cache, key)
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_gangs_claim_is_dropped_after_its_timeout_with_no_filter_call() {
        let (cache, key) = cluster_with_one_gang_claim(Duration::from_secs(30));
        let shutdown = CancellationToken::new();
        let permits = Arc::new(Permits::new(
            cache.ledger(),
            Arc::new(NoBinds),
            claims::Settings {
                strategy: Strategy::Binpack,
                max_hold: Duration::from_secs(60),
                bind_unmarked: false,
                hold_scheduler_gangs: false,
                gated_admission: false,
            },
        ));
        let timer = tokio::spawn(run(cache.ledger(), permits, shutdown.clone()));

        tokio::time::sleep(Duration::from_secs(29)).await;
        assert!(
            cache.read(|s| s.ledger().claims().contains_key(&key)),
            "dropped early"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            cache.read(|s| s.ledger().claims().is_empty()),
            "still claimed"
        );
        assert_eq!(cache.read(|s| s.claimed_on("n0").get("cpu")), 0);

        shutdown.cancel();
        timer.await.unwrap();
    }
}
