//! Policy: the decisions Gangplank makes, as pure functions over the cluster model.
//!
//! Why it exists: the rules that decide where a gang may go, how nodes are scored and whom
//! preemption may evict must be testable (unit and property tests), benchmarkable without a
//! cluster, and shared by every caller (the extender's verbs, the admission loop's "does the
//! whole gang fit now"). So nothing here touches the network, a lock or a clock: the functions
//! take plain values from [`crate::model`] and return decisions with reasons a user can
//! read. The extender and the loops translate wire types to these calls and back.
//!
//! - [`constraints`]: may this pod run on this node at all (cordon, taints, node selector,
//!   required node affinity), and if not, why (the adapter's
//!   `gangplank::cache::constraints` builds the pod's [`Constraints`] from its API object).
//! - [`cluster_fit`]: whether a whole gang fits one cluster's nodes now (a dispatcher's
//!   question of each cluster it may send a gang to).
//! - [`placement`]: how good a node is for a pod (binpack or spread), on the extender's 0..=10
//!   scale.
//! - [`preemption`]: which of the scheduler's proposed victim lists Gangplank accepts.
//! - [`fair_share`]: what each queue deserves of each resource (weighted water-filling with
//!   guarantees, capabilities and hierarchy).
//! - [`queue_order`]: the admission order of waiting groups over all queues (weighted DRF over
//!   deserved shares, then priority, namespace share and age inside a queue).
//! - [`reclaim`]: which running gangs of queues above their deserved share to evict so that a
//!   queue below its share gets it (whole gangs, lowest priority and youngest first).

pub mod cluster_fit;
pub mod constraints;
pub mod fair_share;
pub mod fit;
pub mod placement;
pub mod preemption;
pub mod queue_order;
pub mod reclaim;

pub use constraints::{Constraints, Infeasible, feasible};
pub use placement::{CLAIMED_NODE_SCORE, MAX_SCORE, Strategy, score};
pub use preemption::{GangRef, GangStatus, Preemptor, Rejection, Review, Victim, review};
