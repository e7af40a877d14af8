//! `gangplank dashboard`: the Grafana dashboard for queue usage and Gangplank's own health,
//! as Grafana's JSON model (or, with `--configmap`, wrapped in a ConfigMap for Grafana's
//! dashboard sidecar).
//!
//! The dashboard is code, not a hand-edited export, for the same reason as the CRDs: the
//! checked-in `manifests/grafana/` files are exactly [`render`]'s and [`configmap`]'s output
//! (`tests/dashboard.rs` fails when they are not), and that test also parses every query as
//! PromQL and checks that it names only metrics of [`metrics::CATALOGUE`] with labels those
//! metrics have, and that every metric in the catalogue is charted. A renamed label or a new
//! metric therefore cannot leave the dashboard silently empty or incomplete. Regenerate with
//! `cargo run -- dashboard > manifests/grafana/gangplank-dashboard.json` and
//! `cargo run -- dashboard --configmap > manifests/grafana/gangplank-dashboard-configmap.yaml`.
//!
//! Layout: rows of panels two abreast, the queue rows first (what an operator opens it for),
//! then the extender, webhooks, controller and cache. Template variables: the Prometheus data
//! source, the queues shown (all by default) and the resource the queue panels chart (`cpu` by
//! default; its values come from the `resource` label of `gangplank_queue_deserved`, so GPUs
//! and any extended resource appear once a queue has a share of them).

use anyhow::Context;
use serde_json::{Value, json};

use crate::metrics::{self as m};

/// The dashboard's stable identity in Grafana: re-importing replaces it instead of copying it.
pub const UID: &str = "gangplank";
/// The ConfigMap's label that Grafana's dashboard sidecar (kube-prometheus-stack) watches for.
pub const SIDECAR_LABEL: (&str, &str) = ("grafana_dashboard", "1");
/// Panels per row and their size in Grafana's 24-column grid.
const WIDTH: u32 = 12;
const HEIGHT: u32 = 8;

/// How a panel draws its queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    /// Lines over time.
    TimeSeries,
    /// The latest value, large.
    Stat,
}

/// One query of a panel: a PromQL expression (with Grafana's `$queue`, `$resource` and
/// `$__rate_interval`) and the legend of its series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub expr: String,
    pub legend: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panel {
    pub title: &'static str,
    pub description: &'static str,
    pub chart: Chart,
    /// Grafana's unit id (`short`, `s`, `reqps`, `percentunit`…).
    pub unit: &'static str,
    pub queries: Vec<Query>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub title: &'static str,
    pub panels: Vec<Panel>,
}

fn query(expr: impl Into<String>, legend: impl Into<String>) -> Query {
    Query {
        expr: expr.into(),
        legend: legend.into(),
    }
}

/// Per-second rate of a counter, summed by `by` (comma-separated labels; empty for a total).
fn rate(metric: &str, selector: &str, by: &str) -> String {
    let inner = format!("rate({metric}{selector}[$__rate_interval])");
    if by.is_empty() {
        format!("sum({inner})")
    } else {
        format!("sum by ({by}) ({inner})")
    }
}

/// The `q` quantile of a histogram in seconds, per `by` (comma-separated labels, may be empty).
fn quantile(q: f64, metric: &str, by: &str) -> String {
    let by = if by.is_empty() {
        "le".to_owned()
    } else {
        format!("{by}, le")
    };
    format!("histogram_quantile({q}, sum by ({by}) (rate({metric}_bucket[$__rate_interval])))")
}

/// The p50 and p99 queries of a histogram, per `by`, with `legend` (a Grafana legend template
/// that may name `by`'s labels) before the quantile.
fn p50_p99(metric: &str, by: &str, legend: &str) -> Vec<Query> {
    [(0.5, "p50"), (0.99, "p99")]
        .into_iter()
        .map(|(q, name)| query(quantile(q, metric, by), format!("{legend}{name}")))
        .collect()
}

fn panel(
    title: &'static str,
    description: &'static str,
    unit: &'static str,
    queries: Vec<Query>,
) -> Panel {
    Panel {
        title,
        description,
        chart: Chart::TimeSeries,
        unit,
        queries,
    }
}

/// The queue selector every queue panel shares.
const QUEUES: &str = r#"{queue=~"$queue"}"#;
/// The queue and resource selector of the share panels.
const QUEUE_RESOURCE: &str = r#"{queue=~"$queue", resource="$resource"}"#;

