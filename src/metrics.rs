//! Prometheus metrics: names, help texts and the `/metrics` endpoint.
//!
//! Code records through the `metrics` facade; [`install`] puts a Prometheus recorder behind it
//! and [`router`] renders it on the metrics port. Every metric name is a constant here and every
//! metric is described in [`describe`], because the README's metric table and the Grafana
//! dashboard are generated from what `/metrics` prints.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

/// Counter: extender requests by `verb` and `outcome` (`ok`, `error`, `bad_request`).
pub const EXTENDER_REQUESTS_TOTAL: &str = "gangplank_extender_requests_total";
/// Histogram: extender request latency in seconds, by `verb`.
pub const EXTENDER_REQUEST_DURATION_SECONDS: &str = "gangplank_extender_request_duration_seconds";
/// Gauge: nodes in the cluster cache.
pub const CACHE_NODES: &str = "gangplank_cache_nodes";
/// Gauge: pods in the cluster cache.
pub const CACHE_PODS: &str = "gangplank_cache_pods";
/// Gauge: always 1, labelled with the running `version`.
pub const BUILD_INFO: &str = "gangplank_build_info";

/// Histogram buckets for request latency: 50 µs (a pass-through filter) to 10 s (a bind held
/// for gang quorum).
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// How often histograms are compacted; the exporter leaves that to its caller.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to install metrics recorder: {0}")]
    Install(#[from] metrics_exporter_prometheus::BuildError),
}

/// Builds the Prometheus recorder with our buckets (not installed).
pub fn builder() -> Result<PrometheusBuilder, Error> {
    Ok(PrometheusBuilder::new().set_buckets_for_metric(
        Matcher::Full(EXTENDER_REQUEST_DURATION_SECONDS.to_owned()),
        LATENCY_BUCKETS_SECONDS,
    )?)
}

/// Installs the recorder process-wide, describes every metric and sets `build_info`.
pub fn install() -> Result<PrometheusHandle, Error> {
    let handle = builder()?.install_recorder()?;
    describe();
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    metrics::gauge!(CACHE_NODES).set(0.0);
    metrics::gauge!(CACHE_PODS).set(0.0);
    Ok(handle)
}

/// Registers the help text of every metric with the current recorder.
pub fn describe() {
    metrics::describe_counter!(
        EXTENDER_REQUESTS_TOTAL,
        "Scheduler extender requests, by verb (filter, prioritize, preempt, bind) and outcome (ok; error: answered with a non-empty Error; bad_request: HTTP 400 for a body that is not the expected JSON)."
    );
    metrics::describe_histogram!(
        EXTENDER_REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Time to answer a scheduler extender request, by verb, including a held bind."
    );
    metrics::describe_gauge!(CACHE_NODES, "Nodes in Gangplank's cluster cache.");
    metrics::describe_gauge!(
        CACHE_PODS,
        "Pods in Gangplank's cluster cache, in every phase."
    );
    metrics::describe_gauge!(
        BUILD_INFO,
        "Always 1; the version label tells which Gangplank build is running."
    );
}

/// `GET /metrics` in the Prometheus text format.
pub fn router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(render))
        .with_state(handle)
}

async fn render(State(handle): State<PrometheusHandle>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
}

/// Compacts histograms periodically until shutdown.
pub async fn run_upkeep(handle: PrometheusHandle, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => handle.run_upkeep(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_rendered_with_its_help_text() {
        let recorder = builder().unwrap().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe();
            metrics::counter!(EXTENDER_REQUESTS_TOTAL, "verb" => "filter", "outcome" => "ok")
                .increment(1);
            metrics::histogram!(EXTENDER_REQUEST_DURATION_SECONDS, "verb" => "filter")
                .record(0.000_07);
            metrics::gauge!(CACHE_NODES).set(3.0);
            metrics::gauge!(CACHE_PODS).set(7.0);
            metrics::gauge!(BUILD_INFO, "version" => "test").set(1.0);
        });
        let text = handle.render();
        for name in [
            EXTENDER_REQUESTS_TOTAL,
            EXTENDER_REQUEST_DURATION_SECONDS,
            CACHE_NODES,
            CACHE_PODS,
            BUILD_INFO,
        ] {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{text}"
            );
        }
        assert!(text.contains(
            "gangplank_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"0.0001\"} 1"
        ), "{text}");
        assert!(
            text.contains("gangplank_extender_requests_total{verb=\"filter\",outcome=\"ok\"} 1")
        );
    }
}
