//! # agentbox
//!
//! Agents that talk only by messages: SObjectizer's model in Rust.
//!
//! Agents send messages into *mboxes*; an mbox stores nothing and hands each message to
//! the agents subscribed to its type (after their *delivery filters*); *dispatchers* own
//! the queues and the threads and run each agent's handlers one at a time. Agents live in
//! *coops* registered in an *environment*.
//!
//! ```
//! use agentbox::prelude::*;
//!
//! struct Ping(u32);
//! struct Pong(u32);
//!
//! struct Pinger { ponger: Mbox }
//! struct Ponger;
//!
//! impl Agent for Pinger {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|a: &mut Self, ctx, pong: &Pong| {
//!             if pong.0 == 3 {
//!                 ctx.deregister_coop(DeregReason::Normal);
//!             } else {
//!                 send(&a.ponger, (ctx.direct_mbox(), Ping(pong.0 + 1))).unwrap();
//!             }
//!         })?;
//!         Ok(())
//!     }
//!     fn on_start(&mut self, ctx: &mut Context<Self>) {
//!         send(&self.ponger, (ctx.direct_mbox(), Ping(0))).unwrap();
//!     }
//! }
//!
//! impl Agent for Ponger {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|_: &mut Self, _, (reply_to, ping): &(Mbox, Ping)| {
//!             send(reply_to, Pong(ping.0)).unwrap();
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| {
//!         let ponger = coop.add_agent(Ponger);
//!         coop.add_agent(Pinger { ponger });
//!     }).unwrap();
//! }).unwrap();
//! ```
//!
//! ## Overview
//!
//! - Messages: any `T: Send + Sync + 'static` is an immutable message shared by all its
//!   receivers; [`Mutable<T>`] names a message that exactly one receiver takes by move;
//!   zero-sized types are signals. See [`Message`].
//! - [`Mbox`]: multi-consumer ([`Environment::create_mbox`], [`Environment::named_mbox`],
//!   [`Environment::introduce_named_mbox`] in namespaces), an agent's own direct mbox,
//!   unique-subscribers, and custom ones through [`MboxImpl`]. Mboxes deliver to [`Sink`]s:
//!   agents, other mboxes and mchains bound with [`SingleSinkBinding`] /
//!   [`MultiSinkBinding`], or a [`MessageSink`] of your own.
//! - [`Agent`] with its [`Context`]: subscriptions per (mbox, type, [`State`]), delivery
//!   filters, nested states with history, `on_enter`/`on_exit`, `transfer_to_state`,
//!   `suppress`, `just_switch_to`, dead-letter handlers, [`Context::deactivate_agent`].
//! - [`Coop`]: agents registered atomically, parent/child, deregistration reasons and
//!   notifications, [`Priority`].
//! - [`Environment`]: launch, stop, autoshutdown, stop guards, [`WrappedEnv`].
//! - [`ExceptionReaction`]: what a panicking handler leads to.
//! - [`dispatcher`]: where agents run — [`dispatcher::one_thread`] (the default),
//!   [`dispatcher::active_obj`], [`dispatcher::active_group`], [`dispatcher::thread_pool`],
//!   [`dispatcher::adv_thread_pool`] (with [`ThreadSafeContext`] handlers running in
//!   parallel), [`dispatcher::strictly_ordered`], [`dispatcher::quoted_round_robin`],
//!   [`dispatcher::one_per_prio`]; binders take [`BindParams`].
//! - Timers: [`send_delayed`], [`send_periodic`] returning a [`TimerHandle`]; cancelling
//!   revokes queued copies; state time limits with [`Context::time_limit`].
//! - [`limits`]: per-agent, per-type message limits ([`Context::limit_then_drop`] and the
//!   other `limit_then_*`).
//! - [`mchain`]: message chains with [`mchain::receive`] and [`mchain::select`];
//!   [`request`]: blocking [`request::request_reply`], answered now, later (a
//!   [`request::ReplyHandle`]) or by another agent ([`request::Request::forward`]).
//! - [`Envelope`]: messages that decide when they may be seen.
//! - [`trace`]: message delivery tracing, a run-time option of the environment.
//! - [`stats`]: run-time monitoring through [`StatsController`], off by default;
//!   [`Environment::drop_counts`] counts dropped messages by reason, always.
//! - [`actors`]: YDB's actor model on top — [`ActorId`] (bit-compatible with YDB's),
//!   [`actors::Actor`]s with state functions, an [`actors::ActorSystem`] per node with pools
//!   (one dispatcher each), local services, YDB's non-delivery rules and dead letters.
//! - [`interconnect`]: the actor systems of several nodes (processes or machines) as one:
//!   events to an [`ActorId`] of another node travel over TCP, YDB-framed.
//! - [`harmonizer`]: YDB's harmonizer — threads that move between elastic thread pools
//!   (and an actor system's pools) by measured load, within a CPU budget.
//!
//! The rules each part follows (protocols, orders, what happens on errors) are in the
//! module docs: [`agent`], [`coop`], [`environment`], [`exception`], [`mbox`], [`message`],
//! [`timer`], [`dispatcher`], [`limits`], [`mchain`], [`trace`].
//!
//! ## Guarantees
//!
//! 1. An agent's handlers never run concurrently with each other (except thread-safe
//!    handlers on `adv_thread_pool`).
//! 2. Messages from one sender to one receiver through one mbox are handled in send order.
//! 3. `on_start` is an agent's first demand and `on_finish` its last.
//! 4. A panic in agent code never kills a worker thread: the exception reaction decides.
//!
//! ## Cargo features
//!
//! - `interconnect` (on by default): [`interconnect`], YDB's interconnect between nodes:
//!   an [`interconnect::Interconnect`] per [`actors::ActorSystem`] sends events to actors
//!   on other nodes over TCP sessions that resume after a broken connection with nothing
//!   lost or repeated, framed byte for byte as YDB frames them ([`interconnect::wire`]).
//!   It adds `crc32c`, `prost`, `postcard` (the default event codec), `hmac`, `sha2` and
//!   `getrandom` (the handshake's shared-secret proof); build with
//!   `default-features = false` to keep the core's small dependency set.
//! - `tls` (off by default; implies `interconnect`): TLS on the interconnect's connections
//!   as YDB runs it (`InterconnectSetup::tls`, `TlsSetup`, `EncryptionMode`: YDB's
//!   OPTIONAL / REQUIRED / DISABLED rules, certificates and the cluster's CA from PEM
//!   files). It adds `rustls` (with the `ring` provider, which a C compiler builds) and
//!   `rustls-webpki`. Without it a node runs YDB's DISABLED mode: a peer that requires TLS
//!   is refused.
//! - `criterion-benches`, `tls-tests` (off; for this crate's own benches and TLS tests):
//!   they build criterion and rcgen, which cargo would otherwise build before every example
//!   as dev-dependencies.
//!
//! New to agentbox? [`guide`] has a page for readers coming from SObjectizer, YDB and actix.
//! Working on agentbox itself? [`guide::architecture`] maps its layers and says where a new
//! piece goes.
//! - `tokio` (off by default): `agentbox::tokio_interop`, the bridge with async
//!   code on tokio. Async code asks agents without blocking a runtime thread
//!   (`tokio_interop::request_reply`, a future with a timeout), reads mchains as a future
//!   and a `Stream` (`MChain::recv_async`, `MChain::stream`), awaits the environment's
//!   end (`Environment::finished`) and asks YDB-style actors (`tokio_interop::ask`);
//!   agents and actors run futures on a tokio runtime handle and get their outputs as
//!   messages (`AgentAsyncExt::spawn_future`, `ActorAsyncExt::spawn_future`), cancelled
//!   when the agent's coop or the actor is gone. It adds `tokio` (`rt`, `sync`, `time`)
//!   and `futures-core` (the `Stream` trait); without it the core has no async code.

//! - `monitor` (off by default): `agentbox::monitor`, a live introspection page of a running
//!   environment (HTML and JSON over HTTP on a loopback address, no authentication):
//!   coops and agents with their states, dispatchers, YDB actor systems and interconnect
//!   sessions, and a chart of the last minute. It adds `serde_json`; the
//!   figures it reads come from [`Environment::introspect`], which is always there.

// `unsafe` lives in two modules, each allowing it for itself: the message's thin node
// (`message::node`) and the demand (`dispatcher::demand`); their tests run under miri.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod actors;
pub mod agent;
pub mod bridge;
#[doc(hidden)]
pub mod compile_checks;
pub mod coop;
pub mod dispatcher;
mod drops;
pub mod environment;
pub mod exception;
pub mod guide;
pub mod harmonizer;
#[cfg(feature = "interconnect")]
pub mod interconnect;
pub mod limits;
pub mod mbox;
pub mod mchain;
pub mod message;
#[cfg(feature = "monitor")]
pub mod monitor;
pub mod prelude;
pub mod request;
mod small_map;
pub mod stats;
mod sync;
#[cfg(test)]
mod test_support;
pub mod timer;
#[cfg(feature = "tokio")]
pub mod tokio_interop;
pub mod trace;

pub use actors::ActorId;
pub use agent::{
    Agent, AgentId, AgentNameError, AgentRef, Context, DefineError, History, Priority, State,
    StateError, SubscriptionBuilder, ThreadSafeContext, MAX_STATE_NESTING,
};
pub use coop::{Coop, CoopDeregistered, CoopHandle, CoopRegistered, DeregReason, RegisterError};
pub use dispatcher::{BindParams, Binder, DispatcherHandle, Fifo};
pub use drops::DropCounts;
pub use environment::{
    EnvParams, Environment, LaunchError, StopGuard, StopGuardError, WeakEnv, WrappedEnv,
};
pub use exception::ExceptionReaction;
pub use mbox::{
    send, send_mutable, DeliveryFilter, DeliveryMode, Mbox, MboxId, MboxImpl, MboxKind,
    MessageSink, MultiSinkBinding, NamedMboxError, RawMbox, SendError, SingleSinkBinding, Sink,
    SubscribeError,
};
pub use message::{
    Access, Envelope, Message, MessageType, Mutable, RedirectionDepth, MAX_REDIRECTION_DEPTH,
};
pub use stats::{Quantity, StatsController, StatsFinished, StatsStarted};
pub use timer::{
    schedule_message, send_delayed, send_delayed_mutable, send_periodic, TimerError, TimerHandle,
};
