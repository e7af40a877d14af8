//! `gangplank report`: samples the queues and PodGroups every 2 seconds for a while (or reads
//! such a [`History`] again), then says what happened: a text report per queue and per group,
//! and a self-contained HTML page whose charts show each queue's allocated share against its
//! deserved share over time, the groups waiting over time, and each group's timeline (waiting,
//! admitted, running, finished, evicted) with why it waited. The history is kept as JSON
//! (`report.json`), so a report can be rendered again with `--from`.
//!
//! Fetching is separate from rendering: [`sample`], [`timelines`], [`text`] and [`html`] are
//! pure functions of what was fetched.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use gangplank_core::model::quantity::Scale;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde::{Deserialize, Serialize};

use super::groups::why;
use super::render::held;
use crate::api::{PodGroup, Queue};

/// Flags of `gangplank report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The kubeconfig context to use (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Record for this many seconds, sampling every 2 seconds.
    #[arg(long, default_value_t = 300, conflicts_with = "from")]
    pub record_seconds: u64,
    /// Render a recording written before (a `report.json`) instead of recording.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// The resource the charts follow, as named in queue quotas (for example `nvidia.com/gpu`).
    #[arg(long, default_value = "cpu")]
    pub resource: String,
    /// Where to write report.json, report.txt and report.html.
    #[arg(long, default_value = "gangplank-report")]
    pub out: PathBuf,
}

/// How often a report samples the cluster.
pub const EVERY: Duration = Duration::from_secs(2);

/// Reasons of the Events that mark a group's timeline: its gang evicted for another queue's
/// share or for a job of higher priority, the group those evictions made room for, and a
/// group admitted into room reserved for another (backfill).
const MARKED: [&str; 5] = [
    "Reclaimed",
    "Preempted",
    "Reclaiming",
    "Preempting",
    crate::admission_loop::backfills::BACKFILLED,
];

/// Everything a report is made from: the samples of the queues and groups over a while, and
/// the Events that mark the groups' timelines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub started: Timestamp,
    /// The resource the queue figures are in.
    pub resource: String,
    pub samples: Vec<Sample>,
    pub events: Vec<Marked>,
}

/// The queues and groups at `t` seconds after the sampling started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub queues: Vec<QueueSample>,
    pub groups: Vec<GroupSample>,
}

/// A queue at one time, its shares in the history's resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    pub name: String,
    pub weight: i32,
    pub guarantee: f64,
    pub deserved: f64,
    pub allocated: f64,
    pub waiting: i32,
    pub running: i32,
}

/// A PodGroup at one time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSample {
    /// `namespace/name`.
    pub group: String,
    pub queue: String,
    pub phase: String,
    pub placed: i32,
    pub min_member: i32,
    pub why: Option<String>,
}

/// An Event of [`MARKED`] about a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marked {
    pub t: f64,
    pub group: String,
    pub reason: String,
    pub note: String,
}

/// The amount of `resource` in `list`, in its units (CPUs for `cpu`); 0 when absent or
/// unreadable.
fn amount(list: &BTreeMap<String, Quantity>, resource: &str) -> f64 {
    let divisor = match Scale::for_resource(resource) {
        Scale::Milli => 1000.0,
        Scale::Units => 1.0,
    };
    held(list, resource) as f64 / divisor
}

pub fn sample(queues: &[Queue], groups: &[PodGroup], t: f64, resource: &str) -> Sample {
    let mut queues: Vec<QueueSample> = queues
        .iter()
        .map(|q| {
            let status = q.status.clone().unwrap_or_default();
            QueueSample {
                name: q.metadata.name.clone().unwrap_or_default(),
                weight: q.spec.weight,
                guarantee: amount(&q.spec.guarantee, resource),
                deserved: amount(&status.deserved, resource),
                allocated: amount(&status.allocated, resource),
                waiting: status.pending,
                running: status.running,
            }
        })
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    let mut groups: Vec<GroupSample> = groups
        .iter()
        .map(|g| {
            let status = g.status.clone().unwrap_or_default();
            GroupSample {
                group: format!(
                    "{}/{}",
                    g.metadata.namespace.as_deref().unwrap_or_default(),
                    g.metadata.name.as_deref().unwrap_or_default()
                ),
                queue: g.spec.queue_name().to_owned(),
                phase: status.phase.as_str().to_owned(),
                placed: status.scheduled,
                min_member: g.spec.min_member,
                why: why(g),
            }
        })
        .collect();
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    Sample { t, queues, groups }
}

