//! The Grafana dashboard: the checked-in files are what `gangplank dashboard` prints, and every
//! query in it is PromQL that names metrics Gangplank exports, with labels they carry, used as
//! their type allows; every exported metric is charted somewhere.
//!
//! With `GANGPLANK_UPDATE_DASHBOARD=1` the test rewrites both files instead of failing.

mod checked_in;

use std::collections::{BTreeSet, HashSet};

use gangplank::dashboard;
use gangplank::metrics::{CATALOGUE, Doc, MetricKind};
use promql_parser::parser::{self, Expr, LabelModifier};

const JSON: &str = "manifests/grafana/gangplank-dashboard.json";
const CONFIGMAP: &str = "manifests/grafana/gangplank-dashboard-configmap.yaml";
/// The Helm chart's copy, which its ConfigMap template wraps.
const IN_THE_CHART: &str = "charts/gangplank/files/gangplank-dashboard.json";
const UPDATE: &str = "GANGPLANK_UPDATE_DASHBOARD";

#[test]
fn checked_in_dashboard_files_are_current() {
    let rendered = dashboard::render().unwrap();
    checked_in::assert_current(
        JSON,
        &rendered,
        UPDATE,
        &format!("cargo run -- dashboard > {JSON}"),
    );
    checked_in::assert_current(
        IN_THE_CHART,
        &rendered,
        UPDATE,
        &format!("cargo run -- dashboard > {IN_THE_CHART}"),
    );
    checked_in::assert_current(
        CONFIGMAP,
        &dashboard::configmap().unwrap(),
        UPDATE,
        &format!("cargo run -- dashboard --configmap > {CONFIGMAP}"),
    );
}

/// A series a query reads: the catalogue entry, and whether it is a histogram's `_bucket`.
struct Read {
    doc: &'static Doc,
    bucket: bool,
}

/// What one query reads and groups by, or the problems found on the way.
#[derive(Default)]
struct Walk {
    reads: Vec<Read>,
    /// Labels in matchers, `by (...)` and `on (...)`.
    labels: BTreeSet<String>,
    problems: Vec<String>,
}

fn resolve(name: &str) -> Option<(&'static Doc, bool)> {
    CATALOGUE.iter().find_map(|doc| {
        if doc.name == name && doc.kind != MetricKind::Histogram {
            return Some((doc, false));
        }
        let suffix = name.strip_prefix(doc.name)?;
        (doc.kind == MetricKind::Histogram && ["_bucket", "_sum", "_count"].contains(&suffix))
            .then_some((doc, suffix == "_bucket"))
    })
}

impl Walk {
    fn modifier(&mut self, m: &Option<LabelModifier>) {
        if let Some(m) = m {
            self.labels.extend(m.labels().labels.iter().cloned());
        }
    }

    fn selector(&mut self, vs: &parser::VectorSelector, rated: bool) {
        let name = vs.name.as_deref().unwrap_or_default();
        let Some((doc, bucket)) = resolve(name) else {
            self.problems
                .push(format!("`{name}` is not a metric Gangplank exports"));
            return;
        };
        let counting = doc.kind == MetricKind::Counter || doc.kind == MetricKind::Histogram;
        if counting && !rated {
            self.problems.push(format!(
                "`{name}` is a {} and must be read through rate() or increase()",
                doc.kind.as_str()
            ));
        }
        if !counting && rated {
            self.problems
                .push(format!("`{name}` is a gauge: rate() of it means nothing"));
        }
        for matcher in &vs.matchers.matchers {
            if matcher.name != "__name__" {
                self.labels.insert(matcher.name.clone());
            }
        }
        self.reads.push(Read { doc, bucket });
    }

