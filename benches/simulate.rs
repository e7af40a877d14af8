//! `gangplank simulate`'s replay of a whole trace: the Alibaba GPU trace of 2023 (1,523 nodes,
//! 8,152 pods over 149 days) through `examples/simulate/alibaba-mapping.yaml`, loaded once
//! outside the timed part, on each of [`CONFIGURATIONS`]: the whole cluster, and the baseline
//! that scales it to 28 nodes. Each iteration is one [`gangplank_core::simulate::run`] over
//! all of it. Prints the events and admission passes of one run per configuration.
//!
//! The trace is `GANGPLANK_TRACE_DIR`, else `../shared/traces/alibaba-gpu-2023` beside the
//! repository. Run: `cargo bench --bench simulate`. `examples/simulate_speed.rs` gives the
//! same runs' CPU time and peak memory.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gangplank::simulate::{configuration, mapping};
use gangplank_core::simulate::run;

/// The shipped configurations timed, as docs/simulate.md's speed figures name them.
const CONFIGURATIONS: [&str; 2] = [
    "examples/simulate/whole-cluster.yaml",
    "examples/simulate/baseline.yaml",
];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn bench_whole_trace(c: &mut Criterion) {
    let dir = std::env::var_os("GANGPLANK_TRACE_DIR")
        .map_or_else(|| repo("../shared/traces/alibaba-gpu-2023"), Into::into);
    let mapping = repo("examples/simulate/alibaba-mapping.yaml");
    let workload = mapping::workload(&dir, Some(&mapping)).expect("the trace and its mapping");
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for file in CONFIGURATIONS {
        let config = configuration::read(&repo(file)).expect("a shipped configuration");
        let serve = gangplank::config::ServeArgs::defaults().gang_settings();
        let setup = config
            .setup(&workload.nodes, &workload.jobs, serve, 600, None)
            .expect("its nodes and queues");
        let once = Instant::now();
        let outcome = run(&setup, &workload.jobs);
        let seconds = once.elapsed().as_secs_f64();
        println!(
            "simulate {}: {} jobs on {} nodes, {} events, {} passes, one run {seconds:.2} s: \
             {:.0} events/s",
            config.name,
            workload.jobs.len(),
            setup.nodes.len(),
            outcome.events,
            outcome.passes,
            outcome.events as f64 / seconds
        );
        group.throughput(Throughput::Elements(outcome.events));
        group.bench_function(
            format!("alibaba_gpu_2023_whole_trace/{}", config.name),
            |b| b.iter(|| run(black_box(&setup), black_box(&workload.jobs)).events),
        );
    }
    group.finish();
}

criterion_group!(benches, bench_whole_trace);
criterion_main!(benches);
