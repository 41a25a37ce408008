//! One world: the core's mboxes reachable by YDB `ActorId`s, from actors, agents and
//! other nodes.
//!
//! An [`Endpoint`] exposes any mbox (direct, MPMC, named, custom) in an
//! [`ActorSystem`](crate::actors::ActorSystem) under an id, a fresh one or a service. An event
//! sent to that id — by an actor, by an agent through an [`Exposed`] endpoint of its own, or
//! from another node through the interconnect — arrives in the mbox as an ordinary message,
//! so every subscription, delivery filter, state, message limit and tracing rule of the
//! core applies to it unchanged.
//!
//! A `ClusterMbox` (feature `interconnect`) goes further: one named MPMC mbox on every
//! node of a cluster, subscribed to on any node as a local one, whose sends reach every
//! subscriber in the cluster with one wire copy per interested node (its docs give its own
//! rules: announcements, shippable filters, membership, round robin).
//!
//! # Rules
//!
//! 1. **Types.** The endpoint names each event type it takes and how it arrives: as `E`,
//!    as [`FromActor<E>`] (with sender, recipient, cookie and flags, to answer the sender
//!    as YDB's actors do, echoing the cookie), or as [`Mutable<E>`](crate::Mutable) to a
//!    single-consumer mbox. An event of a type not named is a dead letter
//!    ([`Unhandled`](crate::actors::DeadLetterReason::Unhandled)), as an event an actor
//!    gives back; so is a serialized event that does not decode.
//! 2. **Where it runs.** The event becomes a message on the sender's thread (for an event
//!    from another node: the interconnect's reader thread) and is queued by the mbox's
//!    subscribers' dispatchers; the endpoint has no thread or queue of its own. A delivery
//!    filter of the mbox runs there too. It never blocks: it delivers in
//!    [`DeliveryMode::Nonblocking`](crate::DeliveryMode), so a full bounded chain applies
//!    its overflow reaction at once, and an mbox that refuses the message (a full or
//!    closed chain, a custom mbox) makes the event not delivered, reason `Unhandled`
//!    (with `TRACK_DELIVERY`, the sender gets `Undelivered` with its cookie).
//! 3. **Non-delivery.** An id whose endpoint was dropped is unknown: YDB's rules apply
//!    (`TRACK_DELIVERY` gives the sender `Undelivered { ActorUnknown }` with its cookie,
//!    `FORWARD_ON_NONDELIVERY` forwards). The direct mbox of an agent whose coop is being
//!    deregistered, or is gone, is treated as an actor that passed away, with the same
//!    rules. Inside the mbox the core's
//!    rules hold: a message nobody subscribes to, or a filter refuses, is counted in
//!    [`DropCounts`](crate::DropCounts) and not reported to the sender.
//! 4. **Sending.** An agent sends to any `ActorId` (local or remote) through
//!    [`Exposed::send`]/[`send_with`](Exposed::send_with), from its endpoint's id, so that
//!    answers and `Undelivered` notices come back to its mbox; an actor sends to an mbox with
//!    [`Mbox::send`](crate::Mbox::send), as any code does. Only YDB events cross nodes: an
//!    event whose type has no codec registered with the interconnect is refused at the send
//!    with [`BridgeSendError::NotSerializable`], never dropped in silence.
//! 5. **Order.** Events from one sender to one endpoint keep their order (the actor system's
//!    and the interconnect's per-channel order, then the mbox's per-sender order).
//!
//! # Replies to an agent from another node
//!
//! An agent that asks a service on another node and wants the answers in its own mbox
//! exposes its direct mbox in `define`, keeps the [`Exposed`] endpoint as a field (so it
//! knows its own id from the start, and the id goes when the agent goes), and sends
//! through a [`RemoteMbox`] built [`from`](RemoteMbox::from) that id: the service answers
//! the sender, and the answer arrives as an ordinary message. No id needs to be shared
//! through an `Arc<Mutex<…>>`.
//!
//! ```ignore
//! fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!     let me = Endpoint::new(&ctx.direct_mbox()).event::<Doubled>().expose(&self.system)?;
//!     self.doubler = Some(
//!         RemoteMbox::new(&self.system, doubler_id()).from(me.id()).event::<Double>().build()?,
//!     );
//!     self.endpoint = Some(me);
//!     ctx.subscribe_self().event(|a: &mut Self, _, d: &Doubled| { /* the answer */ })?;
//!     Ok(())
//! }
//! ```
//!
//! The whole program, two nodes on loopback: `examples/remote_replies.rs`
//! (`cargo run --example remote_replies`; CI runs it).
//!
//! # Examples
//!
//! An agent that is also reachable by id: it answers `Ping`s from an actor.
//!
//! ```
//! use agentbox::actors::*;
//! use agentbox::bridge::{Endpoint, FromActor};
//! use agentbox::prelude::*;
//! use agentbox::ActorId;
//!
//! const EVENTS: u32 = event_space_begin(ES_USERSPACE + 3);
//! struct Ping(u32);
//! impl Event for Ping { const EVENT_TYPE: u32 = EVENTS + 1; }
//! struct Pong(u32);
//! impl Event for Pong { const EVENT_TYPE: u32 = EVENTS + 2; }
//!
//! /// An agent of the core, written the SObjectizer way.
//! struct Ponger { system: ActorSystem }
//! impl Agent for Ponger {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|a: &mut Self, ctx, ping: &FromActor<Ping>| {
//!             // Answer the actor, echoing its cookie.
//!             a.system.send_handle(ping.reply(ping.recipient(), Pong(ping.0 + 1)));
//!             ctx.deregister_coop(DeregReason::Normal);
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! /// An actor that pings the agent's id and checks the answer.
//! struct Pinger { to: ActorId }
//! impl Actor for Pinger {
//!     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
//!         ctx.send_with(self.to, Ping(41), EventFlags::empty(), 7);
//!         ctx.become_state(Self::waiting);
//!     }
//! }
//! impl Pinger {
//!     fn waiting(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
//!         let Some(Pong(n)) = ev.get::<Pong>() else { return ev.unhandled() };
//!         assert_eq!((*n, ev.cookie()), (42, 7));
//!         ctx.pass_away().unwrap();
//!         Handled::Yes
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
//!     let s = system.clone();
//!     let mbox = env.introduce_coop(|coop| coop.add_agent(Ponger { system: s })).unwrap();
//!     let exposed = Endpoint::new(&mbox).event_from_actor::<Ping>().expose(&system).unwrap();
//!     system.register(Pinger { to: exposed.id() }).unwrap();
//!     exposed.detach(); // reachable while the system lives
//! }).unwrap(); // ends when the agent's coop and the actor are gone
//! ```

#[cfg(feature = "interconnect")]
mod cluster;
mod endpoint;
mod origin;
#[cfg(feature = "interconnect")]
mod remote;

#[cfg(feature = "interconnect")]
pub use cluster::{
    ClusterInterest, ClusterKey, ClusterMbox, ClusterMboxError, ClusterMboxEvents, ClusterView,
    ShippableFilter, EV_CLUSTER_INTEREST,
};
pub use endpoint::{BridgeSendError, Endpoint, ExposeError, Exposed};
pub use origin::FromActor;
#[cfg(feature = "interconnect")]
pub use remote::{RemoteMbox, RemoteMboxError};
