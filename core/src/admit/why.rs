//! Why a group waits for admission: a [`Reason`] (the PodGroup's `Admitted` condition reason)
//! and [`Why`], the details with the numbers, formatted only when read.
//!
//! Why lazy: a pass over a full cluster leaves thousands of groups waiting; the admission loop
//! only counts them, and the controller formats the messages it writes.

use std::fmt;
use std::sync::Arc;

use crate::limits;
use crate::model::resources::{ResourceId, human, write_shortfall};
use crate::model::sub_groups::Short;
use crate::model::{GroupKey, Resources};
use crate::policy::queue_order::DominantShare;

/// Why a group waits, as the `reason` of its PodGroup's `Admitted` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Fewer than `minMember` live members exist.
    WaitingForMembers,
    /// Pods name a group whose PodGroup does not exist.
    PodGroupMissing,
    /// A member names a scheduler the cluster does not serve: nobody would place it.
    SchedulerNotServed,
    QueueMissing,
    QueueClosed,
    /// Admitting it would take its queue over its capability.
    CapabilityReached,
    /// It does not fit and its queue already holds at least its deserved share.
    QueueOverShare,
    DoesNotFit,
    /// No domain of its `topologyKey` could hold it whole even with nothing else running:
    /// it never fits as it is, holds no room, and reclaim frees none for it.
    NoDomainFits,
    /// It would fit, but only in room reserved for the group at the head of the line.
    BehindReservation,
    /// It heads the line and holds a reservation until its room frees.
    Reserved,
    /// It waited past its `maxWaitSeconds`: it goes first and holds a reservation.
    OverdueReserved,
    /// It does not fit today's nodes and the cluster grows for it: stand-in pods ask the node
    /// autoscaler for its room (or it waits for another gang's growth to end first).
    WaitingForGrowth,
    /// The cluster did not grow for it in time: it holds no room and asks again later.
    GrowthFailed,
}

impl Reason {
    /// It passed every check but free room: reclaim may make room for it.
    pub fn short_of_room(self) -> bool {
        matches!(
            self,
            Reason::DoesNotFit
                | Reason::QueueOverShare
                | Reason::Reserved
                | Reason::OverdueReserved
        )
    }