/// The Events of [`MARKED`] about PodGroups, at their time since `started`.
pub fn marked(events: &[Event], started: Timestamp) -> Vec<Marked> {
    let mut out: Vec<Marked> = events
        .iter()
        .filter(|e| MARKED.contains(&e.reason.as_deref().unwrap_or_default()))
        .filter_map(|e| {
            let regarding = e.regarding.as_ref()?;
            if regarding.kind.as_deref() != Some("PodGroup") {
                return None;
            }
            let at = e
                .event_time
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
            let t = (at - started).total(k8s_openapi::jiff::Unit::Second).ok()?;
            (t >= 0.0).then(|| Marked {
                t,
                group: format!(
                    "{}/{}",
                    regarding.namespace.as_deref().unwrap_or_default(),
                    regarding.name.as_deref().unwrap_or_default()
                ),
                reason: e.reason.clone().unwrap_or_default(),
                note: e.note.clone().unwrap_or_default(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.t.total_cmp(&b.t));
    out
}

/// One stretch of a group's life in one phase (and, running, with one count of members beyond
/// its minimum).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    pub phase: String,
    /// Running, members placed beyond `minMember`: an elastic gang's extras, a gang of
    /// sub-groups' further instances.
    pub beyond: i32,
    pub from: f64,
    pub to: f64,
    /// Why it waited or failed in this stretch, as last said in it.
    pub why: Option<String>,
}

/// A group's life over the samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub group: String,
    pub queue: String,
    pub min_member: i32,
    pub segments: Vec<Segment>,
    pub events: Vec<Marked>,
}

/// Each group's timeline, in the order groups first appeared. A stretch ends where the next
/// sample shows another phase (or, running, another count of members beyond `minMember`), or
/// at the group's last sample; a group absent from a sample (deleted) ends there.
pub fn timelines(history: &History) -> Vec<Timeline> {
    let mut order: Vec<String> = Vec::new();
    let mut lines: BTreeMap<String, Timeline> = BTreeMap::new();
    for (i, sample) in history.samples.iter().enumerate() {
        let until = history.samples.get(i + 1).map_or(sample.t, |next| next.t);
        for g in &sample.groups {
            let line = lines.entry(g.group.clone()).or_insert_with(|| {
                order.push(g.group.clone());
                Timeline {
                    group: g.group.clone(),
                    queue: g.queue.clone(),
                    min_member: g.min_member,
                    segments: Vec::new(),
                    events: Vec::new(),
                }
            });
            let beyond = if g.phase == "Running" {
                (g.placed - g.min_member).max(0)
            } else {
                0
            };
            match line.segments.last_mut() {
                Some(last)
                    if last.phase == g.phase && last.beyond == beyond && last.to >= sample.t =>
                {
                    last.to = until;
                    if g.why.is_some() {
                        last.why = g.why.clone();
                    }
                }
                _ => line.segments.push(Segment {
                    phase: g.phase.clone(),
                    beyond,
                    from: sample.t,
                    to: until,
                    why: g.why.clone(),
                }),
            }
        }
    }
    for event in &history.events {
        if let Some(line) = lines.get_mut(&event.group) {
            line.events.push(event.clone());
        }
    }
    order.into_iter().filter_map(|g| lines.remove(&g)).collect()
}

/// Each queue's figures over time, `[t, allocated, deserved, waiting groups]`; a queue that
/// held, deserved and waited for nothing the whole time is left out.
fn queue_series(history: &History) -> BTreeMap<String, Vec<[f64; 4]>> {
    let mut series: BTreeMap<String, Vec<[f64; 4]>> = BTreeMap::new();
    for sample in &history.samples {
        for q in &sample.queues {
            series.entry(q.name.clone()).or_default().push([
                sample.t,
                q.allocated,
                q.deserved,
                f64::from(q.waiting),
            ]);
        }
    }
    series.retain(|_, points| points.iter().any(|p| p[1..].iter().any(|&v| v != 0.0)));
    series
}

fn seconds(t: f64) -> String {
    // + 0.0 turns the -0.0 of an empty sum into 0.
    format!("{:.0} s", t + 0.0)
}

/// What happened, per queue and per group, for a terminal.
pub fn text(history: &History) -> String {
    let resource = &history.resource;
    let span = history.samples.last().map_or(0.0, |s| s.t);
    let mut out = format!(
        "Gangplank report: {} samples over {}, started {}; queue figures in {resource}.\n\nQUEUES\n",
        history.samples.len(),
        seconds(span),
        history.started
    );
    for (name, points) in queue_series(history) {
        let peak = points.iter().map(|p| p[1]).fold(0.0, f64::max);
        let most_waiting = points.iter().map(|p| p[3]).fold(0.0, f64::max);
        let above: f64 = points
            .windows(2)
            .filter(|w| w[0][1] > w[0][2] + 1e-9)
            .map(|w| w[1][0] - w[0][0])
            .sum();
        let below_with_waiting: f64 = points
            .windows(2)
            .filter(|w| w[0][1] + 1e-9 < w[0][2] && w[0][3] > 0.0)
            .map(|w| w[1][0] - w[0][0])
            .sum();
        let weight = history
            .samples
            .iter()
            .rev()
            .find_map(|s| s.queues.iter().find(|q| q.name == name))
            .map_or(0, |q| q.weight);
        out.push_str(&format!(
            "  {name} (weight {weight}): at most {peak} {resource} allocated; above its deserved share for {} (borrowing idle room), below it with groups waiting for {}; at most {most_waiting} groups waiting\n",
            seconds(above),
            seconds(below_with_waiting),
        ));
    }
    out.push_str("\nGROUPS (in order of arrival)\n");
    for line in timelines(history) {
        out.push_str(&format!(
            "  {} (queue {}, gang of {}):\n",
            line.group, line.queue, line.min_member
        ));
        for segment in &line.segments {
            let why = segment
                .why
                .as_deref()
                .filter(|_| matches!(segment.phase.as_str(), "Pending" | "Failed" | "Unknown"))
                .map(|w| format!(": {w}"))
                .unwrap_or_default();
            let beyond = match segment.beyond {
                0 => String::new(),
                n => format!(", {n} members beyond minMember"),
            };
            out.push_str(&format!(
                "    {:>6} to {:>6}  {}{beyond}{why}\n",
                seconds(segment.from),
                seconds(segment.to),
                segment.phase
            ));
        }
        for event in &line.events {
            out.push_str(&format!(
                "    at {:>6}   {}: {}\n",
                seconds(event.t),
                event.reason,
                event.note
            ));
        }
    }
    out
}

/// The page: charts drawn by its own script from the history embedded in it, so it needs no
/// network and no file beside it.
pub fn html(history: &History) -> String {
    let data = serde_json::json!({
        "started": history.started.to_string(),
        "resource": history.resource,
        "queues": queue_series(history),
        "timelines": timelines(history),
        "text": text(history),
    });
    // `</` inside the script would end it.
    let data = data.to_string().replace("</", "<\\/");
    include_str!("report.html").replace("/*DATA*/null", &data)
}

pub async fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let history = match &args.from {
        Some(path) => serde_json::from_slice(&std::fs::read(path)?)?,
        None => record(args).await?,
    };
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("report.json"),
        serde_json::to_vec_pretty(&history)?,
    )?;
    let text = text(&history);
    std::fs::write(args.out.join("report.txt"), &text)?;
    std::fs::write(args.out.join("report.html"), html(&history))?;
    print!("{text}");
    println!(
        "\nWrote {0}/report.txt, {0}/report.html (open it in a browser) and {0}/report.json.",
        args.out.display()
    );
    Ok(())
}

