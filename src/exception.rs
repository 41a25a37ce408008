//! What happens when an agent's handler panics (or fails with an error).
//!
//! The panic is caught at the dispatcher boundary, around every demand (`on_start`,
//! handlers, state hooks, `on_finish`), and the agent's exception reaction decides. The
//! reaction is looked up agent → coop → parent coop → … → environment; the first one that
//! is not [`ExceptionReaction::Inherit`] wins. The environment's default is
//! [`ExceptionReaction::Abort`], as in SObjectizer: a panic nobody planned for is a bug.
//!
//! A `Drop` is user code too, and its panic is caught on the worker the same way:
//!
//! - in the agent's own `Drop` (its value, its context and the handlers' captures, dropped
//!   on its worker right after `on_finish`): the agent's reaction decides, with
//!   "its Drop" in the logged line; the agent is finished all the same;
//! - in a message payload's `Drop`, when the worker lets go of a message a handler of the
//!   agent ran: the agent's reaction decides;
//! - in a payload's `Drop` when the worker drops a message no agent will run (its receiver
//!   had finished, or the worker stopped): the environment's error logger gets the panic.
//!
//! Either way the worker keeps serving its other agents. A payload dropped on a sender's
//! thread (a refused message) panics there, in the sender.

use std::any::Any;

/// The reaction to a panic in an agent's code.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
///
/// struct Fragile;
/// impl Agent for Fragile {
///     fn on_start(&mut self, _ctx: &mut Context<Self>) {
///         panic!("boom");
///     }
///     fn exception_reaction(&self) -> ExceptionReaction {
///         // The coop goes (with reason Panic); the environment then shuts down by itself.
///         ExceptionReaction::DeregisterCoop
///     }
/// }
///
/// Environment::launch(|env| {
///     env.introduce_coop(|coop| { coop.add_agent(Fragile); }).unwrap();
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExceptionReaction {
    /// Abort the whole process (`std::process::abort`) after logging.
    Abort,
    /// Stop the environment: every coop is deregistered with reason shutdown.
    ShutdownEnvironment,
    /// Deregister the agent's coop with [`DeregReason::Panic`](crate::DeregReason::Panic).
    DeregisterCoop,
    /// Log and go on with the next demand.
    Ignore,
    /// Use the reaction of the next level up (coop, parent coop, environment).
    #[default]
    Inherit,
}

pub(crate) fn panic_message(payload: &Box<dyn Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
