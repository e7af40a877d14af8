//! Liveness and readiness probes.
//!
//! `/livez` answers 200 whenever the process can serve HTTP at all: restarting would not help
//! anything else. `/readyz` answers 200 only once the cache's watchers have completed their
//! first list, because decisions made from a half-filled cache would be wrong; before that it
//! answers 503 and says which watchers are still listing. Both live on the metrics port and
//! are not traced (kubelets probe every few seconds).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::cache::{Cache, Watched};

pub fn router(cache: Cache) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(cache)
}

async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz(State(cache): State<Cache>) -> (StatusCode, String) {
    let unsynced = cache.unsynced();
    if unsynced.is_empty() {
        return (StatusCode::OK, "ok\n".to_owned());
    }
    let names: Vec<&str> = unsynced.into_iter().map(Watched::as_str).collect();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not ready: cache not synced: {}\n", names.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let (status, body) = get(router(Cache::new()), "/livez").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    }

    #[tokio::test]
    async fn ready_names_the_watchers_still_listing_until_all_synced() {
        let cache = Cache::new();
        let (status, body) = get(router(cache.clone()), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: cache not synced: nodes, pods, podgroups, queues\n"
        );

        cache.mark_synced(Watched::Nodes);
        cache.mark_synced(Watched::PodGroups);
        cache.mark_synced(Watched::Queues);
        let (_, body) = get(router(cache.clone()), "/readyz").await;
        assert_eq!(body, "not ready: cache not synced: pods\n");

        cache.mark_synced(Watched::Pods);
        let (status, body) = get(router(cache), "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    }
}
