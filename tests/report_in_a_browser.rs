//! The HTML report of `gangplank report` opened in a real browser (headless Chromium, from
//! Debian's package): rendered from the samples of the demo's report (`e2e/demo`), its script draws a
//! chart of allocated against deserved share for each queue, one of the waiting groups, and the
//! timeline of every group, with data in each; and the screenshot shows them.
//!
//! Needs Chromium (`scripts/install-deps.sh` installs it; `GANGPLANK_CHROMIUM` names another
//! binary), so it is ignored by default and run by `./test.sh`:
//! `cargo test --test report_in_a_browser -- --ignored`.

mod browser;

use std::path::PathBuf;

use browser::{coloured_share, dom, screenshot};
use gangplank::cli::report::{History, html, timelines};

const HISTORY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/report/demo-report.json"
);

/// The rendered page in a fresh directory, and that directory.
fn page() -> (History, PathBuf, tempfile::TempDir) {
    let history: History = serde_json::from_slice(&std::fs::read(HISTORY).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, html(&history)).unwrap();
    (history, path, dir)
}

/// The `data-points` of every polyline the script drew in the chart `id`.
fn series_points(dom: &str, id: &str) -> Vec<usize> {
    let start = dom
        .find(&format!(r#"data-chart="{id}""#))
        .unwrap_or_else(|| panic!("no chart {id} in the page"));
    let chart = &dom[start..start + dom[start..].find("</svg>").unwrap()];
    chart
        .match_indices(r#"data-points=""#)
        .map(|(i, m)| {
            let rest = &chart[i + m.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

#[test]
#[ignore = "needs Chromium: run by ./test.sh"]
fn the_browser_draws_every_queues_share_the_waiting_groups_and_each_groups_timeline() {
    let (history, path, dir) = page();
    let dom = dom(dir.path(), &path);
    let samples = history.samples.len();
    let queues: Vec<&str> = history.samples[0]
        .queues
        .iter()
        .map(|q| q.name.as_str())
        .filter(|q| *q != "default")
        .collect();
    assert!(queues.len() >= 3, "{queues:?}");
    for queue in &queues {
        assert_eq!(
            series_points(&dom, &format!("share-{queue}")),
            [samples, samples],
            "queue {queue}: allocated and deserved, a point per sample"
        );
    }
    assert!(series_points(&dom, "waiting").iter().all(|&n| n == samples));
    let groups = timelines(&history).len();
    let timeline = &dom[dom.find(r#"data-chart="timeline""#).unwrap()..];
    let timeline = &timeline[..timeline.find("</svg>").unwrap()];
    let stretches = timeline.matches("data-phase=").count();
    assert!(
        stretches >= groups,
        "{stretches} stretches for {groups} groups"
    );
    for phase in ["Pending", "Running", "Completed"] {
        assert!(
            timeline.contains(&format!(r#"data-phase="{phase}""#)),
            "no {phase} stretch drawn"
        );
    }
    assert!(timeline.contains("data-event="), "no eviction drawn");
}

#[test]
#[ignore = "needs Chromium: run by ./test.sh"]
fn the_screenshot_of_the_report_shows_its_charts() {
    let (_, path, dir) = page();
    let shot = screenshot(dir.path(), &path, "report.png", "1280,1600");
    let (_, _, share) = coloured_share(&shot);
    // Text and grid lines are grey; the series, the phases' bars and the ticks are colored.
    assert!(
        share > 0.01,
        "only {:.2}% of the screenshot is colored",
        share * 100.0
    );
    if let Ok(keep) = std::env::var("GANGPLANK_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
