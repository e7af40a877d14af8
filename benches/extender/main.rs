//! Extender benchmarks: filter, prioritize and bind bookkeeping for one pod over 5,000 candidate
//! nodes of a loaded cache, as decision functions and through the HTTP handlers.
//!
//! The design's targets (docs/DESIGN.md, "Performance targets"): filter and prioritize for one
//! pod over 5,000 candidate nodes under 1 ms at p99 in process; pass-through for pods in no group
//! under 50 µs. Criterion reports means and medians, not tails, so this bench first runs its own
//! measurement: every case is called `GP_BENCH_SAMPLES` times (default 2,000) after a warm-up,
//! each call timed alone with `Instant`, and p50, p99, mean and max are printed as a table. The
//! same closures then run under criterion. Baselines in the same run: the JSON decode of the
//! request alone (by serde into owned types; by serde borrowed, with the pod left raw; and as
//! the handlers read it, `extender::decode_args`, which splits the body by a plain scan), and
//! the pass-through paths (the floor of any call over the same body).
//!
//! The cluster is deterministic (an LCG, no randomness between runs), built only through the
//! cache's write path (`Cache::apply_node`, `apply_pod`, `apply_pod_group`) and the gang code
//! (`gang::claims::filter` creates the live claims):
//! - 5,000 nodes of 32 CPU, 256Gi, 8 GPUs and 110 pods, labelled with zone and rack; one in 20
//!   tainted `dedicated=infra:NoSchedule`, one in 100 cordoned;
//! - 50,000 bound pods of varied requests (a tenth of a core to 4 cores, 128Mi to 8Gi, a third
//!   with 1 to 4 GPUs) spread at random, about ten a node, so utilisation ranges from nearly
//!   empty to full and fewer than a hundred nodes have all 8 GPUs free;
//! - 200 running gangs of 8 (members among those pods), 100 waiting gangs of 8 pending members,
//!   50 of which hold a live claim, and the gangs the cases below filter.
//!
//! HTTP bodies are the captured scheduler request (`tests/golden/captured/filter.node-names.json`,
//! or the hand-written golden request before captures exist) with the pod's identity, group
//! label and requests replaced and 5,000 `NodeNames`.
//!
//! Reading the numbers: the gang paths are memory-bound (per candidate, one hash lookup by node
//! name into the cache's node records, then that record's free room and sums; a plan reads every
//! record once), so they swing with whatever
//! else runs on the machine far more than the pass-through paths do. `decide/*` calls the same function on the
//! same candidate list back to back, with the cache's lines warm; `http/*` adds the decode and
//! encode and their allocations, which also evict those lines, and is the figure to compare with
//! the target. Compare runs only from the same session, and report the load they ran under.
//!
//! Run: `cargo bench --bench extender` (the table comes first; add a criterion filter such as
//! `-- http/` to run only some cases, `GP_BENCH_SAMPLES=500` for a shorter table, `-- --quick`
//! for a short criterion run, `GP_BENCH_CRITERION=0` for the table alone).
//!
//! For a comparison the load cannot blur, count instructions: keep both bench binaries
//! (`target/release/deps/extender-*`) and run each as `GP_BENCH_SAMPLES=20
//! GP_BENCH_CRITERION=0 valgrind --tool=callgrind <binary> --bench <case>`, once more with a
//! filter that matches no case (the cluster alone), and subtract; divide by the calls (20 plus
//! 2 warm-up per case). That count includes the bench's own checks of each answer; for the
//! handler's work alone (decode, decide, encode) of an `http/*` case, collect only inside the
//! handler: `valgrind --tool=callgrind --collect-atstart=no
//! '--toggle-collect=<F as axum::handler::Handler<*>>::call::{{closure}}' <binary> --bench <case>`
//! and divide the total by the calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use criterion::Criterion;
use gangplank::cache::Cache;
use gangplank::extender::wire::{ExtenderArgs, ExtenderArgsRef, HostScore};
use gangplank::extender::{self, BindRequest, Extender, Permits};
use gangplank_core::model::Pod;
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

#[path = "../common/mod.rs"]
mod common;
mod timing;
mod world;

use timing::*;
use world::*;

/// The prioritize decision for a gang member as `extender::handlers::prioritize` makes it,
/// under the cache's read lock.
fn prioritize<'a>(cache: &Cache, pod: &Pod, candidates: &'a [String]) -> Vec<HostScore<'a>> {
    cache.read(|s| extender::handlers::gang_scores(s, pod, candidates, SETTINGS.strategy))
}

