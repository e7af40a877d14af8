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

mod panels;

pub use panels::rows;

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
    use super::panels::quantile;
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
