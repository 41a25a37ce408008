//! The names almost every agentbox program uses: `use agentbox::prelude::*;`.
//!
//! Besides the agent, coop, mbox and environment types, it holds what first programs
//! reach for next: [`History`] (states that remember their last substate),
//! [`BindParams`] and [`Fifo`] (binding agents to thread pools), and [`request_reply`]
//! (a blocking request to an agent). None of these names is used by
//! [`actors`](crate::actors) or [`interconnect`](crate::interconnect), so
//! `use agentbox::actors::*;` beside the prelude does not clash.
//!
//! # Examples
//!
//! ```
//! use agentbox::prelude::*;
//! use agentbox::request::Request;
//! use std::time::Duration;
//!
//! struct Doubler;
//! impl Agent for Doubler {
//!     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
//!         ctx.subscribe_self().event(|_: &mut Self, _, r: &Request<u32, u32>| {
//!             r.reply(2 * r.get()).unwrap();
//!         })?;
//!         Ok(())
//!     }
//! }
//!
//! Environment::launch(|env| {
//!     let mut doubler = None;
//!     env.introduce_coop(|coop| doubler = Some(coop.add_agent(Doubler))).unwrap();
//!     let answer = request_reply::<u32, u32>(&doubler.unwrap(), Duration::from_secs(30), 21);
//!     assert_eq!(answer, Ok(42));
//!     env.stop();
//! })
//! .unwrap();
//! ```

pub use crate::request::request_reply;
pub use crate::{
    send, send_mutable, Agent, BindParams, Context, Coop, CoopHandle, DefineError, DeregReason,
    Environment, ExceptionReaction, Fifo, History, Mbox, MboxKind, Mutable, Priority, State,
};
pub use crate::{send_delayed, send_periodic, TimerHandle};
