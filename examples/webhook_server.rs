//! The webhook routes alone, on `--addr` over TLS from `--cert`/`--key`, served as `gangplank
//! serve` serves them (`runtime::port::serve` with `Bounds::WEBHOOKS`) but with no cluster behind
//! them (a static lookup with the `default` queue): a target for `examples/flood.rs --target
//! webhooks` without the local control plane. Runs until Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use gangplank::connections::Bounds;
use gangplank::runtime::port;
use gangplank::tls::Files;
use gangplank::webhooks::{self, Settings, StaticLookup, Webhooks};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:9443")]
    addr: std::net::SocketAddr,
    #[arg(long)]
    cert: PathBuf,
    #[arg(long)]
    key: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    gangplank::tls::install_crypto_provider();
    let router = webhooks::router(Arc::new(Webhooks::new(
        Arc::new(StaticLookup::default()),
        Settings::default(),
    )));
    let files = Files {
        cert: args.cert,
        key: args.key,
        client_ca: None,
        client_name: None,
    };
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        }
    });
    let handle = axum_server::Handle::new();
    port::serve(
        "webhooks",
        args.addr,
        router,
        Some(files),
        Bounds::WEBHOOKS,
        handle,
        shutdown,
    )
    .await
}
