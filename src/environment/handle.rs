//! The environment's handles, [`Environment`] and [`WeakEnv`], below every layer that holds
//! one: mboxes, agents, coops and timers hold them without naming the environment's
//! module. The state behind them ([`EnvSide::Inner`]) is set by `environment`, and what a
//! lower layer needs of it goes through [`EnvSide`]; every other method is the
//! environment's own (`environment/mod.rs` and its siblings).

use std::sync::{Arc, Weak};

use crate::drops::DropCounters;

/// The marker the environment's [`EnvSide`] is implemented for, once (`environment/mod.rs`).
pub(crate) struct EnvLayer;

/// What the layers below the environment need of it.
pub(crate) trait EnvSide {
    /// The environment's shared state.
    type Inner: Send + Sync + 'static;
    /// The environment's drop counters.
    fn drops(inner: &Self::Inner) -> &Arc<DropCounters>;
    /// Logs an error line with the environment's logger (stderr by default).
    fn log_error(inner: &Self::Inner, line: &str);
}

/// The environment's shared state, as the layers below name it.
pub(crate) type EnvInner = <EnvLayer as EnvSide>::Inner;

/// A handle to an environment; cheap to clone.
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
///
/// struct Hello;
/// impl Agent for Hello {
///     fn on_start(&mut self, ctx: &mut Context<Self>) {
///         println!("hello from agent {}", ctx.agent_id());
///         ctx.deregister_coop(DeregReason::Normal);
///     }
/// }
///
/// // Returns once the last coop is gone (autoshutdown).
/// Environment::launch(|env| {
///     env.introduce_coop(|coop| { coop.add_agent(Hello); }).unwrap();
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Environment(pub(crate) Arc<EnvInner>);

/// A weak handle to an environment, held by mboxes, agents and coops (and custom mboxes)
/// so that they never keep an environment alive.
#[derive(Clone)]
pub struct WeakEnv(pub(crate) Weak<EnvInner>);

impl WeakEnv {
    /// The environment, while it exists.
    pub fn upgrade(&self) -> Option<Environment> {
        self.0.upgrade().map(Environment)
    }
}

impl std::fmt::Debug for WeakEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakEnv")
    }
}
