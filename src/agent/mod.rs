//! Agents: user structs that react to messages, one demand at a time.
//!
//! # Rules
//!
//! 1. An agent's handlers never run concurrently (except thread-safe handlers on
//!    `adv_thread_pool`); `on_start` is its first demand and `on_finish` its last.
//! 2. Subscriptions are per (mbox, message type, state). A message is looked up in the
//!    current state, then in its parents, then in the dead-letter handlers; with no
//!    handler it is dropped.
//! 3. [`Context::change_state`] takes effect when the running handler returns: `on_exit`
//!    hooks from the old leaf up to the common ancestor, then `on_enter` hooks down to the
//!    new leaf. After `on_finish` the agent returns to its default state the same way
//!    (`on_exit` hooks up the path, then the default state's `on_enter`), unless its coop
//!    went because of a panic or the agent was deactivated.
//! 4. A panic in agent code (a handler, a hook, `on_start`, `on_finish`, one of its
//!    delivery filters) goes to its [`ExceptionReaction`].
//! 5. [`Context::deactivate_agent`] drops every subscription and parks the agent in a
//!    state with no handlers until its coop is deregistered.

mod cell;
mod context;
pub(crate) mod core;
pub(crate) mod exec;
mod failure;
mod fast_types;
pub(crate) mod id;
mod in_mbox;
pub(crate) mod name;
#[cfg(feature = "monitor")]
pub(crate) mod shown;
mod state;
mod subscribe;
mod subscription;

use std::sync::Arc;

use thiserror::Error;

pub use self::core::AgentRef;
pub(crate) use self::core::{activate, AgentArc, AgentCore, ExecBox};
pub use context::{Context, ThreadSafeContext};
pub(crate) use failure::{react, Failure};
pub use id::{AgentId, Priority};
pub use name::AgentNameError;
pub(crate) use name::AgentNames;
pub use state::{History, State, StateError, MAX_STATE_NESTING};
pub use subscribe::SubscriptionBuilder;

use crate::environment::Environment;
use crate::exception::ExceptionReaction;
use crate::mbox::{MboxId, SubscribeError};

