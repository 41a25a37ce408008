//! YDB's actor model on agentbox: ids and events bit-compatible with YDB's, actors with
//! state functions, an actor system per node, YDB's non-delivery rules, dead letters and
//! pools.
//!
//! # Writing an actor
//!
//! An [`Actor`] gets [`bootstrap`](Actor::bootstrap) first (with its parent's id), sets a
//! [`StateFn`] with [`ActorContext::become_state`], and from then on every
//! [`EventHandle`] goes to the current state function, which returns [`Handled`]. Through
//! its [`ActorContext`] it sends ([`send`](ActorContext::send),
//! [`send_with`](ActorContext::send_with) with flags and cookie,
//! [`forward`](ActorContext::forward)), schedules events to itself
//! ([`schedule`](ActorContext::schedule), cancellable), registers actors
//! ([`register`](ActorContext::register), [`register_on`](ActorContext::register_on) a
//! named pool, [`register_with_same_mailbox`](ActorContext::register_with_same_mailbox))
//! and ends itself ([`pass_away`](ActorContext::pass_away)).
//!
//! ```
//! use std::time::Duration;
//! use agentbox::actors::*;
//! use agentbox::{ActorId, Environment};
//!
//! const EVENTS: u32 = event_space_begin(ES_USERSPACE + 1);
//! struct Request(u64);
//! impl Event for Request { const EVENT_TYPE: u32 = EVENTS + 1; }
//! struct Response(u64);
//! impl Event for Response { const EVENT_TYPE: u32 = EVENTS + 2; }
//!
//! /// Doubles numbers; reached through the local service "doubler".
//! struct Doubler;
//! impl Actor for Doubler {
//!     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
//!         ctx.become_state(Self::working);
//!     }
//! }
//! impl Doubler {
//!     fn working(&mut self, ctx: &mut ActorContext<Self>, mut ev: EventHandle) -> Handled {
//!         match ev.take::<Request>() {
//!             Some(Request(n)) => {
//!                 // Replies echo the cookie.
//!                 ctx.send_with(ev.sender(), Response(2 * n), EventFlags::empty(), ev.cookie());
//!                 Handled::Yes
//!             }
//!             None => ev.unhandled(), // Poison: passes away
//!         }
//!     }
//! }
//!
//! /// Asks once, with a timeout, then passes away.
//! struct Client { timeout: Option<ScheduleHandle> }
//! impl Actor for Client {
//!     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
//!         let doubler = ActorId::service(0, b"doubler").unwrap();
//!         ctx.send_with(doubler, Request(21), EventFlags::TRACK_DELIVERY, 1);
//!         self.timeout = Some(ctx.schedule(Duration::from_secs(60), Wakeup { tag: 0 }));
//!         ctx.become_state(Self::waiting);
//!     }
//! }
//! impl Client {
//!     fn waiting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
//!         if let Some(Response(n)) = ev.get::<Response>() {
//!             assert_eq!((*n, ev.cookie()), (42, 1));
//!             if let Some(t) = self.timeout.take() {
//!                 t.cancel();
//!             }
//!             ctx.send(ev.sender(), Poison);
//!         } else if ev.is::<Undelivered>() || ev.is::<Wakeup>() {
//!             // No doubler, or no answer in time.
//!         } else {
//!             return ev.unhandled();
//!         }
//!         ctx.pass_away().unwrap();
//!         Handled::Yes
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let setup = SystemSetup::new(1)
//!         .pool(PoolConfig::new(PoolConfig::SYSTEM))
//!         .pool(PoolConfig::new(PoolConfig::USER).threads(2))
//!         .local_service(ActorId::service(0, b"doubler").unwrap(), "System", Doubler);
//!     let system = ActorSystem::start(env, setup).unwrap();
//!     // From outside any actor: the system handle.
//!     let client = system.register_on("User", Client { timeout: None }).unwrap();
//!     assert_eq!((client.node_id(), client.pool_id()), (1, 1));
//! }).unwrap(); // ends when both actors have passed away
//! ```
//!
//! # The pieces
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
//! - [`EventHandle`]: type, flags, recipient, sender, cookie and the event.
//! - [`stfunc!`](crate::stfunc): a state function as YDB writes one (`STFUNC` with
//!   `hFunc`/`cFunc`/`IgnoreFunc` arms), dispatching by event type to methods.
//! - [`ActorSystem`]: one node on an [`Environment`](crate::Environment), built from a
//!   [`SystemSetup`] (node id, [`PoolConfig`]s, local services, start functions). Its
//!   docs state the routing and non-delivery rules. Many systems live in one process.
//! - [`DeadLetter`]s on [`ActorSystem::dead_letters`], counted in [`SystemStats`] and the
//!   environment's stats controller; [`PoolStats`] per pool.
//!
//! # How it sits on the core
//!
//! An actor's mailbox is an agent of the core, registered in a coop of its own on its
//! pool's dispatcher (one pool = one dispatcher): exception reactions, dispatchers,
//! timers, tracing and stats apply to actors unchanged. The mailbox's agent receives
//! every event as one mutable message type on its direct mbox and calls the hosted actor's
//! state function. Each pool keeps a table of its actors indexed by the hint, with the
//! local id as generation check: a lookup is one index and one compare, no hashing.
//!
//! Numbers, layouts and names follow YDB's actor library (`ydb/library/actors`): an
//! [`ActorId`] is YDB's `TActorId` word for word (the raw words, text form and order are
//! YDB's), event types use YDB's event spaces ([`event_space_begin`]: 64 Ki types per
//! space, [`ES_SYSTEM`] and [`ES_INTERCONNECT`] as YDB numbers them), the system events
//! have YDB's numbers and [`Undelivered`] its 8-byte body, [`EventFlags`] keep YDB's bits
//! with the channel in the top 12 bits, and non-delivery follows YDB's order
//! (`FORWARD_ON_NONDELIVERY`, then `TRACK_DELIVERY`, else nothing).