    fn expr(&mut self, e: &Expr, rated: bool) {
        match e {
            Expr::Aggregate(a) => {
                self.modifier(&a.modifier);
                self.expr(&a.expr, rated);
            }
            Expr::Unary(u) => self.expr(&u.expr, rated),
            Expr::Binary(b) => {
                if let Some(m) = &b.modifier {
                    self.modifier(&m.matching);
                }
                self.expr(&b.lhs, rated);
                self.expr(&b.rhs, rated);
            }
            Expr::Paren(p) => self.expr(&p.expr, rated),
            Expr::Subquery(s) => self.expr(&s.expr, rated),
            Expr::VectorSelector(vs) => self.selector(vs, rated),
            Expr::MatrixSelector(ms) => self.selector(&ms.vs, rated),
            Expr::Call(c) => {
                let rates = matches!(c.func.name, "rate" | "increase" | "irate");
                for arg in &c.args.args {
                    self.expr(arg, rated || rates);
                }
            }
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
    }

    /// Every label used must be one that some series read here carries (`le` for buckets).
    fn check_labels(&mut self, legend: &str) {
        let known: HashSet<&str> = self
            .reads
            .iter()
            .flat_map(|r| r.doc.labels.iter().copied().chain(r.bucket.then_some("le")))
            .collect();
        let in_legend = legend
            .split("{{")
            .skip(1)
            .filter_map(|s| s.split_once("}}").map(|(l, _)| l.trim().to_owned()));
        for label in self.labels.iter().cloned().chain(in_legend) {
            if !known.contains(label.as_str()) {
                self.problems.push(format!(
                    "label `{label}` is not on any series this query reads"
                ));
            }
        }
    }
}

/// Grafana's interval variable, which PromQL itself does not know.
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
}

#[test]
fn every_query_is_promql_over_exported_metrics_and_their_labels() {
    let mut problems = Vec::new();
    let mut charted = HashSet::new();
    for row in dashboard::rows() {
        for panel in &row.panels {
            for q in &panel.queries {
                let expr = match parser::parse(&as_promql(&q.expr)) {
                    Ok(expr) => expr,
                    Err(e) => {
                        problems.push(format!("{}: `{}` does not parse: {e}", panel.title, q.expr));
                        continue;
                    }
                };
                let mut walk = Walk::default();
                walk.expr(&expr, false);
                walk.check_labels(&q.legend);
                charted.extend(walk.reads.iter().map(|r| r.doc.name));
                problems.extend(
                    walk.problems
                        .into_iter()
                        .map(|p| format!("{}: `{}`: {p}", panel.title, q.expr)),
                );
            }
        }
    }
    for doc in CATALOGUE {
        if !charted.contains(doc.name) {
            problems.push(format!("`{}` is exported but no panel charts it", doc.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn template_variables_read_labels_the_metric_has() {
    for (variable, query) in dashboard::variable_queries() {
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .unwrap_or_else(|| panic!("${variable}: `{query}` is not label_values(metric, label)"));
        let (metric, label) = inner.split_once(',').expect("metric, label");
        let (doc, _) = resolve(metric.trim()).unwrap_or_else(|| panic!("${variable}: {metric}"));
        assert!(
            doc.labels.contains(&label.trim()),
            "${variable}: {metric} has no label {label}"
        );
    }
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let problems = |expr: &str, legend: &str| {
        let mut walk = Walk::default();
        walk.expr(&parser::parse(&as_promql(expr)).unwrap(), false);
        walk.check_labels(legend);
        walk.problems
    };
    assert!(problems("sum(rate(gangplank_nope_total[5m]))", "")[0].contains("not a metric"));
    assert!(problems("gangplank_extender_requests_total", "")[0].contains("rate()"));
    assert!(problems("rate(gangplank_cache_pods[5m])", "")[0].contains("gauge"));
    assert!(problems("sum by (zone) (gangplank_cache_pods)", "")[0].contains("`zone`"));
    assert!(problems("gangplank_queue_deserved", "{{ verb }}")[0].contains("`verb`"));
    assert!(
        problems(
            "histogram_quantile(0.9, sum by (le, verb) (rate(gangplank_extender_request_duration_seconds_bucket[$__rate_interval])))",
            "{{verb}}"
        )
        .is_empty()
    );
}
