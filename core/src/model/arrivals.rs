//! What the ledger keeps for admissions on arrival: the [`Door`] the last admission pass left,
//! the gangs admitted through it ([`Arrival`]) and how long their room is kept. The rules that
//! open the door and let a gang in are admission's (`crate::admit::on_arrival`); this is their data.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::resources::Resources;

/// The longest the ledger keeps an arrival (it ends sooner once the model shows all the
/// members it was admitted for): the pass counts its room until the watch shows them, and by
/// then they exist.
pub const ARRIVAL_ROOM_KEPT: Duration = Duration::from_secs(30);

/// Room a pass left for admissions on arrival.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Door {
    /// Free room per schedulable node; shared by the decision and the ledger until an
    /// admission on arrival takes some.
    pub(crate) nodes: Arc<Vec<Resources>>,
    /// What any queue may still take.
    pub(crate) total: Resources,
    /// Queues a group may be admitted into on arrival.
    pub(crate) queues: BTreeSet<String>,
    /// [`crate::model::Nodes::shrunk`] of the state the pass saw: once it has moved, some of
    /// this room may be gone, and the door lets nobody in until the next pass.
    pub(crate) nodes_shrunk: u64,
}

impl Door {
    pub fn new(
        nodes: Vec<Resources>,
        total: Resources,
        queues: BTreeSet<String>,
        nodes_shrunk: u64,
    ) -> Door {
        Door {
            nodes: Arc::new(nodes),
            total,
            queues,
            nodes_shrunk,
        }
    }

    /// Whether the room was counted on the nodes as they are now (`nodes_shrunk` is
    /// [`crate::model::Nodes::shrunk`] now).
    pub fn counted_on_current_nodes(&self, nodes_shrunk: u64) -> bool {
        self.nodes_shrunk == nodes_shrunk
    }
}

/// A gang admitted on arrival.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub queue: String,
    /// What it was admitted for: one entry per member.
    pub need: Vec<Resources>,
    pub at: Instant,
    /// Members created ungated so far, the first among them.
    pub let_in: usize,
}

impl Arrival {
    /// The gang's first member admitted it, for `need`, at `at`.
    pub fn new(queue: String, need: Vec<Resources>, at: Instant) -> Arrival {
        Arrival {
            queue,
            need,
            at,
            let_in: 1,
        }
    }

    /// Lets another member in ungated when the gang's room has a place left for it: no more
    /// members than it was admitted for, none larger than the first. Any other goes through
    /// the gate and the admission pass, which counts what it really asks.
    pub fn let_in_another(&mut self, requests: &Resources) -> bool {
        let Some(place) = self.need.get(self.let_in) else {
            return false;
        };
        if !requests.fits_in(place) {
            return false;
        }
        self.let_in += 1;
        true
    }
}
