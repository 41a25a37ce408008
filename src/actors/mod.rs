//! YDB's actor model on agentbox: ids and events that are bit-compatible with YDB's.
//!
//! This module holds the value types of the layer; the actor system, the event handles
//! and routing are built on them.
//!
//! - [`ActorId`]: the 16-byte address of an actor or a service, with YDB's exact layout,
//!   text form (`[node:local:hint]`, parsed with YDB's quirks, see
//!   [`ParseActorIdError`]), orders ([`Ord`] and [`ActorId::cmp_ordered`] /
//!   [`OrderedActorId`]) and serde form (the two raw words). Well-known ids:
//!   [`ActorId::interconnect_proxy`], [`ActorId::name_service`].
//! - Event types: a `u32` ([`EventType`]) in 64 Ki-wide spaces ([`event_space_begin`],
//!   [`ES_SYSTEM`], [`ES_USERSPACE`]...), given to a Rust type by the [`Event`] trait.
//! - [`EventFlags`]: delivery flags and the 12-bit channel of a handle.
//! - System events: [`Bootstrap`], [`Wakeup`], [`Poison`], [`Undelivered`] (with its
//!   8-byte wire form), [`Gone`].
//!
//! Numbers, layouts and names follow YDB's actor library (`ydb/library/actors`); the
//! compatibility rules are restated in the project's `YDB.md`.

mod actor;
mod dead_letters;
mod event;
mod flags;
mod handle;
mod id;
mod mailbox;
mod parse;
mod pools;
mod routing;
mod services;
mod system;
mod system_events;
mod table;

#[cfg(test)]
mod tests_event;
#[cfg(test)]
mod tests_id;

pub use actor::{Actor, ActorContext, PassAwayError, ScheduleHandle, StateFn};
pub use dead_letters::{DeadLetter, DeadLetterReason};
pub use event::{
    event_space, event_space_begin, Event, EventSpace, EventType, ES_INTERCONNECT,
    ES_INTERCONNECT_TCP, ES_PRIVATE, ES_SYSTEM, ES_USERSPACE, EV_BOOTSTRAP, EV_GONE,
    EV_NODE_CONNECTED, EV_NODE_DISCONNECTED, EV_POISON, EV_SUBSCRIBE, EV_UNDELIVERED,
    EV_UNSUBSCRIBE, EV_WAKEUP,
};
pub use flags::{ChannelOutOfRange, EventFlags};
pub use handle::{EventHandle, Handled};
pub use id::{ActorId, ActorIdError, OrderedActorId};
pub use parse::{ActorIdField, ParseActorIdError};
pub use pools::{PoolConfig, PoolStats};
pub use routing::Route;
pub use services::ServiceError;
pub use system::{ActorSystem, RegisterActorError, SystemError, SystemSetup, SystemStats};
pub use system_events::{
    Bootstrap, Gone, Poison, Undelivered, UndeliveredDecodeError, UndeliveredReason,
    UnknownUndeliveredReason, Wakeup,
};
