//! The dashboard's content: every row and its panels, in order ([`rows`]), with the small
//! vocabulary they are written in (a query and its legend, a rate, a histogram quantile, a
//! panel); [`super`] lays them out and renders them as Grafana's JSON model.

use super::{Chart, Panel, Query, Row};
use crate::metrics::{self as m};

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
pub(super) fn quantile(q: f64, metric: &str, by: &str) -> String {
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
                     with an Error; `waits`: a filter that asked the scheduler to try the pod \
                     again, no node having room Gangplank does not hold; `bad_request`: a body that is not the expected JSON; \
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
                        "Gangplank builds running, by version and commit (more than one during a \
                         rollout).",
                        "short",
                        vec![query(
                            format!("sum by (version, commit) ({})", m::BUILD_INFO),
                            "{{version}} ({{commit}})",
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
