//! The HTML page of `gangplank simulate` opened in a real browser (headless Chromium, from
//! Debian's package): rendered from two real runs of the core's simulator on one small workload
//! (the same jobs and nodes, the queues weighted otherwise), its script draws, for each queue,
//! a chart of allocated against deserved share and one of waiting groups, and one of the
//! cluster's utilisation, a line per configuration with a point per sample; it writes the
//! tables, the waits as `report::duration` words them; a queue named like markup is shown as
//! text and runs nothing; and the screenshot shows the charts.
//!
//! Needs Chromium (`scripts/install-deps.sh` installs it; `GANGPLANK_CHROMIUM` names another
//! binary), so it is ignored by default and run by `./test.sh`:
//! `cargo test --test simulate_in_a_browser -- --ignored`.

mod browser;

use std::path::PathBuf;
use std::time::Instant;

use browser::{coloured_share, dom, screenshot};
use gangplank::simulate::html::html;
use gangplank::simulate::report::{Report, Run, chart_resource, duration};
use gangplank_core::model::{Node, Queue, Resources};
use gangplank_core::simulate::{Job, Setup, run};

/// A queue whose name, if the page let it in as markup, would end the data's script element
/// and mark the document.
const EVIL: &str =
    "ops</script><script>document.documentElement.setAttribute('data-pwned','')</script>";

fn gpus(n: i64) -> Resources {
    Resources::from([("cpu", n * 4_000), ("nvidia.com/gpu", n)])
}

/// Thirty gangs over three queues, arriving a minute apart, more than the cluster runs at once.
fn jobs() -> Vec<Job> {
    let queues = ["research", "prod", EVIL];
    (0..30)
        .map(|i: i64| {
            let members = [1, 2, 4][(i % 3) as usize];
            Job {
                name: format!("job-{i}"),
                namespace: "team".to_owned(),
                queue: queues[(i as usize * 7 / 3) % 3].to_owned(),
                arrival_ms: i * 60_000,
                members: (0..members).map(|_| gpus(2)).collect(),
                min_member: members,
                gang: true,
                priority: 0,
                runtime_ms: (900 + (i * 337) % 2_400) * 1_000,
                runtimes_ms: Vec::new(),
                deleted_at_ms: None,
                expected_runtime: None,
                sub_groups: Vec::new(),
                constraints: Vec::new(),
                labels: Vec::new(),
            }
        })
        .collect()
}

fn nodes() -> Vec<Node> {
    (0..4)
        .map(|i| Node {
            name: format!("gpu-{i}"),
            allocatable: gpus(8),
            ..Node::default()
        })
        .collect()
}

/// The workload run under equal weights and under research weighted four times, as a report.
fn report() -> Report {
    let (jobs, nodes) = (jobs(), nodes());
    let configurations = [("equal", 1), ("research-x4", 4)]
        .into_iter()
        .map(|(name, weight)| {
            let queues = ["research", "prod", EVIL]
                .into_iter()
                .map(|q| {
                    let mut queue = Queue::new(q);
                    if q == "research" {
                        queue.weight = weight;
                    }
                    queue
                })
                .collect();
            let setup = Setup {
                nodes: nodes.clone(),
                queues,
                settings: gangplank::config::ServeArgs::defaults().gang_settings(),
                origin: Instant::now(),
                sample_every: 60,
                binds_per_second: None,
            };
            let began = Instant::now();
            let outcome = run(&setup, &jobs);
            let resource = chart_resource(&outcome.capacity);
            Run::of(
                name,
                &format!("research weight {weight}"),
                nodes.len(),
                &jobs,
                &outcome,
                resource,
                began.elapsed().as_secs_f64(),
            )
        })
        .collect();
    Report {
        source: "a test workload".to_owned(),
        jobs: jobs.len(),
        nodes: nodes.len(),
        resource: "nvidia.com/gpu".to_owned(),
        configurations,
    }
}

/// The rendered page in a fresh directory, and that directory.
fn page() -> (Report, PathBuf, tempfile::TempDir) {
    let report = report();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("simulate.html");
    std::fs::write(&path, html(&report)).unwrap();
    (report, path, dir)
}