/// An agent: a struct that owns its data and reacts to messages.
///
/// Implement the hooks you need. [`define`](Self::define) runs once at registration, on the
/// registering thread, before the agent is bound; subscriptions made there are live at once
/// (messages that arrive before `on_start` wait and are handled after it).
/// [`on_start`](Self::on_start) is always the first demand the agent handles and
/// [`on_finish`](Self::on_finish) the last. Handlers of one agent never run concurrently.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
///
/// struct Greeting(String);
///
/// struct Greeter { count: u32 }
///
/// impl Agent for Greeter {
///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
///         ctx.subscribe_self().event(Self::on_greeting)?;
///         Ok(())
///     }
///     fn on_start(&mut self, ctx: &mut Context<Self>) {
///         send(&ctx.direct_mbox(), Greeting("hello".into())).unwrap();
///     }
/// }
///
/// impl Greeter {
///     fn on_greeting(&mut self, ctx: &mut Context<Self>, msg: &Greeting) {
///         self.count += 1;
///         assert_eq!(msg.0, "hello");
///         ctx.deregister_coop(DeregReason::Normal);
///     }
/// }
///
/// Environment::launch(|env| {
///     env.introduce_coop(|coop| { coop.add_agent(Greeter { count: 0 }); }).unwrap();
/// }).unwrap();
/// ```
pub trait Agent: Send + Sized + 'static {
    /// Declares subscriptions, filters, state hooks and the initial state.
    ///
    /// # Errors
    ///
    /// An error fails the coop's registration with
    /// [`RegisterError::Define`](crate::RegisterError::Define).
    fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
        let _ = ctx;
        Ok(())
    }

    /// The first demand the agent handles.
    fn on_start(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// The last demand the agent handles, when its coop deregisters.
    fn on_finish(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// The agent's priority, read once at creation (default [`Priority::P0`]).
    fn priority(&self) -> Priority {
        Priority::P0
    }

    /// The reaction to a panic in this agent, read once at creation (default
    /// [`ExceptionReaction::Inherit`]: the coop's).
    fn exception_reaction(&self) -> ExceptionReaction {
        ExceptionReaction::Inherit
    }
}

/// Why an agent's [`define`](Agent::define) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DefineError {
    /// A subscription or filter could not be made.
    #[error(transparent)]
    Subscribe(#[from] SubscribeError),
    /// A state could not be built or entered.
    #[error(transparent)]
    State(#[from] StateError),
    /// A message limit could not be declared.
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    /// The agent's own reason.
    #[error("{0}")]
    Custom(String),
}

/// Creates an agent whose thread-safe handlers may run in parallel (`adv_thread_pool`).
pub(crate) fn create_thread_safe<A: Agent + Sync>(
    agent: A,
    env: &Environment,
) -> (AgentArc, ExecBox) {
    let id = AgentId(MboxId::next().0);
    let core = self::core::AgentCore::new(
        id,
        agent.priority(),
        agent.exception_reaction(),
        env,
        std::any::type_name::<A>,
    );
    AgentArc::new(core, |this| {
        let inner = exec::Inner::new(agent, Context::new(this, id, env.clone()));
        exec::ThreadSafeExec(Arc::new(parking_lot::RwLock::new(inner)))
    })
}

/// Creates an agent: its shared core and its executor, in one block, not yet defined or
/// bound.
pub(crate) fn create<A: Agent>(agent: A, env: &Environment) -> (AgentArc, ExecBox) {
    let id = AgentId(MboxId::next().0);
    let core = self::core::AgentCore::new(
        id,
        agent.priority(),
        agent.exception_reaction(),
        env,
        std::any::type_name::<A>,
    );
    AgentArc::new(core, |this| {
        exec::Inner::new(agent, Context::new(this, id, env.clone()))
    })
}

/// Spawning is bound by memory (the peerbench spawn workload takes ~0.6 ns per byte of an
/// agent: page faults and the worker's allocator growing its heap page by page), so the
/// per-agent structures have a budget, checked here on 64-bit targets.
#[cfg(all(test, target_pointer_width = "64"))]
mod size_budget {
    use std::mem::size_of;

    struct Empty;
    impl super::Agent for Empty {}

    #[test]
    fn the_per_agent_structures_stay_within_their_byte_budget() {
        type Block = super::cell::Block<super::core::AgentCore, super::exec::Inner<Empty>>;
        eprintln!(
            "core {} context {} inner {} block {} coop {}",
            size_of::<super::core::AgentCore>(),
            size_of::<super::Context<Empty>>(),
            size_of::<super::exec::Inner<Empty>>(),
            size_of::<Block>(),
            size_of::<crate::coop::CoopInner>()
        );
        // Feature `monitor` adds the agent's type name and current state (24 bytes).
        let monitor = if cfg!(feature = "monitor") { 24 } else { 0 };
        assert!(size_of::<super::core::AgentCore>() <= 232 + monitor);
        assert!(size_of::<super::Context<Empty>>() <= 216);
        assert!(size_of::<super::exec::Inner<Empty>>() <= 248);
        // The agent's one allocation (with the `Arc`'s two counts): core and executor
        // were 248 + 16 and 240 bytes in two allocations.
        assert!(size_of::<Block>() + 16 <= 512 + monitor);
        assert!(size_of::<super::context::States>() <= 24);
        // 104: with `Arc`'s counts a 128-byte malloc chunk (freed to a fast bin), moved
        // without a `memcpy` call.
        assert!(size_of::<crate::coop::CoopInner>() <= 104);
        // 96: moved into registration without a `memcpy` call (see `Coop::notify`).
        assert!(size_of::<crate::coop::Coop>() <= 96);
    }
}
