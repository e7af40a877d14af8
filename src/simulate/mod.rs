//! `gangplank simulate`: what if the queues, the placement strategy or the nodes were otherwise?
//! Replays a cluster's work (a public trace read through a mapping file, or a recording
//! `gangplank record` made of a live cluster) through the core's own decisions
//! ([`gangplank_core::simulate`]) once per configuration, and compares the runs side by side
//! as a text table, JSON or an HTML page. Reads files only; nothing here talks to a
//! cluster but `record`.
//!
//! - [`trace`] and [`mapping`]: the Alibaba GPU trace's CSV files, and which queue, namespace
//!   and gang each row goes to;
//! - [`configuration`]: one what-if: Queue manifests, the placement strategy, node changes;
//! - [`record`]: `gangplank record`, a live cluster's objects over a while, and [`recording`]:
//!   that recording as a workload, with how closely a replay follows its live starts;
//! - [`command`]: the command itself; [`report`]: the runs' figures side by side, as text
//!   and JSON; [`html`]: as a page.

pub mod command;
pub mod configuration;
pub mod html;
pub mod mapping;
pub mod not_modelled;
pub mod record;
pub mod recording;
pub mod report;
pub mod trace;

use gangplank_core::model::Node;
use gangplank_core::simulate::Job;

/// What a simulation replays: the cluster's nodes and its work.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Where it comes from, in words, for the report's heading.
    pub source: String,
    pub nodes: Vec<Node>,
    pub jobs: Vec<Job>,
}