    /// As spelled in the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::WaitingForMembers => "WaitingForMembers",
            Reason::PodGroupMissing => "PodGroupMissing",
            Reason::SchedulerNotServed => "SchedulerNotServed",
            Reason::QueueMissing => "QueueMissing",
            Reason::QueueClosed => "QueueClosed",
            Reason::CapabilityReached => "CapabilityReached",
            Reason::QueueOverShare => "QueueOverShare",
            Reason::DoesNotFit => "DoesNotFit",
            Reason::NoDomainFits => "NoDomainFits",
            Reason::BehindReservation => "BehindReservation",
            Reason::Reserved => "Reserved",
            Reason::OverdueReserved => "OverdueReserved",
            Reason::WaitingForGrowth => "WaitingForGrowth",
            Reason::GrowthFailed => "GrowthFailed",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The details of a wait; [`fmt::Display`] gives the condition's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Members {
        live: usize,
        /// Members that Succeeded: they count towards `minMember`.
        succeeded: u32,
        min_member: u32,
    },
    PodGroupMissing {
        group: GroupKey,
    },
    /// A sub-group of the gang has fewer whole instances than its `minCount`.
    SubGroupShort(Short),
    SchedulerNotServed {
        /// A member that names it.
        pod: String,
        scheduler: String,
    },
    QueueMissing {
        queue: String,
    },
    QueueClosed {
        queue: String,
    },
    Capability {
        queue: String,
        /// Per resource over the bound: `(resource, held, requested, capability)`.
        over: Vec<(ResourceId, i64, i64, i64)>,
    },
    /// The sum of what the gang needs for quorum exceeds the free room available to it.
    Room {
        needed: Resources,
        available: Resources,
    },
    /// The sum fits, but this member fits on no single node.
    NoNode {
        member: Resources,
    },
    /// No domain of the group's required level (`topologyKey`) could hold every member even
    /// with nothing else running. `pinned`: the domain a member already names or runs in;
    /// `member`: one that found no node left in the domain that held the most, `None` when no
    /// schedulable node has the level's labels.
    NoDomain {
        key: String,
        pinned: Option<String>,
        member: Option<Resources>,
    },
    /// No domain of any level the group may use has room for every member now: per level
    /// tried (narrowest first), the domains that came closest. `pinned`: as for
    /// [`Why::NoDomain`].
    NoDomainRoom {
        tried: Vec<LevelTried>,
        pinned: Option<String>,
    },
    /// An instance of the gang's minimum whose sub-group keeps each instance to one domain
    /// (its `topologyKey`) found no domain of that level with room for all of it now.
    /// `pinned`: as for [`Why::NoDomain`], of the instance's members.
    NoInstanceDomainRoom {
        sub_group: String,
        tried: LevelTried,
        pinned: Option<String>,
    },
    OverShare {
        /// Shared with the pass's other groups of the queue: most waiting groups of a busy
        /// cluster wait for this reason.
        queue: Arc<str>,
        share: DominantShare,
        room: Box<Why>,
    },
    /// Elastic members (beyond `minMember` of a gang that has quorum) wait while `group`, a
    /// gang of any queue, waits for room that elastic members hold: they yield to any gang's
    /// minimum, so the room their evictions free goes to `group`.
    ElasticYields {
        group: GroupKey,
    },
    /// Its queue holds at least its deserved share while a group of `starved`, a queue below
    /// its share, waits for room: the room reclaim frees goes to that one.
    Yields {
        queue: Arc<str>,
        share: DominantShare,
        starved: Arc<str>,
    },
    Behind {
        head: GroupKey,
        /// What the head's reservation holds, summed over its nodes.
        held: Resources,
        room: Box<Why>,
    },
    Reserved {
        /// `(waited, maxWait)` in seconds when it is overdue.
        overdue: Option<(i64, i64)>,
        nodes: usize,
        held: Resources,
        room: Box<Why>,
    },
    /// The cluster grows for it: `asked` stand-in pods, `placed` of them on nodes, growth asked
    /// `waited` seconds ago; it is given up after `timeout` seconds.
    Growing {
        asked: usize,
        /// What the stand-ins ask for, in all.
        requests: Resources,
        placed: usize,
        waited: i64,
        timeout: i64,
        /// What the API server last said refusing a stand-in.
        refused: Option<String>,
        room: Box<Why>,
    },
    /// It needs the cluster to grow, but as many gangs as may grow at once already do
    /// (`behind`: the first of them).
    GrowthQueued {
        behind: Option<GroupKey>,
        room: Box<Why>,
    },
    /// Its stand-ins were not all placed within `timeout` seconds, `ago` seconds ago; `message`
    /// is what the autoscaler last said about one.
    GrowthFailed {
        ago: i64,
        timeout: i64,
        message: Option<String>,
        room: Box<Why>,
    },
}

/// The domains of one level a waiting gang was tried in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelTried {
    /// The level's label (the narrowest of the keys naming its domains).
    pub key: String,
    /// How many domains of it were tried.
    pub domains: usize,
    /// The ones that held the most members, most first (at most [`LevelTried::SHOWN`]).
    pub closest: Vec<DomainTried>,
}

/// One domain a waiting gang was tried in, and what it lacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainTried {
    /// `key=value,...` (see [`crate::model::topology::describe`]).
    pub domain: String,
    /// How many members found a node there before `member` found none.
    pub placed: usize,
    pub of: usize,
    pub member: Resources,
}

impl LevelTried {
    /// How many of a level's domains a reason names.
    pub const SHOWN: usize = 2;
}

impl fmt::Display for LevelTried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LevelTried {
            key,
            domains,
            closest,
        } = self;
        if *domains == 0 {
            return write!(f, "no schedulable node has the label {key}");
        }
        let plural = if *domains == 1 { "" } else { "s" };
        write!(f, "{domains} domain{plural} of {key} tried")?;
        for (i, d) in closest.iter().enumerate() {
            let lead = if i == 0 { ": " } else { ", " };
            write!(
                f,
                "{lead}{} holds {} of {} members (then one requesting {} finds no node)",
                d.domain, d.placed, d.of, d.member
            )?;
        }
        Ok(())
    }
}