/// Every row and panel of the dashboard, in order.
pub fn rows() -> Vec<Row> {
    vec![
        Row {
            title: "Queues",
            panels: vec![
                panel(
                    "Allocated and deserved ($resource)",
                    "What each queue's admitted groups hold, against its deserved share (weighted \
                     water-filling of the schedulable nodes, floored at guarantee, capped at \
                     capability and demand), at the last admission pass. CPU in cores, memory in \
                     bytes, other resources in their own unit.",
                    "short",
                    vec![
                        query(
                            format!("sum by (queue) ({}{QUEUE_RESOURCE})", m::QUEUE_ALLOCATED),
                            "{{queue}} allocated",
                        ),
                        query(
                            format!("sum by (queue) ({}{QUEUE_RESOURCE})", m::QUEUE_DESERVED),
                            "{{queue}} deserved",
                        ),
                    ],
                ),
                panel(
                    "Share used ($resource)",
                    "Allocated over deserved: above 100% a queue borrows idle room (up to its \
                     capability) that reclaim may take back when a queue below its share waits.",
                    "percentunit",
                    vec![query(
                        format!(
                            "sum by (queue) ({a}{QUEUE_RESOURCE}) / (sum by (queue) \
                             ({d}{QUEUE_RESOURCE}) > 0)",
                            a = m::QUEUE_ALLOCATED,
                            d = m::QUEUE_DESERVED,
                        ),
                        "{{queue}}",
                    )],
                ),
                panel(
                    "Waiting groups",
                    "Groups (and queue-only pods) each queue's last admission pass left waiting; \
                     each one's PodGroup condition `Admitted` says why.",
                    "short",
                    vec![query(
                        format!("sum by (queue) ({}{QUEUES})", m::QUEUE_WAITING_GROUPS),
                        "{{queue}}",
                    )],
                ),
                panel(
                    "Evictions for reclaim and priority",
                    "Eviction requests per second by the victim's queue and outcome: reclaim \
                     takes back borrowed room for queues below their share, preemption makes \
                     room for higher-priority groups of the same queue. `refused` is a \
                     PodDisruptionBudget saying not now.",
                    "reqps",
                    vec![
                        query(
                            rate(m::RECLAIM_EVICTIONS_TOTAL, QUEUES, "queue, outcome"),
                            "reclaim {{queue}} {{outcome}}",
                        ),
                        query(
                            rate(m::PREEMPTION_EVICTIONS_TOTAL, QUEUES, "queue, outcome"),
                            "preemption {{queue}} {{outcome}}",
                        ),
                    ],
                ),
            ],
        },
        Row {
            title: "Admission and gangs",
            panels: vec![
                panel(
                    "Pods released and groups stuck",
                    "Pods per second whose admission gate was removed, groups that cannot be \
                     admitted at all yet (their PodGroup is missing or they have fewer than \
                     minMember pods), pods per second created ungated by admission on arrival, \
                     whether arrivals are admitted now (1) or gated (0), and admission passes \
                     per second.",
                    "short",
                    vec![
                        query(
                            rate(m::ADMISSION_RELEASED_PODS_TOTAL, "", ""),
                            "pods released / s",
                        ),
                        query(
                            format!("sum({})", m::ADMISSION_WAITING_GROUPS),
                            "groups without PodGroup or members",
                        ),
                        query(
                            rate(m::ADMISSION_ARRIVED_PODS_TOTAL, "", ""),
                            "pods admitted on arrival / s",
                        ),
                        query(
                            format!("max({})", m::ADMISSION_DOOR_OPEN),
                            "admission on arrival open",
                        ),
                        query(
                            rate(m::ADMISSION_PASSES_TOTAL, "", ""),
                            "admission passes / s",
                        ),
                    ],
                ),
                panel(
                    "Cluster growth",
                    "With --node-autoscaling: gangs the cluster grows for now (their stand-in \
                     pods ask the node autoscaler for room), stand-ins created per second, and \
                     growths given up per second (stand-ins unplaced after --growth-timeout).",
                    "short",
                    vec![
                        query(format!("max({})", m::GROWTH_GANGS), "gangs growing"),
                        query(
                            rate(m::GROWTH_STAND_INS_CREATED_TOTAL, "", ""),
                            "stand-ins created / s",
                        ),
                        query(
                            rate(m::GROWTH_TIMEOUTS_TOTAL, "", ""),
                            "growths given up / s",
                        ),
                    ],
                ),
                panel(
                    "Gang bind wait",
                    "Seconds from a gang's first held bind to quorum, when its members are bound \
                     together.",
                    "s",
                    p50_p99(m::GANG_BIND_WAIT_SECONDS, "", ""),
                ),
                panel(
                    "Held binds and claims",
                    "Bind calls held open until their gang reaches quorum, and gangs holding a \
                     claim on capacity while their members are placed (a backfill head's \
                     reservation is one too).",
                    "short",
                    vec![
                        query(format!("sum({})", m::GANG_BINDS_HELD), "binds held"),
                        query(format!("sum({})", m::GANG_CLAIMS), "claims"),
                    ],
                ),
                panel(
                    "Gang timeouts and abandoned binds",
                    "Gangs whose held binds timed out before quorum, per interval (their members \
                     go back to the scheduler, which retries them with backoff), and held binds \
                     whose scheduler hung up (they stop counting toward quorum).",
                    "short",
                    vec![
                        query(
                            format!(
                                "sum(increase({}[$__rate_interval]))",
                                m::GANG_TIMEOUTS_TOTAL
                            ),
                            "timeouts",
                        ),
                        query(
                            format!(
                                "sum(increase({}[$__rate_interval]))",
                                m::GANG_BINDS_ABANDONED_TOTAL
                            ),
                            "abandoned binds",
                        ),
                    ],
                ),
            ],
        },
        Row {
            title: "Scheduler extender",
            panels: vec![
                panel(
                    "Extender requests",
                    "Calls from kube-scheduler per second, by verb and outcome (`error`: answered \
                     with an Error; `bad_request`: a body that is not the expected JSON; \
                     `too_large`: a body over 16 MiB).",
                    "reqps",
                    vec![query(
                        rate(m::EXTENDER_REQUESTS_TOTAL, "", "verb, outcome"),
                        "{{verb}} {{outcome}}",
                    )],
                ),
                panel(
                    "Extender latency",
                    "Time to answer, by verb. A bind is held until its gang reaches quorum, so its \
                     latency includes the gang's wait.",
                    "s",
                    p50_p99(m::EXTENDER_REQUEST_DURATION_SECONDS, "verb", "{{verb}} "),
                ),
                panel(
                    "Extender: wait for a decision slot",
                    "Time filter, prioritize and preempt calls waited for one of the 8 calls \
                     decided at once, by verb: near zero unless calls arrive in a flood.",
                    "s",
                    p50_p99(m::EXTENDER_DECISION_WAIT_SECONDS, "verb", "{{verb}} "),
                ),
                panel(
                    "Preempt: refused victim nodes",
                    "Candidate nodes whose victims the preempt verb refused, per second, by reason \
                     (a victim of equal or higher priority, one that would break a gang…).",
                    "short",
                    vec![query(
                        rate(m::PREEMPT_REFUSED_NODES_TOTAL, "", "reason"),
                        "{{reason}}",
                    )],
                ),
            ],
        },
        Row {
            title: "Admission webhooks",
            panels: vec![
                panel(
                    "Webhook requests",
                    "AdmissionReviews per second, by webhook and outcome (`denied`: refused by a \
                     rule; `error`: not an AdmissionReview, or Gangplank could not decide yet).",
                    "reqps",
                    vec![query(
                        rate(m::WEBHOOK_REQUESTS_TOTAL, "", "webhook, outcome"),
                        "{{webhook}} {{outcome}}",
                    )],
                ),
                panel(
                    "Webhook latency",
                    "Time to answer, by webhook; the API server's `timeoutSeconds` bounds it.",
                    "s",
                    p50_p99(
                        m::WEBHOOK_REQUEST_DURATION_SECONDS,
                        "webhook",
                        "{{webhook}} ",
                    ),
                ),
                panel(
                    "Webhook turns taken",
                    "AdmissionReviews being decided, by lane (small: 32 at once; large: 4). A \
                     lane at its bound makes further reviews wait, at most 10 s.",
                    "short",
                    vec![query(
                        format!("sum by (lane) ({})", m::WEBHOOK_TURNS_TAKEN),
                        "{{lane}}",
                    )],
                ),
            ],
        },
        Row {
            title: "Controller",
            panels: vec![
                panel(
                    "Controller writes",
                    "Status writes by kind, PodGroups created by source, and Events, per second, \
                     by outcome.",
                    "reqps",
                    vec![
                        query(
                            rate(m::CONTROLLER_STATUS_WRITES_TOTAL, "", "kind, outcome"),
                            "status {{kind}} {{outcome}}",
                        ),
                        query(
                            rate(
                                m::CONTROLLER_POD_GROUPS_CREATED_TOTAL,
                                "",
                                "source, outcome",
                            ),
                            "PodGroup from {{source}} {{outcome}}",
                        ),
                        query(
                            rate(m::CONTROLLER_EVENTS_TOTAL, "", "outcome"),
                            "events {{outcome}}",
                        ),
                    ],
                ),
                panel(
                    "Controller pass duration",
                    "Time one controller pass takes, writes included.",
                    "s",
                    p50_p99(m::CONTROLLER_PASS_DURATION_SECONDS, "", ""),
                ),
            ],
        },
        Row {
            title: "Batch Jobs",
            panels: vec![
                panel(
                    "Jobs by phase",
                    "Batch Jobs (batch.gangplank.dev) of the selected queues by phase, as the \
                     leading replica's batch Job controller counts them every 5 s.",
                    "short",
                    vec![query(
                        format!("sum by (phase) ({}{QUEUES})", m::BATCH_JOBS),
                        "{{phase}}",
                    )],
                ),
                panel(
                    "Jobs running and waiting by queue",
                    "Batch Jobs running (Running) and waiting (Pending, Restarting) per queue.",
                    "short",
                    vec![
                        query(
                            format!(
                                r#"sum by (queue) ({}{{queue=~"$queue", phase="Running"}})"#,
                                m::BATCH_JOBS
                            ),
                            "{{queue}} running",
                        ),
                        query(
                            format!(
                                r#"sum by (queue) ({}{{queue=~"$queue", phase=~"Pending|Restarting"}})"#,
                                m::BATCH_JOBS
                            ),
                            "{{queue}} waiting",
                        ),
                    ],
                ),
            ],
        },
        Row {
            title: "Process",
            panels: vec![
                Panel {
                    chart: Chart::Stat,
                    ..panel(
                        "Cluster cache",
                        "Objects in Gangplank's cluster cache; they should match what the API \
                         server holds. DeviceClasses in error: classes whose CEL selectors \
                         Gangplank cannot evaluate, so it counts none of their devices (the \
                         log says why).",
                        "short",
                        vec![
                            query(format!("max({})", m::CACHE_NODES), "nodes"),
                            query(format!("max({})", m::CACHE_PODS), "pods"),
                            query(format!("max({})", m::CACHE_POD_GROUPS), "PodGroups"),
                            query(format!("max({})", m::CACHE_QUEUES), "Queues"),
                            query(format!("max({})", m::CACHE_TOPOLOGIES), "Topologies"),
                            query(
                                format!("max by (kind) ({})", m::CACHE_DRA_OBJECTS),
                                "{{kind}}",
                            ),
                            query(
                                format!("sum(max by (class) ({}))", m::DRA_CLASS_ERRORS),
                                "DeviceClasses in error",
                            ),
                        ],
                    )
                },
                Panel {
                    chart: Chart::Stat,
                    ..panel(
                        "Running versions",
                        "Gangplank builds running, by version (more than one during a rollout).",
                        "short",
                        vec![query(
                            format!("sum by (version) ({})", m::BUILD_INFO),
                            "{{version}}",
                        )],
                    )
                },
                Panel {
                    chart: Chart::Stat,
                    ..panel(
                        "Leaders",
                        "Replicas that hold the leader Lease: 1 when healthy, 0 during a \
                         failover.",
                        "short",
                        vec![query(format!("sum({})", m::LEADER), "leaders")],
                    )
                },
                panel(
                    "Fenced writes",
                    "Writes not made, per second, because the replica that began them no longer \
                     held the leader Lease (lapsed: not renewed in time; not_leading: lost or \
                     given up). Short bursts at a failover are expected.",
                    "reqps",
                    vec![query(
                        rate(m::FENCED_WRITES_TOTAL, "", "reason"),
                        "{{reason}}",
                    )],
                ),
                panel(
                    "Connections",
                    "Connections in their TLS handshake (128 places a port) and open (1024) on \
                     each port, those held unread after they were refused or gave their place \
                     up (a flood's), and refusals per second: a flood's newcomers, not the \
                     scheduler's or the API server's.",
                    "short",
                    vec![
                        query(
                            format!("sum by (server) ({})", m::SERVER_HANDSHAKES),
                            "{{server}} in handshake",
                        ),
                        query(
                            format!("sum by (server) ({})", m::SERVER_CONNECTIONS),
                            "{{server}} open",
                        ),
                        query(
                            format!("sum by (server) ({})", m::SERVER_CONNECTIONS_HELD_UNREAD),
                            "{{server}} held unread",
                        ),
                        query(
                            rate(m::SERVER_CONNECTIONS_REFUSED_TOTAL, "", "server"),
                            "{{server}} refused",
                        ),
                    ],
                ),
                panel(
                    "Connections closed",
                    "Connections closed per second, by server and how: by the client, by \
                     Gangplank between requests (idle past the header deadline) or in the middle \
                     of one (headers trickled past it), in the TLS handshake (a timeout, or a \
                     failure: a client without the scheduler's certificate), or shed for a \
                     newcomer of another address (in the handshake, or open and idle).",
                    "short",
                    vec![query(
                        rate(m::SERVER_CONNECTIONS_CLOSED_TOTAL, "", "server, reason"),
                        "{{server}} {{reason}}",
                    )],
                ),
            ],
        },
    ]
}

fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

fn variable(name: &str, label: &str, query: &str, all: bool, default: &str) -> Value {
    json!({
        "name": name,
        "label": label,
        "type": "query",
        "datasource": datasource(),
        "definition": query,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "sort": 1,
        "multi": all,
        "includeAll": all,
        "allValue": if all { json!(".*") } else { Value::Null },
        "current": if all {
            json!({"text": "All", "value": "$__all"})
        } else {
            json!({"text": default, "value": default})
        },
        "hide": 0,
    })
}

/// The template variables' `label_values` queries, for the test that checks their metrics.
pub fn variable_queries() -> [(&'static str, String); 2] {
    [
        (
            "queue",
            format!("label_values({}, queue)", m::QUEUE_DESERVED),
        ),
        (
            "resource",
            format!("label_values({}, resource)", m::QUEUE_DESERVED),
        ),
    ]
}

fn panel_json(p: &Panel, id: u32, x: u32, y: u32) -> Value {
    let targets: Vec<Value> = p
        .queries
        .iter()
        .zip('A'..)
        .map(|(q, ref_id)| {
            json!({
                "refId": ref_id.to_string(),
                "datasource": datasource(),
                "expr": q.expr,
                "legendFormat": q.legend,
                "range": true,
            })
        })
        .collect();
    let (kind, options) = match p.chart {
        Chart::TimeSeries => (
            "timeseries",
            json!({
                "legend": {"displayMode": "table", "placement": "bottom", "showLegend": true,
                           "calcs": ["lastNotNull", "max"]},
                "tooltip": {"mode": "multi", "sort": "desc"},
            }),
        ),
        Chart::Stat => (
            "stat",
            json!({
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": false},
                "textMode": "value_and_name",
                "colorMode": "none",
                "graphMode": "none",
            }),
        ),
    };
    json!({
        "id": id,
        "type": kind,
        "title": p.title,
        "description": p.description,
        "datasource": datasource(),
        "gridPos": {"h": HEIGHT, "w": WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
        "options": options,
        "targets": targets,
    })
}

/// The dashboard as Grafana's JSON model.
pub fn dashboard() -> Value {
    let mut panels = Vec::new();
    let mut id = 0;
    let mut y = 0;
    for row in rows() {
        id += 1;
        panels.push(json!({
            "id": id,
            "type": "row",
            "title": row.title,
            "collapsed": false,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            "panels": [],
        }));
        y += 1;
        for pair in row.panels.chunks(2) {
            for (i, p) in pair.iter().enumerate() {
                id += 1;
                panels.push(panel_json(p, id, i as u32 * WIDTH, y));
            }
            y += HEIGHT;
        }
    }
    let [(queue, queue_query), (resource, resource_query)] = variable_queries();
    json!({
        "uid": UID,
        "title": "Gangplank",
        "description": "Queue usage against fair share, gang admission, and the health of \
                        Gangplank's scheduler extender, webhooks and controller.",
        "tags": ["gangplank", "scheduling", "batch"],
        "editable": true,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "templating": {"list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
                "current": {},
                "hide": 0,
            },
            variable(queue, "Queue", &queue_query, true, ""),
            variable(resource, "Resource", &resource_query, false, "cpu"),
        ]},
        "panels": panels,
    })
}

