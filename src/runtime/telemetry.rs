//! Logging set-up: one `tracing` subscriber for the whole process.
//!
//! Text for people at a terminal, JSON for log collectors; the filter uses tracing's env-filter
//! syntax so one module can be turned up without drowning in the others.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to parse log filter {filter:?}: {why}")]
    Filter { filter: String, why: String },
    #[error("failed to install log subscriber: {0}")]
    Install(String),
}

/// Installs the global subscriber. Call once, early in `main`.
pub fn init(format: LogFormat, filter: &str) -> Result<(), Error> {
    let env_filter = EnvFilter::try_new(filter).map_err(|e| Error::Filter {
        filter: filter.to_owned(),
        why: e.to_string(),
    })?;
    // Colours only for a person at a terminal, never in files or log collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_ansi(std::io::stdout().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    installed.map_err(|e| Error::Install(e.to_string()))
}