mod actor;
mod dead_letters;
mod delivery;
mod event;
mod flags;
mod handle;
mod id;
mod idle;
mod inner;
mod mailbox;
mod parse;
mod pools;
mod routing;
mod services;
mod setup;
mod stfunc;
mod system;
mod system_events;
mod table;

#[cfg(test)]
mod tests_event;
#[cfg(test)]
mod tests_id;

pub use actor::{Actor, ActorContext, PassAwayError, StateFn};
pub use dead_letters::{DeadLetter, DeadLetterReason};
pub use delivery::ScheduleHandle;
pub use event::{
    event_space, event_space_begin, Event, EventSpace, EventType, ES_INTERCONNECT,
    ES_INTERCONNECT_TCP, ES_PRIVATE, ES_SYSTEM, ES_USERSPACE, EV_BOOTSTRAP, EV_GONE,
    EV_NODE_CONNECTED, EV_NODE_DISCONNECTED, EV_POISON, EV_SUBSCRIBE, EV_UNDELIVERED,
    EV_UNSUBSCRIBE, EV_WAKEUP,
};
pub use flags::{ChannelOutOfRange, EventFlags};
pub use handle::{EventHandle, Handled};
// The bridge's hooks (`crate::bridge`): its endpoints take deliveries and register ids.
pub(crate) use delivery::Delivery;
pub use id::{ActorId, ActorIdError, OrderedActorId};
pub(crate) use inner::SystemInner;
pub use inner::{ActorSystem, RegisterActorError};
pub use parse::{ActorIdField, ParseActorIdError};
pub use pools::{PoolConfig, PoolStats};
pub use routing::Route;
pub use services::ServiceError;
pub use setup::{SystemError, SystemSetup};
pub use system::SystemStats;
// The interconnect's hooks (see `RemoteRouter` and `EventHandle::serialized_with`).
#[cfg(feature = "interconnect")]
pub(crate) use handle::{serialized_as, Body, DecodeFn, Received};
#[cfg(feature = "interconnect")]
pub(crate) use inner::RemoteRouter;
pub use system_events::{
    Bootstrap, Gone, Poison, Undelivered, UndeliveredDecodeError, UndeliveredReason,
    UnknownUndeliveredReason, Wakeup,
};
