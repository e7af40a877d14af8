//! The Grafana dashboard on real data: `e2e/up` starts Prometheus scraping the local
//! Gangplank every second, and every query of [`gangplank::dashboard`] runs there, with the
//! variables set as Grafana would set them. Prometheus must accept each one, each panel must
//! show data once a gang has run (but the panels of events this test does not cause), and the
//! queue panels must show what the API server says the test's queue holds; once the queue is
//! deleted, its series leave Gangplank's `/metrics`.

use gangplank::api::QueueSpec;
use gangplank::dashboard::{self, Query};
use k8s_openapi::api::core::v1::Pod;

use crate::queues::{QueueGuard, bound, create_gang, create_queue, delete_queue};
use crate::support::{Cluster, Series, eventually};

/// Panels of events this test does not cause: they may show nothing.
const QUIET_WITHOUT_EVENTS: [&str; 3] = [
    "Evictions for reclaim and priority",
    "Preempt: refused victim nodes",
    "Fenced writes",
];

/// The query as Grafana sends it with `queue` and `resource` chosen.
fn grafana(q: &Query, queue: &str, resource: &str) -> String {
    q.expr
        .replace("$__rate_interval", "1m")
        .replace("$queue", queue)
        .replace("$resource", resource)
}

fn of_queue<'a>(series: &'a [Series], queue: &str) -> Vec<&'a Series> {
    series
        .iter()
        .filter(|(labels, _)| labels.get("queue").map(String::as_str) == Some(queue))
        .collect()
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn every_dashboard_query_runs_on_prometheus_and_the_queue_panels_show_a_running_gang() {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "dash", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("dashboard").await;
    let pods = ns.api::<Pod>();
    create_gang(&ns, &queue, "d", 4, 2, None, None).await;
    eventually("the gang of 4 × 2 CPUs bound", 30, || async {
        (bound(&pods, "d").await == 4).then_some(())
    })
    .await;

    let rows = dashboard::rows();
    let panel = |title: &str| {
        rows.iter()
            .flat_map(|r| &r.panels)
            .find(|p| p.title == title)
            .unwrap_or_else(|| panic!("no panel {title}"))
    };
    // Allocated and deserved: 8 CPUs held, as the pods' requests say; a share above zero.
    let usage = panel("Allocated and deserved ($resource)");
    let allocated = eventually(
        "Prometheus to show the queue's 8 CPUs allocated",
        30,
        || {
            let expr = grafana(&usage.queries[0], &queue, "cpu");
            let cluster = &cluster;
            let queue = &queue;
            async move {
                let series = cluster.prometheus_query(&expr).await;
                let mine = of_queue(&series, queue);
                (mine.len() == 1 && mine[0].1 == 8.0).then_some(series)
            }
        },
    )
    .await;
    assert!(
        of_queue(&allocated, "default").is_empty(),
        "the queue variable selects only {queue}: {allocated:?}"
    );
    let deserved = cluster
        .prometheus_query(&grafana(&usage.queries[1], &queue, "cpu"))
        .await;
    let deserved = of_queue(&deserved, &queue)[0].1;
    assert!(deserved >= 8.0, "deserved {deserved} below what it runs");
    let share = cluster
        .prometheus_query(&grafana(
            &panel("Share used ($resource)").queries[0],
            &queue,
            "cpu",
        ))
        .await;
    let share = of_queue(&share, &queue)[0].1;
    assert!(
        (share - 8.0 / deserved).abs() < 1e-9,
        "share used {share}, want 8 / {deserved}"
    );

    // A batch Job of the queue, running: the Jobs panels count it.
    crate::batch_jobs::create_job(
        &ns,
        "dash-job",
        serde_json::json!({"queue": queue, "tasks": [crate::batch_jobs::task(
            "worker", 1, serde_json::json!({"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}))]}),
    )
    .await;
    let by_phase = &panel("Jobs by phase").queries[0];
    eventually("Prometheus to count the running batch Job", 60, || {
        let expr = grafana(by_phase, &queue, "cpu");
        let cluster = &cluster;
        async move {
            let series = cluster.prometheus_query(&expr).await;
            series
                .iter()
                .any(|(labels, value)| {
                    labels.get("phase").map(String::as_str) == Some("Running") && *value == 1.0
                })
                .then_some(())
        }
    })
    .await;

    // Every query with every queue: accepted, and every panel but the quiet ones shows data.
    let mut empty = Vec::new();
    for p in rows.iter().flat_map(|r| &r.panels) {
        let mut series = 0;
        for q in &p.queries {
            series += cluster
                .prometheus_query(&grafana(q, ".*", "cpu"))
                .await
                .len();
        }
        if series == 0 && !QUIET_WITHOUT_EVENTS.contains(&p.title) {
            empty.push(p.title);
        }
    }
    assert!(empty.is_empty(), "panels without data: {empty:?}");

    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
    // A deleted queue leaves Gangplank's /metrics, and so the dashboard's queue list.
    let label = format!("queue=\"{queue}\"");
    eventually(
        "the deleted queue's series to leave /metrics",
        30,
        || async {
            let text = reqwest::get(format!("{}/metrics", cluster.url("GANGPLANK_METRICS_URL")))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            (!text.contains(&label)).then_some(())
        },
    )
    .await;
}
