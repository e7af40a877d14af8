//! Liveness and readiness probes.
//!
//! `/livez` answers 200 whenever the process can serve HTTP at all: restarting would not help
//! anything else. `/readyz` answers 200 only while every watch (the cache's and the stores')
//! has completed a list since it started or last failed, because decisions made from a
//! half-filled or stale cache would be wrong; otherwise it answers 503 and says which watches
//! are listing again. Both live on the metrics port and are not traced (kubelets probe every
//! few seconds).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::cache::{Cache, Watched};

/// The names of the watches that are not synced; empty when ready.
pub type Unsynced = Arc<dyn Fn() -> Vec<&'static str> + Send + Sync>;

/// What `/readyz` checks in `gangplank serve`: the cache's watches, then the stores'.
pub fn watches(cache: Cache, stores: Arc<crate::cache::stores::Stores>) -> Unsynced {
    Arc::new(move || {
        let mut names: Vec<&'static str> =
            cache.unsynced().into_iter().map(Watched::as_str).collect();
        names.extend(stores.unsynced());
        names
    })
}

pub fn router(unsynced: Unsynced) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(unsynced)
}

async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz(State(unsynced): State<Unsynced>) -> (StatusCode, String) {
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
    use crate::cache::Change;
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
        let (status, body) = get(router(of(Cache::new().0)), "/livez").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    }

    /// Readiness from the cache's watches alone.
    fn of(cache: Cache) -> Unsynced {
        Arc::new(move || cache.unsynced().into_iter().map(Watched::as_str).collect())
    }

    #[tokio::test]
    async fn ready_names_the_watchers_still_listing_until_all_synced() {
        let (cache, mut mirror) = Cache::new();
        let (status, body) = get(router(of(cache.clone())), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: not synced: nodes, pods, podgroups, queues\n"
        );

        mirror.apply(Change::Listed(Watched::Nodes, None));
        mirror.apply(Change::Listed(Watched::PodGroups, None));
        mirror.apply(Change::Listed(Watched::Queues, None));
        let (_, body) = get(router(of(cache.clone())), "/readyz").await;
        assert_eq!(body, "not ready: not synced: pods\n");

        mirror.apply(Change::Listed(Watched::Pods, None));
        let (status, body) = get(router(of(cache.clone())), "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));

        mirror.apply(Change::Failed(Watched::Pods));
        let (status, body) = get(router(of(cache)), "/readyz").await;
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
