//! The simulator against a live run on the local control plane: a queue's work recorded with
//! `gangplank record`'s own function as it runs, then replayed through the core with the
//! recorded queues, as `gangplank simulate --recording` does. The replay must start the gangs in
//! the order they started live, each within 5 s or a tenth of its live wait, whichever is larger.

use std::time::Instant;

use gangplank::simulate::command::{RunOptions, compare};
use gangplank::simulate::configuration::Configuration;
use gangplank::simulate::record::record;
use gangplank::simulate::recording::replay;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::oneshot;

use crate::queues::{QueueGuard, cpu_cap, create_gang, create_queue, delete_queue};
use crate::support::{Cluster, eventually};

/// (gang, runtime): two members of 4 CPUs each, in a queue capped at 16 CPUs, so two run at a
/// time and each of the others starts when one of those ends.
const GANGS: [(&str, &str); 6] = [
    ("a", "8s"),
    ("b", "14s"),
    ("c", "6s"),
    ("d", "10s"),
    ("e", "8s"),
    ("f", "6s"),
];

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_replay_of_a_recorded_run_starts_its_gangs_in_the_live_order_within_5_s_or_a_tenth_of_their_wait()
 {
    let cluster = Cluster::connect().await;
    let queue = create_queue(&cluster.client, "replay", cpu_cap("16")).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("simulate-replay").await;
    let (stop, stopped) = oneshot::channel::<()>();
    let recorder = tokio::spawn({
        let client = cluster.client.clone();
        async move {
            record(&client, async {
                let _ = stopped.await;
            })
            .await
        }
    });
    // Objects made before the recorder's first list completes are in that list.
    for (name, runtime) in GANGS {
        create_gang(&ns, &queue, name, 2, 4, Some(runtime), None).await;
    }
    let pods = ns.api::<Pod>();
    eventually("every gang's pods succeeded", 180, || async {
        let list = pods.list(&Default::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
            .count();
        (done == 2 * GANGS.len()).then_some(())
    })
    .await;
    stop.send(()).unwrap();
    let recording = recorder.await.unwrap();
    let replayed = replay(&recording, "e2e", std::slice::from_ref(&ns.name)).unwrap();
    assert_eq!(replayed.workload.jobs.len(), GANGS.len());
    let recorded = Configuration::recorded(replayed.queues.clone(), "recording");
    let serve = gangplank::config::ServeArgs::defaults().gang_settings();
    let options = RunOptions {
        sample_every: 1,
        binds_per_second: replayed.binds_per_second,
        settings: serve,
        serve,
    };
    let began = Instant::now();
    let (report, followed) = compare(
        &replayed.workload,
        &[recorded],
        Some(&replayed.live),
        options,
    )
    .unwrap();
    let followed = followed.unwrap();
    eprintln!(
        "replayed {} gangs in {:?}: {} compared, largest start difference {} s, {followed:?}",
        report.jobs,
        began.elapsed(),
        followed.compared,
        followed.worst_seconds
    );
    assert_eq!(followed.compared, GANGS.len(), "{followed:?}");
    assert!(
        followed.holds(),
        "the replay strayed from the live run: {followed:?}"
    );
    let rows = &report.configurations[0].queues;
    assert!(
        rows.iter()
            .any(|q| q.queue == queue && q.finished == GANGS.len()),
        "every gang finishes in the replay too: {rows:?}"
    );
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}
