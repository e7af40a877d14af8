//! The commands users run (`gangplank queues`, `groups`, `why`, `report`), as the built binary
//! and as a kubectl plugin, against the local control plane.

use std::process::Command;

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::support::{Cluster, eventually, managed_pod, pod_group, run_dir};

/// Runs the `gangplank` binary with `args` on the local cluster's kubeconfig; its stdout.
pub fn gangplank(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .args(args)
        .env("KUBECONFIG", run_dir().join("kubeconfig"))
        .output()
        .expect("failed to run gangplank");
    assert!(
        output.status.success(),
        "gangplank {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn groups_why_and_queues_tell_a_user_why_a_gang_waits() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("cli").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // Eight pods of a whole node each on four nodes: it never fits.
    groups
        .create(&PostParams::default(), &pod_group("huge", 8, None))
        .await
        .unwrap();
    for i in 0..8 {
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("huge-{i}"), Some("huge"), 32, json!({})),
        )
        .await
        .unwrap();
    }
    // Once all eight exist, the reason stays: the gang does not fit.
    let reason = "DoesNotFit";
    eventually("huge refused admission for want of room", 30, || async {
        let status = groups.get("huge").await.ok()?.status?;
        let admitted = status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Admitted")?;
        (admitted.status == "False" && admitted.reason == reason).then_some(())
    })
    .await;

    let table = gangplank(&["groups", "-n", &ns.name]);
    let row = table
        .lines()
        .find(|l| l.starts_with("huge "))
        .unwrap_or_else(|| panic!("no row for huge in:\n{table}"));
    assert!(table.starts_with("NAME "), "{table}");
    for cell in ["default", "Pending", "0/8", &format!("{reason}: ")] {
        assert!(row.contains(cell), "{cell:?} missing from {row:?}");
    }

    let story = gangplank(&["why", "pg/huge", "-n", &ns.name]);
    assert!(
        story.starts_with(&format!(
            "PodGroup {}/huge: Pending, 0/8 members placed, queue default",
            ns.name
        )),
        "{story}"
    );
    assert!(
        story.contains(&format!("Admitted=False {reason}: ")),
        "{story}"
    );
    assert!(story.contains("huge-7  Pending"), "{story}");
    let from_a_pod: Value =
        serde_json::from_str(&gangplank(&["why", "huge-3", "-n", &ns.name, "-o", "json"])).unwrap();
    assert_eq!(from_a_pod["groupName"], "huge");
    assert_eq!(from_a_pod["members"].as_array().unwrap().len(), 8);

    // A Job's group is listed by its Job.
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "labels": {(labels::QUEUE_LABEL): "default"}},
        "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}}
    }))
    .unwrap();
    ns.api::<Job>()
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    eventually("the Job's PodGroup", 30, || async {
        groups.get_opt("train").await.ok().flatten()
    })
    .await;
    let jobs = gangplank(&["jobs", "-n", &ns.name]);
    assert!(jobs.starts_with("WORKLOAD "), "{jobs}");
    assert!(jobs.lines().any(|l| l.starts_with("Job/train ")), "{jobs}");
    assert!(
        !jobs.contains("huge"),
        "a hand-made PodGroup is no job: {jobs}"
    );

    // top refreshes until interrupted; in a pipe each view follows the last after a blank line.
    let mut top = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .args(["top", "-o", "json"])
        .env("KUBECONFIG", run_dir().join("kubeconfig"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(top.stdout.take().unwrap())) {
        let line = line.unwrap();
        if line.is_empty() {
            break;
        }
        first.push_str(&line);
    }
    top.kill().unwrap();
    top.wait().unwrap();
    let view: Value = serde_json::from_str(&first).unwrap();
    let waiting = view["waiting"].as_array().unwrap();
    assert!(
        waiting
            .iter()
            .any(|g| g["name"] == "huge" && g["namespace"] == ns.name.as_str()),
        "{view}"
    );

    // As a kubectl plugin: kubectl runs kubectl-gangplank from PATH.
    let plugins = tempdir("plugins");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_gangplank"),
        plugins.join("kubectl-gangplank"),
    )
    .unwrap();
    let path = format!("{}:{}", plugins.display(), std::env::var("PATH").unwrap());
    let output = Command::new(run_dir().join("bin/kubectl"))
        .args(["gangplank", "queues", "-o", "yaml"])
        .env("KUBECONFIG", run_dir().join("kubeconfig"))
        .env("PATH", path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&plugins).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let queues: Vec<Value> = serde_yaml::from_slice(&output.stdout).unwrap();
    let default = queues.iter().find(|q| q["name"] == "default").unwrap();
    assert!(default["waiting"].as_i64().unwrap() >= 1, "{default:?}");
    ns.delete().await;
}

/// A new empty directory under the system's temporary directory.
fn tempdir(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(crate::support::unique(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn report_records_a_waiting_and_a_running_gang_and_writes_text_html_and_its_history() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("cli-report").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    // A gang of one that runs, and one member of an elastic gang of two (never admitted on
    // arrival), which waits for the other.
    for (group, size, max) in [("solo", 1, None), ("pair", 2, Some(3))] {
        groups
            .create(&PostParams::default(), &pod_group(group, size, max))
            .await
            .unwrap();
        pods.create(
            &PostParams::default(),
            &managed_pod(&format!("{group}-0"), Some(group), 4, json!({})),
        )
        .await
        .unwrap();
    }
    crate::support::pod_group_in_phase(&groups, "solo", "Running").await;
    eventually("the pair saying it waits for its members", 30, || async {
        let why = gangplank::cli::groups::why(&groups.get("pair").await.ok()?)?;
        why.starts_with("WaitingForMembers").then_some(())
    })
    .await;

    let out = tempdir("report");
    let args = [
        "report",
        "--record-seconds",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]
    .map(str::to_owned);
    let printed = tokio::task::spawn_blocking(move || {
        gangplank(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(printed.starts_with(&text), "it prints what it writes");
    let story = |group: &str| {
        let name = format!("  {}/{group} ", ns.name);
        text.lines()
            .skip_while(|l| !l.starts_with(&name))
            .take_while(|l| l.starts_with(&name) || l.starts_with("    "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        story("pair").contains("Pending: WaitingForMembers: 1 of minMember 2"),
        "{text}"
    );
    assert!(story("solo").contains("Running"), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("{}/pair", ns.name)),
        "the page embeds the history"
    );
    let history: gangplank::cli::report::History =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert!(history.samples.len() >= 2, "{}", history.samples.len());
    std::fs::remove_dir_all(&out).ok();
    ns.delete().await;
}