impl Why {
    /// The condition reason for these details.
    pub fn reason(&self) -> Reason {
        match self {
            Why::Members { .. } => Reason::WaitingForMembers,
            Why::PodGroupMissing { .. } => Reason::PodGroupMissing,
            Why::SubGroupShort(_) => Reason::WaitingForMembers,
            Why::SchedulerNotServed { .. } => Reason::SchedulerNotServed,
            Why::QueueMissing { .. } => Reason::QueueMissing,
            Why::QueueClosed { .. } => Reason::QueueClosed,
            Why::Capability { .. } => Reason::CapabilityReached,
            Why::NoDomain { .. } => Reason::NoDomainFits,
            Why::Room { .. }
            | Why::NoNode { .. }
            | Why::NoDomainRoom { .. }
            | Why::NoInstanceDomainRoom { .. }
            | Why::ElasticYields { .. } => Reason::DoesNotFit,
            Why::OverShare { .. } | Why::Yields { .. } => Reason::QueueOverShare,
            Why::Behind { .. } => Reason::BehindReservation,
            Why::Reserved { overdue: None, .. } => Reason::Reserved,
            Why::Reserved {
                overdue: Some(_), ..
            } => Reason::OverdueReserved,
            Why::Growing { .. } | Why::GrowthQueued { .. } => Reason::WaitingForGrowth,
            Why::GrowthFailed { .. } => Reason::GrowthFailed,
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Members {
                live, min_member, ..
            } if !limits::gang_within_limit(*min_member) => {
                write!(
                    f,
                    "minMember {min_member} is more than Gangplank's largest gang ({}), so the group is never admitted; lower spec.minMember ({live} pods exist)",
                    limits::MAX_MEMBERS
                )
            }
            Why::Members {
                live,
                succeeded: 0,
                min_member,
            } => write!(
                f,
                "{live} of minMember {min_member} pods exist; waiting for the rest before releasing any"
            ),
            Why::Members {
                live,
                succeeded,
                min_member,
            } => write!(
                f,
                "{live} pods exist and {succeeded} succeeded, of minMember {min_member} (finished members count); waiting for the rest before releasing any"
            ),
            Why::SubGroupShort(short) => {
                write!(f, "{short}; waiting for the rest before releasing any")
            }
            Why::PodGroupMissing { group } => write!(
                f,
                "no PodGroup {group}: create one (minMember is the gang size), or label a Job with a queue so that Gangplank creates it"
            ),
            Why::SchedulerNotServed { pod, scheduler } => write!(
                f,
                "pod {pod} names the scheduler {scheduler:?}, which no scheduler of this cluster serves (Gangplank's --scheduler-names), so nobody would place it: the gang is not admitted and holds no room. Recreate the pod with a served spec.schedulerName, or serve that name (a profile of the scheduler's configuration, and --scheduler-names)"
            ),
            Why::QueueMissing { queue } => write!(
                f,
                "queue {queue} does not exist: create it, or name an existing queue with the label scheduling.gangplank.dev/queue"
            ),
            Why::QueueClosed { queue } => write!(
                f,
                "queue {queue} is Closed: it admits nothing until its spec.state is Open again"
            ),
            Why::Capability { queue, over } => {
                write!(f, "queue {queue} has reached its capability: ")?;
                for (i, (id, held, requested, limit)) in over.iter().enumerate() {
                    let name = id.name();
                    let sep = if i == 0 { "" } else { ", " };
                    write!(
                        f,
                        "{sep}{name} {} held + {} requested > capability {}",
                        human(name, *held),
                        human(name, *requested),
                        human(name, *limit)
                    )?;
                }
                Ok(())
            }
            Why::Room { needed, available } => {
                f.write_str("does not fit now: ")?;
                write_shortfall(f, needed, available)?;
                f.write_str(" (free room counts other queues' unused guarantees as taken)")
            }
            Why::NoNode { member } => write!(
                f,
                "does not fit now: no schedulable node has room for a member requesting {member}"
            ),
            Why::NoDomain {
                key,
                pinned,
                member,
            } => match (pinned, member) {
                (_, None) => write!(
                    f,
                    "never fits as it is: no schedulable node has the label {key} (its spec.topologyKey)"
                ),
                (Some(value), Some(member)) => write!(
                    f,
                    "never fits as it is: its members must run where {value} (a member is there already), and those nodes could not hold every member even with nothing else running (a member requesting {member} finds no node left); lower minMember or the members' requests"
                ),
                (None, Some(member)) => write!(
                    f,
                    "never fits as it is: no single domain of {key} could hold every member even with nothing else running (a member requesting {member} finds no node left in the largest); lower minMember or the members' requests, or choose a wider spec.topologyKey"
                ),
            },
            Why::NoInstanceDomainRoom {
                sub_group,
                tried,
                pinned,
            } => {
                write!(
                    f,
                    "does not fit now: each instance of sub-group {sub_group} runs within one domain"
                )?;
                if let Some(value) = pinned {
                    write!(f, ", one of them where {value} (a member is there already)")?;
                }
                write!(f, "; no domain has room for all of an instance; {tried}")
            }
            Why::NoDomainRoom { tried, pinned } => {
                f.write_str("does not fit now: ")?;
                if let Some(value) = pinned {
                    write!(
                        f,
                        "its members must run where {value} (a member is there already); "
                    )?;
                }
                f.write_str("no single domain has room for every member")?;
                for level in tried {
                    write!(f, "; {level}")?;
                }
                Ok(())
            }
            Why::OverShare { queue, share, room } => write!(
                f,
                "queue {queue} holds {share} (at or above its fair share, so queues below theirs go first); {room}"
            ),
            Why::ElasticYields { group } => write!(
                f,
                "its elastic members beyond minMember wait while gang {group} waits for room for its minMember: elastic members yield to any gang's minimum"
            ),
            Why::Yields {
                queue,
                share,
                starved,
            } => write!(
                f,
                "queue {queue} holds {share} (at or above its fair share) while queue {starved}, below its share, waits for room: the room that frees goes to {starved} first"
            ),
            Why::Behind { head, held, room } => write!(
                f,
                "behind a reservation for {head}, which holds {held} until it fits; {room}"
            ),
            Why::Reserved {
                overdue,
                nodes,
                held,
                room,
            } => {
                if let Some((waited, max)) = overdue {
                    write!(
                        f,
                        "waited {waited}s, over its maxWaitSeconds {max}: admitted next, before the fair-share order; "
                    )?;
                } else {
                    f.write_str("first in line: ")?;
                }
                write!(
                    f,
                    "holds a reservation of {held} on {nodes} nodes that groups behind it may not take; {room}"
                )
            }
            Why::Growing {
                asked,
                requests,
                placed,
                waited,
                timeout,
                refused,
                room,
            } => {
                write!(
                    f,
                    "waiting for the cluster to grow: {asked} stand-in pods sized like its members ask the node autoscaler for {requests} in all, {placed} of them on nodes ({waited}s since growth was asked; given up after {timeout}s)"
                )?;
                if let Some(refused) = refused {
                    write!(f, "; Gangplank's stand-ins are refused: {refused}")?;
                }
                write!(f, "; {room}")
            }
            Why::GrowthQueued {
                behind: Some(behind),
                room,
            } => write!(
                f,
                "needs the cluster to grow, after gang {behind}, which grows first (Gangplank's --growth-at-once); {room}"
            ),
            Why::GrowthQueued { behind: None, room } => write!(
                f,
                "needs the cluster to grow, after the gangs growing now (Gangplank's --growth-at-once); {room}"
            ),
            Why::GrowthFailed {
                ago,
                timeout,
                message,
                room,
            } => {
                write!(
                    f,
                    "the cluster did not grow for it: its stand-in pods were not all on nodes within {timeout}s"
                )?;
                if let Some(message) = message {
                    write!(f, " (the autoscaler said: {message})")?;
                }
                write!(
                    f,
                    "; it holds no room and asks again in {}s; {room}",
                    timeout.saturating_sub(*ago)
                )
            }
        }
    }
}
