//! The `gangplank` binary: parse the command line, then hand over to the library.

use clap::Parser;
use gangplank::config::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => {
            gangplank::telemetry::init(args.log_format, &args.log_level)?;
            gangplank::server::run(*args).await
        }
        Command::Crdgen => gangplank::crdgen::run(),
        Command::Dashboard { configmap } => gangplank::dashboard::run(configmap),
        Command::Queues(args) => gangplank::cli::queues::run(args).await,
        Command::Groups(args) => gangplank::cli::groups::run(args).await,
        Command::Jobs(args) => gangplank::cli::groups::run_jobs(args).await,
        Command::Why(args) => gangplank::cli::why::run(args).await,
        Command::Top(args) => gangplank::cli::top::run(args).await,
        Command::Report(args) => gangplank::cli::report::run(&args).await,
        Command::Record(args) => {
            let (client, _) = gangplank::cli::client(args.context.as_deref()).await?;
            gangplank::simulate::record::run(&args, client).await
        }
        Command::Simulate(args) => {
            let serve = gangplank::config::ServeArgs::defaults().gang_settings();
            gangplank::simulate::command::main(&args, serve)
        }
    }
}