async fn record(args: &ReportArgs) -> anyhow::Result<History> {
    let (client, _) = super::client(args.context.as_deref()).await?;
    let queues: Api<Queue> = Api::all(client.clone());
    let groups: Api<PodGroup> = Api::all(client.clone());
    let events: Api<Event> = Api::all(client);
    let started = Timestamp::now();
    let began = std::time::Instant::now();
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(EVERY);
    while began.elapsed() <= Duration::from_secs(args.record_seconds) {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {}
        }
        let t = began.elapsed().as_secs_f64();
        let all = ListParams::default();
        let (q, g) = tokio::join!(queues.list(&all), groups.list(&all));
        samples.push(sample(&q?.items, &g?.items, t, &args.resource));
    }
    let events = events.list(&ListParams::default()).await?.items;
    Ok(History {
        started,
        resource: args.resource.clone(),
        samples,
        events: marked(&events, started),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, phase: &str, why: Option<&str>) -> GroupSample {
        GroupSample {
            group: format!("ml/{name}"),
            queue: "research".into(),
            phase: phase.into(),
            placed: 0,
            min_member: 4,
            why: why.map(str::to_owned),
        }
    }

    fn history(samples: Vec<(f64, Vec<GroupSample>)>) -> History {
        History {
            started: Timestamp::UNIX_EPOCH,
            resource: "nvidia.com/gpu".into(),
            samples: samples
                .into_iter()
                .map(|(t, groups)| Sample {
                    t,
                    queues: vec![],
                    groups,
                })
                .collect(),
            events: vec![Marked {
                t: 5.0,
                group: "ml/a".into(),
                reason: "Reclaimed".into(),
                note: "evicted".into(),
            }],
        }
    }

    #[test]
    fn a_groups_samples_become_one_stretch_per_phase_with_the_last_reason_it_gave() {
        let history = history(vec![
            (0.0, vec![group("a", "Pending", Some("DoesNotFit: 2 of 4"))]),
            (2.0, vec![group("a", "Pending", Some("DoesNotFit: 3 of 4"))]),
            (
                4.0,
                vec![group("a", "Running", None), group("b", "Pending", None)],
            ),
            (6.0, vec![group("b", "Pending", None)]),
        ]);
        let lines = timelines(&history);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].group, "ml/a");
        assert_eq!(
            lines[0].segments,
            vec![
                Segment {
                    phase: "Pending".into(),
                    beyond: 0,
                    from: 0.0,
                    to: 4.0,
                    why: Some("DoesNotFit: 3 of 4".into())
                },
                Segment {
                    phase: "Running".into(),
                    beyond: 0,
                    from: 4.0,
                    to: 6.0,
                    why: None
                },
            ]
        );
        assert_eq!(lines[0].events.len(), 1, "the eviction marks its group");
        assert_eq!(lines[1].segments[0].from, 4.0);
        assert_eq!(lines[1].segments[0].to, 6.0);
    }

    #[test]
    fn a_running_gang_that_grows_beyond_its_minimum_starts_a_stretch_that_says_by_how_much() {
        let placed = |n: i32| GroupSample {
            placed: n,
            ..group("svc", "Running", None)
        };
        let history = history(vec![
            (0.0, vec![placed(4)]),
            (2.0, vec![placed(4)]),
            (4.0, vec![placed(8)]),
            (6.0, vec![placed(8)]),
        ]);
        let segments = &timelines(&history)[0].segments;
        let stretches: Vec<_> = segments.iter().map(|s| (s.from, s.to, s.beyond)).collect();
        assert_eq!(stretches, [(0.0, 4.0, 0), (4.0, 6.0, 4)]);
        let text = text(&history);
        assert!(
            text.contains("     4 s to    6 s  Running, 4 members beyond minMember\n"),
            "{text}"
        );
    }

    #[test]
    fn a_group_that_comes_back_in_the_same_phase_after_a_gap_starts_a_new_stretch() {
        let history = history(vec![
            (0.0, vec![group("a", "Running", None)]),
            (2.0, vec![]),
            (4.0, vec![group("a", "Running", None)]),
            (6.0, vec![group("a", "Running", None)]),
        ]);
        let segments = &timelines(&history)[0].segments;
        assert_eq!(segments.len(), 2);
        assert_eq!((segments[0].from, segments[0].to), (0.0, 2.0));
        assert_eq!((segments[1].from, segments[1].to), (4.0, 6.0));
    }

    #[test]
    fn the_text_says_how_long_each_queue_borrowed_and_why_each_group_waited() {
        let mut history = history(vec![
            (0.0, vec![group("a", "Pending", Some("DoesNotFit: 2 of 4"))]),
            (10.0, vec![group("a", "Running", None)]),
            (20.0, vec![group("a", "Running", None)]),
        ]);
        let queue = |allocated: f64, waiting: i32| QueueSample {
            name: "research".into(),
            weight: 2,
            guarantee: 0.0,
            deserved: 8.0,
            allocated,
            waiting,
            running: 0,
        };
        history.samples[0].queues = vec![queue(0.0, 1)];
        history.samples[1].queues = vec![queue(12.0, 0)];
        history.samples[2].queues = vec![queue(12.0, 0)];
        let text = text(&history);
        assert!(
            text.contains("research (weight 2): at most 12 nvidia.com/gpu allocated; above its deserved share for 10 s (borrowing idle room), below it with groups waiting for 10 s; at most 1 groups waiting"),
            "{text}"
        );
        assert!(
            text.contains("0 s to   10 s  Pending: DoesNotFit: 2 of 4"),
            "{text}"
        );
        assert!(text.contains("at    5 s   Reclaimed: evicted"), "{text}");
    }

    #[test]
    fn the_page_embeds_the_history_so_that_no_script_end_tag_inside_it_closes_the_script() {
        let mut history = history(vec![(
            0.0,
            vec![group("a", "Pending", Some("</script><b>"))],
        )]);
        history.events.clear();
        let page = html(&history);
        assert!(!page.contains("/*DATA*/null"));
        assert_eq!(page.matches("</script>").count(), 1, "only the page's own");
        assert!(page.contains(r"<\/script><b>"));
    }
}
