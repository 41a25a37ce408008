//! Stop guards: let parts of an application finish their work before the environment stops.

use thiserror::Error;

/// Something that must be told about a stop and finish first.
///
/// Installed with [`Environment::setup_stop_guard`](crate::Environment::setup_stop_guard);
/// when [`stop`](crate::Environment::stop) is called, every guard's `stop` is called once,
/// and the environment really stops only after each guard has been removed with
/// [`Environment::remove_stop_guard`](crate::Environment::remove_stop_guard).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use agentbox::prelude::*;
/// use agentbox::{EnvParams, StopGuard};
///
/// struct Flush(Environment);
/// impl StopGuard for Flush {
///     fn stop(&self) {
///         // Finish pending work, then let the stop go on.
///         println!("flushing before stop");
///     }
/// }
///
/// Environment::launch_with(EnvParams::new().disable_autoshutdown(), |env| {
///     let guard: Arc<dyn StopGuard> = Arc::new(Flush(env.clone()));
///     env.setup_stop_guard(guard.clone()).unwrap();
///     env.stop(); // only notifies the guard
///     assert!(!env.is_shutting_down());
///     env.remove_stop_guard(&guard); // now the environment stops
///     assert!(env.is_shutting_down());
/// }).unwrap();
/// ```
pub trait StopGuard: Send + Sync {
    /// A stop was requested; remove the guard when ready.
    fn stop(&self);
}

/// Why a stop guard could not be installed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StopGuardError {
    /// A stop has already been requested.
    #[error("a stop of the environment is already in progress")]
    StopInProgress,
}
