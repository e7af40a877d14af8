//! The report as one page (`report.html` beside this file): the [`Report`] embedded in it as
//! JSON, from which the page's own script writes the tables and draws the charts, so it needs
//! no network and no file beside it. Per queue, each configuration's waits, evictions and share
//! held, the best highlighted; the cluster's makespan and utilisation; charts over virtual time
//! of each queue's allocated against deserved share, of utilisation and of waiting groups, one
//! colour per configuration; and each configuration's longest waits with their reasons. The
//! script puts names and reasons in as text, never as markup.

use super::report::Report;

/// The page comparing `report`'s configurations.
pub fn html(report: &Report) -> String {
    let data =
        serde_json::to_string(report).expect("a report serialises: its maps have string keys");
    include_str!("report.html").replace("/*DATA*/null", &embeddable(&data))
}

/// `json` safe inside a `<script>` element: every `<` (which only a string holds in JSON)
/// written as `\u003c`, the same string to JSON and to JavaScript, so that no `</script>` ends
/// the element and no `<!--` changes how the browser reads the rest of it.
fn embeddable(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::simulate::report::{Run, Series};
    use gangplank_core::simulate::{LongWait, QueueSummary};

    const EVIL: &str = "</script><!--<script>alert(1)</script>";

    fn report() -> Report {
        let queue = |name: &str| QueueSummary {
            queue: name.to_owned(),
            jobs: 3,
            started: 2,
            finished: 2,
            withdrawn: 0,
            never_started: 1,
            wait_p50_seconds: Some(12),
            wait_p90_seconds: Some(7_500),
            wait_p99_seconds: None,
            evictions: 1,
            share_held: Some(0.75),
        };
        let run = Run {
            name: format!("weights {EVIL}"),
            description: "a.yaml".to_owned(),
            nodes: 4,
            queues: vec![queue("research"), queue(EVIL)],
            makespan_seconds: 90_000,
            finished: 4,
            evictions: 2,
            utilisation: BTreeMap::from([("cpu".to_owned(), 0.5)]),
            longest: vec![LongWait {
                index: 0,
                job: format!("team/{EVIL}"),
                queue: EVIL.to_owned(),
                wait_seconds: 600,
                started: false,
                why: Some(format!("DoesNotFit: {EVIL} & more")),
            }],
            series: Series {
                t: vec![0, 10, 20],
                allocated: BTreeMap::from([(EVIL.to_owned(), vec![0.0, 1.5, 2.0])]),
                deserved: BTreeMap::from([(EVIL.to_owned(), vec![4.0, 4.0, 4.0])]),
                waiting: BTreeMap::from([(EVIL.to_owned(), vec![0, 2, 1])]),
                utilisation: vec![0.0, 0.25, 0.5],
            },
            events: 10,
            passes: 5,
            seconds: 0.01,
        };
        Report {
            source: format!("trace {EVIL}"),
            jobs: 6,
            nodes: 4,
            resource: "cpu".to_owned(),
            configurations: vec![run],
        }
    }

    /// The JSON the page's script starts from.
    fn embedded(page: &str) -> &str {
        let start = page.find("const DATA = ").expect("the page declares DATA") + 13;
        let end = start + page[start..].find(";\n").expect("DATA ends its line");
        &page[start..end]
    }

    #[test]
    fn the_page_embeds_the_whole_report_as_json_that_reads_back_the_same() {
        let report = report();
        let page = html(&report);
        assert!(!page.contains("/*DATA*/null"));
        let back: Report = serde_json::from_str(embedded(&page)).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn no_script_end_tag_or_comment_inside_names_can_end_the_script_element() {
        let page = html(&report());
        assert_eq!(page.matches("</script>").count(), 1, "only the page's own");
        assert_eq!(page.matches("<script>").count(), 1, "only the page's own");
        assert!(!page.contains("<!--"));
        assert!(!embedded(&page).contains('<'));
        assert!(embedded(&page).contains(r"\u003c/script>\u003c!--"));
    }
}
