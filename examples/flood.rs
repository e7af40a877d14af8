//! A flood of one of Gangplank's ports on the local control plane (`e2e/up`):
//! - `--target extender`: as a client holding the scheduler's certificate, `--clients`
//!   connections each send filter requests of `--names` node names back to back (keep-alive),
//!   while a probe sends the small golden filter request every 50 ms on its own connection, as
//!   the scheduler would for a gang member;
//! - `--target webhooks`: as anyone on the pod network (no client certificate), `--clients`
//!   connections each post AdmissionReviews of `--body-bytes` to the Queue webhook back to back,
//!   while a probe posts a small Queue review every 50 ms, as the API server would.
//!
//! The flood lasts `--seconds`; the probe (on a thread of its own) also runs alone for
//! `--seconds` first, the baseline of the same run.
//!
//! Output: one JSON line with the probe's latency percentiles alone and under the flood, the
//! flood's answers by HTTP status and its failed connections, and Gangplank's resident memory
//! (`--pid`): before the run, the most seen while flooded (VmRSS sampled every 50 ms), 10 s
//! after the flood stopped, and its peak over the process' life (VmHWM).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;
use std::sync::Mutex;

use clap::{Parser, ValueEnum};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    Extender,
    Webhooks,
}

#[derive(Parser)]
struct Args {
    /// Which port is flooded.
    #[arg(long, value_enum, default_value_t = Target::Extender)]
    target: Target,
    /// The port's address (e2e/.run/env GANGPLANK_EXTENDER_URL or GANGPLANK_WEBHOOK_URL without
    /// https://).
    #[arg(long)]
    addr: String,
    /// CA of Gangplank's serving certificate (GANGPLANK_CA_FILE).
    #[arg(long)]
    ca: PathBuf,
    /// The scheduler's client certificate and key (GANGPLANK_SCHEDULER_CLIENT_CERT and _KEY),
    /// for the extender; the webhooks' flood and probe present none.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Gangplank's process, for its resident memory.
    #[arg(long)]
    pid: u32,
    /// Flooding connections.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Node names in each flooding filter request (extender).
    #[arg(long, default_value_t = 5000)]
    names: usize,
    /// Bytes of each flooding AdmissionReview (webhooks); the default is 7.6 MiB.
    #[arg(long, default_value_t = 8_000_000)]
    body_bytes: usize,
    /// Length of each phase (probe alone, then probe under the flood).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

const GOLDEN: &str = include_str!("../tests/golden/filter-node-names.request.json");

type Conn = BufReader<TlsStream<TcpStream>>;

async fn connect(args: &Args, tls: &TlsConnector) -> anyhow::Result<Conn> {
    let tcp = TcpStream::connect(&args.addr).await?;
    tcp.set_nodelay(true)?;
    let stream = tls
        .connect(ServerName::try_from("127.0.0.1".to_owned())?, tcp)
        .await?;
    Ok(BufReader::new(stream))
}

/// Where the probe and the flood post.
fn path(target: Target) -> &'static str {
    match target {
        Target::Extender => "/scheduler/filter",
        Target::Webhooks => "/webhooks/validate/queues",
    }
}

/// Posts `body` to `path` on `conn` and reads the answer whole.
async fn post(conn: &mut Conn, path: &str, body: &[u8]) -> anyhow::Result<u16> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: gangplank\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    conn.get_mut().write_all(&request).await?;
    let mut line = String::new();
    conn.read_line(&mut line).await?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("connection closed"))?
        .parse()?;
    let mut length = 0;
    loop {
        line.clear();
        conn.read_line(&mut line).await?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse()?;
        }
    }
    let mut answer = vec![0; length];
    conn.read_exact(&mut answer).await?;
    Ok(status)
}

fn request_with_names(names: usize) -> Vec<u8> {
    let mut request: serde_json::Value = serde_json::from_str(GOLDEN).unwrap();
    request["NodeNames"] = (0..names).map(|i| format!("flood-node-{i}")).collect();
    serde_json::to_vec(&request).unwrap()
}

/// An AdmissionReview of a Queue's creation, as the API server sends it, whose Queue carries an
/// annotation of `padding` bytes.
fn queue_review(name: &str, padding: usize) -> Vec<u8> {
    let group = "scheduling.gangplank.dev";
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": "v1alpha1", "kind": "Queue"},
            "resource": {"group": group, "version": "v1alpha1", "resource": "queues"},
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "flood"},
            "object": {
                "apiVersion": format!("{group}/v1alpha1"),
                "kind": "Queue",
                "metadata": {"name": name, "annotations": {"padding": "x".repeat(padding)}},
                "spec": {"weight": 1}
            },
            "dryRun": false
        }
    });
    serde_json::to_vec(&review).unwrap()
}

