//! Which build this process is: the crate's version and the commit it was built from
//! (`build.rs` at the repository's root records it). `gangplank --version`, the metrics port's
//! `/version` and the `gangplank_build_info` metric all read it here.

use axum::Json;
use axum::Router;
use axum::routing::get;
use serde::Serialize;

/// The crate's version, which the chart's `appVersion` names too.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The full commit hash the binary was built from, or `unknown`.
pub const COMMIT: &str = env!("GANGPLANK_COMMIT");
/// What `gangplank --version` prints after the name.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GANGPLANK_COMMIT"),
    ")"
);

/// The body of `GET /version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Build {
    pub version: &'static str,
    pub commit: &'static str,
}

pub const THIS: Build = Build {
    version: VERSION,
    commit: COMMIT,
};

/// `GET /version` on the metrics port.
pub fn router() -> Router {
    Router::new().route("/version", get(|| async { Json(THIS) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    #[tokio::test]
    async fn version_answers_the_crate_version_and_the_commit_as_json() {
        let response = router()
            .oneshot(Request::get("/version").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let build: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(build["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(build["commit"], COMMIT);
        assert!(!COMMIT.is_empty());
    }

    #[test]
    fn the_long_version_names_the_commit() {
        assert_eq!(LONG_VERSION, format!("{VERSION} (commit {COMMIT})"));
    }
}
