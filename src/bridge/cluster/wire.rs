//! The cluster mbox's own event on the wire: a node's interest in one cluster mbox, and
//! the key predicates of shippable filters.

use serde::{Deserialize, Serialize};

use crate::actors::{event_space_begin, Event, EventSpace, EventType};
use crate::interconnect::{InterconnectSetup, RemoteEvent, Serde};

/// The event space of agentbox's own remote events (just below YDB's user space).
pub(crate) const ES_AGENTBOX: EventSpace = 4095;

/// The event type of [`ClusterInterest`].
pub const EV_CLUSTER_INTEREST: EventType = event_space_begin(ES_AGENTBOX) + 1;

/// One node's whole interest in one cluster mbox: which event types its agents subscribe
/// to, how many subscribers each has, and (when every one of them filters with a
/// shippable filter) their key predicates. Sent to a peer when its session connects and
/// whenever the interest changes (and in answer to a peer whose session just came up); a
/// later `version` of the same `incarnation` replaces an
/// earlier one.
///
/// Only the cluster mbox reads it; it is public so that it can be named when its codec is
/// registered ([`ClusterMboxEvents::cluster_mbox_events`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInterest {
    pub(crate) mbox: String,
    pub(crate) incarnation: u64,
    pub(crate) version: u64,
    pub(crate) types: Vec<TypeInterest>,
    /// The sender's session to the receiver just came up: the receiver answers with its
    /// own interest (an announcement sent before this node's mbox was built was lost).
    pub(crate) ask: bool,
}

impl Event for ClusterInterest {
    const EVENT_TYPE: EventType = EV_CLUSTER_INTEREST;
}

impl RemoteEvent for ClusterInterest {
    type Codec = Serde;
}

/// One event type's subscribers on the announcing node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TypeInterest {
    pub(crate) event_type: EventType,
    pub(crate) subscribers: u32,
    /// `Some` when every subscriber filters with a shippable filter: a message none of
    /// them accepts need not be sent.
    pub(crate) keys: Option<Vec<KeyPredicate>>,
}

/// A serializable predicate over a message's key ([`ClusterKey`](super::ClusterKey)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum KeyPredicate {
    /// The key equals this.
    Eq(u64),
    /// The key is in this inclusive range.
    Range(u64, u64),
    /// The key is one of these (sorted).
    In(Vec<u64>),
}

impl KeyPredicate {
    pub(crate) fn matches(&self, key: u64) -> bool {
        match self {
            KeyPredicate::Eq(k) => key == *k,
            KeyPredicate::Range(lo, hi) => (*lo..=*hi).contains(&key),
            KeyPredicate::In(keys) => keys.binary_search(&key).is_ok(),
        }
    }
}

/// Adds the cluster mbox's own event to an [`InterconnectSetup`]: call
/// [`cluster_mbox_events`](Self::cluster_mbox_events) on the setup of every node that
/// builds a [`ClusterMbox`](super::ClusterMbox) (and register each event type the cluster
/// mbox carries with [`InterconnectSetup::event`], as for any remote event).
///
/// # Examples
///
/// ```
/// use agentbox::bridge::ClusterMboxEvents;
/// use agentbox::interconnect::{InterconnectSetup, NameService};
///
/// let setup = InterconnectSetup::new(NameService::new()).cluster_mbox_events();
/// # let _ = setup;
/// ```
pub trait ClusterMboxEvents {
    /// The setup with the codec of [`ClusterInterest`] registered.
    #[must_use]
    fn cluster_mbox_events(self) -> Self;
}

impl ClusterMboxEvents for InterconnectSetup {
    fn cluster_mbox_events(self) -> Self {
        self.event::<ClusterInterest>()
    }
}
