//! The cluster model: nodes, pods, PodGroups and Queues as scheduling sees them ([`objects`]),
//! resource amounts ([`resources`], [`quantity`]), per-node sums ([`nodes`]), the whole
//! cluster as the watches show it ([`state`]), how it grows ([`growth`]), its network's levels ([`topology`], and Volcano's HyperNode tiers as them: [`hyper_node_tiers`]) and what Gangplank decided itself ([`ledger`], with [`arrivals`] for admissions on arrival); [`owed`]: the room a PodGroup's `minResources` keep for members still to come.

pub mod arrivals;
pub mod group;
pub mod growth;
pub mod hyper_node_tiers;
pub mod ledger;
pub mod names;
pub mod nodes;
pub mod objects;
pub mod owed;
pub mod quantity;
pub mod resources;
pub mod state;
pub mod sub_groups;
pub mod topology;

pub use group::{Group, Member};
pub use growth::{Growth, GrowthAsked, GrowthFailed};
pub use ledger::{AheadArrival, Claim, Ledger, LedgerMut, Reservation, Slot};
pub use nodes::{NodeSlot, Nodes};
pub use objects::{
    DEFAULT_SCHEDULER, GroupKey, NODE_CONDITION_TAINT_PREFIX, Node, Pod, PodGroup, PodPhase, Queue,
    Schedulers, Taint, TaintEffect, Workload,
};
pub use resources::{ResourceId, Resources};
pub use state::State;
pub use topology::{Levels, Topology};
