//! The commands operators and users run against a cluster (`gangplank queues`, `groups`,
//! `jobs`, `why`, `top`, `report`), also a kubectl plugin when the binary is installed as `kubectl-gangplank`. They read
//! what the controller writes (Queue and PodGroup status, Events) with the user's kubeconfig
//! and never write. Each command fetches, then renders with a pure function of what it fetched
//! (unit-tested), as a table for people or as JSON or YAML for scripts.

pub mod groups;
pub mod queues;
pub mod render;
pub mod report;
pub mod top;
pub mod why;

use clap::{Args, ValueEnum};
use kube::Client;
use kube::config::{Config, KubeConfigOptions};
use serde::Serialize;

/// Flags every command takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// The kubeconfig context to use (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Flags of `gangplank queues`.
#[derive(Debug, Clone, Args)]
pub struct QueuesArgs {
    #[command(flatten)]
    pub common: Common,
    /// Show it again every 2 seconds until interrupted (a terminal is redrawn in place).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Flags of `gangplank groups`.
#[derive(Debug, Clone, Args)]
pub struct GroupsArgs {
    #[command(flatten)]
    pub common: Common,
    /// The namespace (default: the context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Show it again every 2 seconds until interrupted (a terminal is redrawn in place).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// Flags of `gangplank why`.
#[derive(Debug, Clone, Args)]
pub struct WhyArgs {
    #[command(flatten)]
    pub common: Common,
    /// The namespace (default: the context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// What to explain: `pod/NAME` (or just `NAME`), `podgroup/NAME` (`pg/NAME`) or `job/NAME`.
    pub target: String,
    /// Show it again every 2 seconds until interrupted (a terminal is redrawn in place).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// A client for `context` (the current context when `None`), and its default namespace.
pub async fn client(context: Option<&str>) -> anyhow::Result<(Client, String)> {
    let config = match context {
        Some(context) => {
            let options = KubeConfigOptions {
                context: Some(context.to_owned()),
                ..Default::default()
            };
            Config::from_kubeconfig(&options).await?
        }
        None => Config::infer().await?,
    };
    let namespace = config.default_namespace.clone();
    Ok((Client::try_from(config)?, namespace))
}

/// How often `--watch` shows it again.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `show` once, or with `watch` again every [`WATCH_EVERY`] until interrupted: on a
/// terminal each time on a cleared screen, in a pipe one after the other, a blank line apart.
pub async fn repeat<F, Fut>(watch: bool, mut show: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    loop {
        if watch && terminal {
            print!("\x1b[H\x1b[2J");
        }
        show().await?;
        if !watch {
            return Ok(());
        }
        if !terminal {
            println!();
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
}

/// Prints `value` as JSON or YAML, or `table()` for a table.
pub fn print<T: Serialize>(output: Output, value: &T, table: impl FnOnce() -> String) {
    match output {
        Output::Table => print!("{}", table()),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).expect("views always serialize")
        ),
        Output::Yaml => print!(
            "{}",
            serde_yaml::to_string(value).expect("views always serialize")
        ),
    }
}
