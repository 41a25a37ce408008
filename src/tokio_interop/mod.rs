//! The bridge between agentbox and async code on tokio (feature `tokio`).
//!
//! Most Rust services run on tokio. Without this module, a tokio task that asks an agent
//! with [`crate::request::request_reply`] blocks its worker thread. With it, both ways
//! work without blocking:
//!
//! - **From async code:** [`request_reply`] returns a future of the reply (with its
//!   timeout); [`MChain::recv_async`](crate::mchain::MChain::recv_async) and
//!   [`MChain::stream`](crate::mchain::MChain::stream) read an mchain as a future and as
//!   a [`Stream`](futures_core::Stream); [`Environment::finished`](crate::Environment::finished)
//!   resolves when the environment has finished; [`ask`] asks a YDB-style actor.
//! - **From an agent:** [`AgentAsyncExt::spawn_future`] runs a future on a tokio runtime
//!   handle and delivers its output as a message to the agent's direct mbox; the
//!   agent's handlers stay synchronous, its states decide what the message does, and the
//!   future is cancelled when the agent's coop deregisters.
//! - **From an actor:** [`ActorAsyncExt::spawn_future`] does the same for an actor: the
//!   output comes as an event to it, and the future is cancelled once it passes away.
//!
//! The core pays nothing for this when the feature is off, and nothing on the message
//! path when it is on: a request from async code carries a oneshot sender where a
//! blocking one carries a channel; an mchain keeps async readers in the list `select`
//! already uses (a send checks only whether it is empty); the environment keeps a list
//! of hooks run once at its end.
//!
//! # Examples
//!
//! An async task asks an agent while a timer task keeps running on the same
//! single-threaded runtime:
//!
//! ```
//! use std::time::Duration;
//! use agentbox::prelude::*;
//! use agentbox::request::Request;
//! use agentbox::tokio_interop::request_reply;
//!
//! struct Adder;
//! impl Agent for Adder {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|_: &mut Self, _, r: &Request<(u32, u32), u32>| {
//!             let (a, b) = *r.get();
//!             r.reply(a + b).unwrap();
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! let wrapped = agentbox::WrappedEnv::new(|_| {}).unwrap();
//! let adder = wrapped.environment().introduce_coop(|c| c.add_agent(Adder)).unwrap();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! rt.block_on(async {
//!     let ticker = tokio::spawn(async {
//!         for _ in 0..3 {
//!             tokio::time::sleep(Duration::from_millis(1)).await;
//!         }
//!     });
//!     let sum = request_reply::<(u32, u32), u32>(&adder, Duration::from_secs(30), (2, 3));
//!     assert_eq!(sum.await, Ok(5));
//!     ticker.await.unwrap();
//! });
//! wrapped.stop_then_join().unwrap();
//! ```

mod actors;
mod agent;
mod env;
mod handle;
mod mchain;
mod request;

pub use actors::{ask, ActorAsyncExt, AskError, AskFuture, LIVENESS_CHECK};
pub use agent::{AgentAsyncExt, SpawnFutureError};
pub use env::EnvFinished;
pub use handle::FutureHandle;
pub use mchain::{MChainStream, Recv};
pub use request::{request_reply, ReplyFuture};