/// The dashboard's JSON text: pretty, keys sorted, ending in a newline.
pub fn render() -> anyhow::Result<String> {
    let mut text =
        serde_json::to_string_pretty(&dashboard()).context("failed to serialize the dashboard")?;
    text.push('\n');
    Ok(text)
}

/// The dashboard in a ConfigMap labelled for Grafana's dashboard sidecar, in the namespace
/// of `manifests/namespace.yaml`.
pub fn configmap() -> anyhow::Result<String> {
    let (label, value) = SIDECAR_LABEL;
    let map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "gangplank-dashboard",
            "namespace": "gangplank-system",
            "labels": {label: value, "app.kubernetes.io/name": "gangplank"},
        },
        "data": {"gangplank.json": render()?},
    });
    let yaml = serde_yaml::to_string(&map).context("failed to serialize the ConfigMap")?;
    Ok(format!("{HEADER}\n{yaml}"))
}

/// First line of the generated ConfigMap.
pub const HEADER: &str = "# Generated by `gangplank dashboard --configmap`; do not edit.";

/// Prints [`render`], or [`configmap`] when `as_configmap`.
pub fn run(as_configmap: bool) -> anyhow::Result<()> {
    let text = if as_configmap {
        configmap()?
    } else {
        render()?
    };
    crate::crdgen::print(&text, "the dashboard")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_never_overlap_and_fill_rows_two_abreast() {
        let model = dashboard();
        let panels = model["panels"].as_array().unwrap();
        let mut taken = std::collections::HashSet::new();
        for p in panels {
            let g = &p["gridPos"];
            let (x, y, w, h) = (
                g["x"].as_u64().unwrap(),
                g["y"].as_u64().unwrap(),
                g["w"].as_u64().unwrap(),
                g["h"].as_u64().unwrap(),
            );
            assert!(x + w <= 24, "{p} is wider than the grid");
            for cell in (x..x + w).flat_map(|cx| (y..y + h).map(move |cy| (cx, cy))) {
                assert!(taken.insert(cell), "{} overlaps another panel", p["title"]);
            }
        }
        let ids: std::collections::HashSet<_> = panels.iter().map(|p| &p["id"]).collect();
        assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    }

    #[test]
    fn every_panel_query_has_its_own_ref_id_and_a_legend() {
        for row in rows() {
            for p in &row.panels {
                assert!(!p.queries.is_empty(), "{} has no query", p.title);
                assert!(p.queries.iter().all(|q| !q.legend.is_empty()));
            }
        }
        let model = dashboard();
        let refs: Vec<&str> = model["panels"][2]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["refId"].as_str().unwrap())
            .collect();
        assert_eq!(refs, ["A"], "the second queue panel has one query");
        let first = &model["panels"][1]["targets"];
        assert_eq!(first[0]["refId"], "A");
        assert_eq!(first[1]["refId"], "B");
    }

    #[test]
    fn histogram_quantiles_keep_the_bucket_label() {
        assert_eq!(
            quantile(0.99, "x_seconds", "verb"),
            "histogram_quantile(0.99, sum by (verb, le) (rate(x_seconds_bucket[$__rate_interval])))"
        );
        assert_eq!(
            quantile(0.5, "x_seconds", ""),
            "histogram_quantile(0.5, sum by (le) (rate(x_seconds_bucket[$__rate_interval])))"
        );
    }

    #[test]
    fn the_configmap_holds_the_dashboard_and_the_sidecar_label() {
        let yaml = configmap().unwrap();
        assert!(yaml.starts_with(HEADER));
        let map: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
        let inner: Value =
            serde_json::from_str(map["data"]["gangplank.json"].as_str().unwrap()).unwrap();
        assert_eq!(inner, dashboard());
    }
}