/// `text` as the browser writes it into an attribute value of the DOM it dumps (Chromium
/// escapes `<` and `>` there too since version 138).
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The `data-series` and `data-points` of every polyline the script drew in the chart `id`.
fn series(dom: &str, id: &str) -> Vec<(String, usize)> {
    let start = [id.to_owned(), attribute(id)]
        .iter()
        .find_map(|id| dom.find(&format!(r#"data-chart="{id}""#)))
        .unwrap_or_else(|| panic!("no chart {id} in the page"));
    let chart = &dom[start..start + dom[start..].find("</svg>").unwrap()];
    let value = |line: &str, name: &str| {
        let from = line.find(&format!(r#"{name}=""#)).unwrap() + name.len() + 2;
        line[from..from + line[from..].find('"').unwrap()].to_owned()
    };
    chart
        .split("<polyline ")
        .skip(1)
        .map(|line| {
            (
                value(line, "data-series"),
                value(line, "data-points").parse().unwrap(),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs Chromium: run by ./test.sh"]
fn the_browser_draws_each_queue_and_the_cluster_a_line_per_configuration_and_shows_names_as_text() {
    let (report, path, dir) = page();
    let dom = dom(dir.path(), &path);
    let queues: Vec<&String> = report.configurations[0].series.allocated.keys().collect();
    assert_eq!(queues.len(), 3, "{queues:?}");
    for queue in &queues {
        let mut shares = Vec::new();
        let mut waiting = Vec::new();
        for run in &report.configurations {
            let n = run.series.t.len();
            assert!(n > 10, "{}: {n} samples", run.name);
            assert_eq!(run.series.allocated[*queue].len(), n);
            shares.push((format!("{} allocated", run.name), n));
            shares.push((format!("{} deserved", run.name), n));
            waiting.push((run.name.clone(), n));
        }
        assert_eq!(series(&dom, &format!("share-{queue}")), shares, "{queue}");
        assert_eq!(
            series(&dom, &format!("waiting-{queue}")),
            waiting,
            "{queue}"
        );
    }
    let utilisation: Vec<(String, usize)> = report
        .configurations
        .iter()
        .map(|run| (run.name.clone(), run.series.t.len()))
        .collect();
    assert_eq!(series(&dom, "utilisation"), utilisation);

    // The weights change the outcome, so the page compares something.
    let [equal, research] = &report.configurations[..] else {
        panic!("two configurations")
    };
    assert_ne!(
        equal.series.deserved["research"],
        research.series.deserved["research"]
    );
    // The tables' waits, in the words the text report uses.
    for run in &report.configurations {
        for q in &run.queues {
            for wait in [q.wait_p50_seconds, q.wait_p90_seconds, q.wait_p99_seconds] {
                let words = wait.map_or_else(|| "-".to_owned(), duration);
                assert!(dom.contains(&format!(">{words}</td>")), "{words}");
            }
        }
        assert!(
            dom.contains(&format!(">{}</td>", duration(run.makespan_seconds))),
            "makespan of {}",
            run.name
        );
    }
    assert!(dom.contains(r#"class="best""#), "no best value highlighted");

    // The queue named like markup: shown as text, run nowhere.
    assert!(
        !dom.contains("data-pwned=\""),
        "the queue's name ran as a script"
    );
    assert_eq!(dom.matches("<script").count(), 1, "only the page's own");
    let shown_as_text = EVIL.replace('<', "&lt;").replace('>', "&gt;");
    assert!(
        dom.contains(&format!(
            r#"<td class="text name queue" rowspan="2">{shown_as_text}</td>"#
        )),
        "the queue's name is not in its table as text"
    );
    assert!(dom.contains(&format!("queue {shown_as_text}</figcaption>")));
}

#[test]
#[ignore = "needs Chromium: run by ./test.sh"]
fn the_screenshot_of_the_simulation_page_shows_its_charts() {
    let (_, path, dir) = page();
    let shot = screenshot(dir.path(), &path, "simulate.png", "1280,2400");
    let bytes = std::fs::metadata(&shot).unwrap().len();
    assert!(bytes > 50_000, "a screenshot of {bytes} bytes shows little");
    let (width, height, share) = coloured_share(&shot);
    assert_eq!((width, height), (1280, 2400));
    // Text, grid lines and tables are grey; the series and the swatches are colored.
    assert!(
        share > 0.005,
        "only {:.2}% of the screenshot is colored",
        share * 100.0
    );
    if let Ok(keep) = std::env::var("GANGPLANK_SIMULATE_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
