//! Shippable filters: delivery filters whose predicate is data (a key compared with a
//! value, a range or a set), so that the sending node runs them too.

use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::sync::Arc;

use super::wire::KeyPredicate;
use crate::actors::{Event, EventType};
use crate::agent::{Agent, Context};
use crate::mbox::{DeliveryFilter, Mbox, SubscribeError};

/// The key of a message that shippable filters compare: a `u64` read from the message
/// (a field, a hash of one). The same code runs on every node, so that a predicate
/// shipped from one node means the same on another.
///
/// # Examples
///
/// ```
/// use agentbox::bridge::ClusterKey;
/// struct Job { shard: u32 }
/// impl ClusterKey for Job {
///     fn cluster_key(&self) -> u64 { u64::from(self.shard) }
/// }
/// ```
pub trait ClusterKey {
    /// The message's key.
    fn cluster_key(&self) -> u64;
}

/// The predicate a shippable filter carries, with the event type it is about.
#[derive(Debug)]
pub(crate) struct Shipped {
    pub(crate) event_type: EventType,
    pub(crate) predicate: KeyPredicate,
}

/// A delivery filter that a [`ClusterMbox`](super::ClusterMbox) also runs on the sending
/// node: a predicate over the message's [`ClusterKey`] (equal to, in a range, in a set).
/// The subscribing node announces it with its subscription; a sending node that knows the
/// key of `E` (the cluster mbox was built with
/// [`keyed_event::<E>`](super::ClusterMbox::keyed_event)) sends a message to that node
/// only if some subscriber there accepts it, so that a filtered-out message never crosses
/// the wire. The receiving node runs the filter again, as any delivery filter.
///
/// A node ships its filters for a type only when every subscriber of that type there has
/// one; a subscriber without a filter, or with a closure filter, makes the node take
/// every message of the type (the filters then run on the receiving node only).
///
/// # Examples
///
/// ```
/// use agentbox::bridge::{ClusterKey, ShippableFilter};
/// use agentbox::actors::{event_space_begin, Event, ES_USERSPACE};
/// # use agentbox::Message;
///
/// struct Job { shard: u64 }
/// impl Event for Job { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
/// impl ClusterKey for Job { fn cluster_key(&self) -> u64 { self.shard } }
///
/// let f = ShippableFilter::<Job>::key_in([1, 5, 9]);
/// assert!(f.matches(&Job { shard: 5 }));
/// assert!(!f.matches(&Job { shard: 6 }));
/// let filter = f.into_delivery_filter(); // or `f.set(ctx, &mbox)` in an agent
/// assert!(filter.accepts(&Message::new(Job { shard: 9 })));
/// ```
pub struct ShippableFilter<E> {
    predicate: KeyPredicate,
    _event: PhantomData<fn(&E)>,
}

impl<E: Event + ClusterKey + Sync> ShippableFilter<E> {
    fn of(predicate: KeyPredicate) -> Self {
        ShippableFilter {
            predicate,
            _event: PhantomData,
        }
    }

    /// Messages whose key equals `key`.
    pub fn key_eq(key: u64) -> Self {
        Self::of(KeyPredicate::Eq(key))
    }

    /// Messages whose key is in `range` (inclusive).
    pub fn key_range(range: RangeInclusive<u64>) -> Self {
        Self::of(KeyPredicate::Range(*range.start(), *range.end()))
    }

    /// Messages whose key is one of `keys`.
    pub fn key_in(keys: impl IntoIterator<Item = u64>) -> Self {
        let mut keys: Vec<u64> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        Self::of(KeyPredicate::In(keys))
    }

    /// Whether `event` passes.
    pub fn matches(&self, event: &E) -> bool {
        self.predicate.matches(event.cluster_key())
    }

    /// The delivery filter (a filter over `E` that carries its shippable form).
    pub fn into_delivery_filter(self) -> DeliveryFilter {
        let shipped = Arc::new(Shipped {
            event_type: E::EVENT_TYPE,
            predicate: self.predicate.clone(),
        });
        let predicate = self.predicate;
        DeliveryFilter::with_shipped(move |e: &E| predicate.matches(e.cluster_key()), shipped)
    }

    /// Sets it as the agent's delivery filter for `E` on `mbox`
    /// ([`Context::set_built_delivery_filter`]).
    ///
    /// # Errors
    ///
    /// As [`Context::set_delivery_filter`].
    pub fn set<A: Agent>(self, ctx: &mut Context<A>, mbox: &Mbox) -> Result<(), SubscribeError> {
        ctx.set_built_delivery_filter::<E>(mbox, self.into_delivery_filter())
    }
}

impl<E> std::fmt::Debug for ShippableFilter<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShippableFilter")
            .field("type", &std::any::type_name::<E>())
            .field("predicate", &self.predicate)
            .finish()
    }
}