/// Posts `body` to the router and reads the whole answer; returns the time of that alone.
fn post(
    rt: &tokio::runtime::Runtime,
    router: &Router,
    verb: &str,
    body: &Bytes,
    expect: impl FnOnce(&[u8]),
) -> Duration {
    let request = Request::post(format!("/scheduler/{verb}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.clone()))
        .unwrap();
    let (elapsed, status, bytes) = rt.block_on(async {
        let started = Instant::now();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (started.elapsed(), status, bytes)
    });
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    expect(&bytes);
    elapsed
}

fn filter_result(bytes: &[u8]) -> extender::wire::ExtenderFilterResult {
    serde_json::from_slice(bytes).expect("a filter answer")
}

fn cases<'a>(w: &'a World, rt: &'a tokio::runtime::Runtime) -> Vec<Case<'a>> {
    let names = &w.names;
    let sampled: Vec<String> = names.iter().step_by(NODES / SAMPLED).cloned().collect();
    let router = extender::router(Arc::new(Extender::new(
        w.cache.clone(),
        Arc::new(NoopBinder),
        SETTINGS,
    )));
    let cache = &w.cache;
    let ledger = &w.ledger;
    let filter = move |m: &Member| {
        ledger
            .claim(&m.pod, &m.constraints, names, &SETTINGS, Instant::now())
            .unwrap()
    };
    let drop_claim = move |m: &Member| {
        ledger.release_gang(&m.key(), &[]);
    };

    let mut out = Vec::new();

    // ----- decision functions
    out.push(case("decide/filter/no-group", move || {
        timed(|| filter(&w.plain))
    }));
    out.push(case("decide/filter/gang-plans-claim", move || {
        drop_claim(&w.planning);
        timed(|| {
            let v = filter(&w.planning);
            assert!(!v.passed.is_empty());
            v
        })
    }));
    out.push(case("decide/filter/gang-has-claim", move || {
        timed(|| filter(&w.claimed))
    }));
    out.push(case(
        "decide/filter/gang-does-not-fit/first-member",
        move || {
            timed(|| {
                let v = filter(&w.whole_nodes);
                assert_eq!(v.failed.len(), NODES);
                v
            })
        },
    ));
    out.push(case(
        format!(
            "decide/filter/gang-does-not-fit/after-{}-of-{PARTIAL}",
            w.partial_fitted
        ),
        move || {
            timed(|| {
                let v = filter(&w.partial);
                assert_eq!(v.failed.len(), NODES);
                v
            })
        },
    ));
    out.push(case("decide/prioritize/gang-has-claim", move || {
        timed(|| prioritize(cache, &w.claimed.pod, names))
    }));

    // ----- bind bookkeeping
    // Each call starts from the gang's claim made again as its first filter makes it; the
    // member binds on the node of the claim's first slot.
    let reserving = &w.reserving;
    let reset_reserving = move || -> String {
        ledger.release_gang(&reserving[0].key(), &[reserving[0].pod.uid.clone()]);
        claim_for(cache, &reserving[0], names, Instant::now()).slots[0]
            .node
            .clone()
    };
    let reserve = move |node: &str| {
        ledger
            .reserve(
                &reserving[0].pod.uid,
                "ml/train-reserving-0",
                node,
                &SETTINGS,
                Instant::now(),
            )
            .unwrap()
    };
    out.push(case("bind/claims::reserve", move || {
        let node = reset_reserving();
        timed(|| reserve(&node))
    }));
    out.push(case("bind/claims::release", move || {
        let node = reset_reserving();
        reserve(&node);
        timed(|| ledger.release_gang(&reserving[0].key(), &[reserving[0].pod.uid.clone()]))
    }));

    let quorum = &w.quorum;
    let permits = Arc::new(Permits::new(cache.ledger(), Arc::new(NoopBinder), SETTINGS));
    let uids: Vec<String> = quorum.iter().map(|m| m.pod.uid.clone()).collect();
    let key = quorum[0].key();
    out.push(case("bind/permits/8th-member-reaches-quorum", move || {
        ledger.release_gang(&key, &uids);
        let claim = claim_for(cache, &quorum[0], names, Instant::now());
        let requests: Vec<BindRequest> = quorum
            .iter()
            .zip(claim.slots.iter().cycle())
            .map(|(m, slot)| m.bind_request(&slot.node))
            .collect();
        rt.block_on(async {
            let (last, held) = requests.split_last().unwrap();
            let handles: Vec<_> = held
                .iter()
                .cloned()
                .map(|r| {
                    let permits = permits.clone();
                    tokio::spawn(async move { permits.bind(r).await })
                })
                .collect();
            while permits.held() < held.len() {
                tokio::task::yield_now().await;
            }
            let started = Instant::now();
            permits.bind(last.clone()).await.unwrap();
            let elapsed = started.elapsed();
            for h in handles {
                h.await.unwrap().unwrap();
            }
            elapsed
        })
    }));

    // ----- through the HTTP router: decode, decide, encode
    let all = |m: &Member| m.body(names);
    let plain_body = all(&w.plain);
    let plain_sampled = w.plain.body(&sampled);
    out.push(case("baseline/json-decode-only/5000-names", {
        let body = plain_body.clone();
        move || timed(|| serde_json::from_slice::<ExtenderArgs>(&body).unwrap())
    }));
    out.push(case("baseline/json-decode-only/500-names", {
        let body = plain_sampled.clone();
        move || timed(|| serde_json::from_slice::<ExtenderArgs>(&body).unwrap())
    }));
    for (label, body) in [("5000", plain_body.clone()), ("500", plain_sampled.clone())] {
        out.push(case(format!("baseline/decode-args/{label}-names"), {
            let body = body.clone();
            move || {
                timed(|| {
                    extender::decode_args(extender::Verb::Filter, &body)
                        .unwrap()
                        .pod
                        .get()
                        .len()
                })
            }
        }));
        out.push(case(
            format!("baseline/json-decode-borrowed/{label}-names"),
            {
                move || {
                    timed(|| {
                        serde_json::from_slice::<ExtenderArgsRef>(&body)
                            .unwrap()
                            .pod
                            .get()
                            .len()
                    })
                }
            },
        ));
    }
    for (label, body) in [("5000", plain_body.clone()), ("500", plain_sampled)] {
        let router = router.clone();
        let count = if label == "5000" { NODES } else { SAMPLED };
        out.push(case(format!("http/filter/no-group/{label}-names"), {
            let router = router.clone();
            let body = body.clone();
            move || {
                post(rt, &router, "filter", &body, |b| {
                    assert_eq!(filter_result(b).node_names.unwrap().len(), count)
                })
            }
        }));
        out.push(case(format!("http/prioritize/no-group/{label}-names"), {
            move || post(rt, &router, "prioritize", &body, |_| {})
        }));
    }
    let planning_body = all(&w.planning);
    out.push(case("http/filter/gang-plans-claim", {
        let router = router.clone();
        move || {
            drop_claim(&w.planning);
            post(rt, &router, "filter", &planning_body, |b| {
                assert!(!filter_result(b).node_names.unwrap().is_empty())
            })
        }
    }));
    let claimed_body = all(&w.claimed);
    out.push(case("http/filter/gang-has-claim", {
        let router = router.clone();
        let body = claimed_body.clone();
        move || post(rt, &router, "filter", &body, |_| {})
    }));
    out.push(case("http/prioritize/gang-has-claim", {
        let router = router.clone();
        move || post(rt, &router, "prioritize", &claimed_body, |_| {})
    }));
    // What the scheduler really sends at 5,000 nodes: a sample of 500 (filter), and prioritize
    // only over what passed filter.
    let claimed_sampled = w.claimed.body(&sampled);
    out.push(case("http/filter/gang-has-claim/500-names", {
        let router = router.clone();
        let body = claimed_sampled.clone();
        move || post(rt, &router, "filter", &body, |_| {})
    }));
    out.push(case("http/prioritize/gang-has-claim/500-names", {
        let router = router.clone();
        move || post(rt, &router, "prioritize", &claimed_sampled, |_| {})
    }));
    let whole_body = all(&w.whole_nodes);
    out.push(case("http/filter/gang-does-not-fit/first-member", {
        let router = router.clone();
        move || {
            post(rt, &router, "filter", &whole_body, |b| {
                assert_eq!(filter_result(b).failed_nodes.len(), NODES)
            })
        }
    }));
    let partial_body = all(&w.partial);
    out.push(case(
        format!(
            "http/filter/gang-does-not-fit/after-{}-of-{PARTIAL}",
            w.partial_fitted
        ),
        {
            let router = router.clone();
            move || post(rt, &router, "filter", &partial_body, |_| {})
        },
    ));
    let bind_plain = Bytes::from(
        serde_json::to_vec(&json!({
            "PodName": "plain", "PodNamespace": "etl", "PodUID": "uid-etl-plain",
            "Node": names[1],
        }))
        .unwrap(),
    );
    out.push(case("http/bind/no-group", {
        let router = router.clone();
        move || {
            post(rt, &router, "bind", &bind_plain, |b| {
                assert_eq!(b, br#"{"Error":""}"#)
            })
        }
    }));
    out
}

fn main() {
    let test_mode = std::env::args().any(|a| a == "--test" || a == "--list");
    let started = Instant::now();
    let world = build();
    let (bound, groups, claims) = world.cache.read(|s| {
        let with_pods = s.nodes().slots().filter(|n| !n.used.is_empty()).count();
        (with_pods, s.groups().len(), s.ledger().claims().len())
    });
    if !test_mode {
        println!(
            "cluster: {} nodes ({} with pods), {} pods, {} groups, {} live claims; built in {:?}",
            world.cache.node_count(),
            bound,
            world.cache.pod_count(),
            groups,
            claims,
            started.elapsed()
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut cases = cases(&world, &rt);
    let filter = filter_arg();
    let samples = std::env::var("GP_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    if !test_mode && samples > 0 {
        print_percentiles(&mut cases, samples, filter.as_deref());
    }

    if std::env::var("GP_BENCH_CRITERION").is_ok_and(|v| v == "0") {
        return;
    }
    let mut criterion = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = criterion.benchmark_group("extender_5000_nodes");
    for c in cases.iter_mut() {
        group.bench_function(&c.name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| (c.call)()).sum())
        });
    }
    group.finish();
    criterion.final_summary();
}