/// The body the flood sends, about its size.
fn flood_body(args: &Args) -> Vec<u8> {
    match args.target {
        Target::Extender => request_with_names(args.names),
        Target::Webhooks => queue_review("flood", args.body_bytes.saturating_sub(600)),
    }
}

/// The probe: a small request every 50 ms until `stop`; each one's latency in milliseconds.
async fn probe(args: &Args, tls: &TlsConnector, stop: &AtomicBool) -> anyhow::Result<Vec<f64>> {
    let body = match args.target {
        Target::Extender => GOLDEN.as_bytes().to_vec(),
        Target::Webhooks => queue_review("probe", 0),
    };
    let mut conn = connect(args, tls).await?;
    let mut latencies = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let status = post(&mut conn, path(args.target), &body).await?;
        anyhow::ensure!(status == 200, "the probe's request answered {status}");
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(latencies)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut latencies: Vec<f64>) -> serde_json::Value {
    latencies.sort_by(f64::total_cmp);
    serde_json::json!({
        "requests": latencies.len(),
        "p50_ms": percentile(&latencies, 0.50),
        "p99_ms": percentile(&latencies, 0.99),
        "max_ms": latencies.last(),
    })
}

/// A line of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The probe for `--seconds`, on a thread and runtime of its own, so that the flood's work in
/// this process does not delay it.
async fn probe_for(args: &Arc<Args>, tls: &TlsConnector) -> anyhow::Result<Vec<f64>> {
    let (args, tls) = (args.clone(), tls.clone());
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let stop = AtomicBool::new(false);
            let (latencies, ()) = tokio::join!(probe(&args, &tls, &stop), async {
                tokio::time::sleep(Duration::from_secs(args.seconds)).await;
                stop.store(true, Ordering::Relaxed);
            });
            latencies
        })
    });
    tokio::task::spawn_blocking(move || thread.join().expect("the probe's thread panicked")).await?
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    tokio_rustls::rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(&args.ca)?)?;
    let config = ClientConfig::builder().with_root_certificates(roots);
    let config = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => config.with_client_auth_cert(
            vec![CertificateDer::from_pem_file(cert)?],
            PrivateKeyDer::from_pem_file(key)?,
        )?,
        _ => config.with_no_client_auth(),
    };
    let tls = TlsConnector::from(Arc::new(config));

    let rss_before_kib = status_kib(args.pid, "VmRSS:");
    let alone = probe_for(&args, &tls).await?;

    let body: Arc<[u8]> = flood_body(&args).into();
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(BTreeMap::<u16, u64>::new()));
    let failed = Arc::new(AtomicU64::new(0));
    let mut flooders = Vec::new();
    for _ in 0..args.clients {
        let (args, tls, body) = (args.clone(), tls.clone(), body.clone());
        let (stop, answers, failed) = (stop.clone(), answers.clone(), failed.clone());
        flooders.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut conn) = connect(&args, &tls).await else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                while !stop.load(Ordering::Relaxed) {
                    match post(&mut conn, path(args.target), &body).await {
                        Ok(status) => {
                            *answers.lock().unwrap().entry(status).or_default() += 1;
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    };
                }
            }
        }));
    }
    let sampling = tokio::spawn({
        let (stop, pid) = (stop.clone(), args.pid);
        async move {
            let mut most = 0;
            while !stop.load(Ordering::Relaxed) {
                most = most.max(status_kib(pid, "VmRSS:"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            most
        }
    });
    let flooded = probe_for(&args, &tls).await?;
    stop.store(true, Ordering::Relaxed);
    let most_rss_kib = sampling.await?;
    for flooder in flooders {
        flooder.abort();
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let answers: BTreeMap<String, u64> = answers
        .lock()
        .unwrap()
        .iter()
        .map(|(status, n)| (status.to_string(), *n))
        .collect();
    let line = serde_json::json!({
        "target": match args.target { Target::Extender => "extender", Target::Webhooks => "webhooks" },
        "clients": args.clients,
        "names": args.names,
        "body_bytes": body.len(),
        "seconds": args.seconds,
        "probe_alone": summary(alone),
        "probe_flooded": summary(flooded),
        "flood_answers_by_status": answers,
        "flood_failed_connections": failed.load(Ordering::Relaxed),
        "rss_before_mib": rss_before_kib / 1024,
        "rss_most_while_flooded_mib": most_rss_kib / 1024,
        "rss_10s_after_mib": status_kib(args.pid, "VmRSS:") / 1024,
        "rss_peak_since_start_mib": status_kib(args.pid, "VmHWM:") / 1024,
    });
    println!("{line}");
    Ok(())
}
