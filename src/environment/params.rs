//! Environment parameters.

use std::fmt;
use std::sync::Arc;

use crate::exception::ExceptionReaction;

pub(crate) type ErrorLogger = Arc<dyn Fn(&str) + Send + Sync>;

/// Parameters of an environment, given to [`Environment::launch_with`](crate::Environment::launch_with).
///
/// # Examples
///
/// ```
/// use agentbox::prelude::*;
/// use agentbox::EnvParams;
///
/// let params = EnvParams::new()
///     .exception_reaction(ExceptionReaction::ShutdownEnvironment)
///     .error_logger(|line| eprintln!("[agentbox] {line}"));
/// Environment::launch_with(params, |_env| {}).unwrap();
/// ```
#[derive(Clone)]
pub struct EnvParams {
    pub(crate) autoshutdown: bool,
    pub(crate) exception_reaction: ExceptionReaction,
    pub(crate) error_logger: Option<ErrorLogger>,
}

impl Default for EnvParams {
    fn default() -> Self {
        EnvParams {
            autoshutdown: true,
            exception_reaction: ExceptionReaction::Abort,
            error_logger: None,
        }
    }
}

impl EnvParams {
    /// The defaults: autoshutdown on, exception reaction `Abort`, errors logged to stderr.
    pub fn new() -> Self {
        EnvParams::default()
    }

    /// Keeps the environment running when its last coop is gone, until
    /// [`stop`](crate::Environment::stop) (default: it stops by itself).
    pub fn disable_autoshutdown(mut self) -> Self {
        self.autoshutdown = false;
        self
    }

    /// The reaction for agents and coops that inherit theirs (default
    /// [`ExceptionReaction::Abort`]; [`ExceptionReaction::Inherit`] here means `Abort`).
    pub fn exception_reaction(mut self, reaction: ExceptionReaction) -> Self {
        self.exception_reaction = reaction;
        self
    }

    /// Where the environment reports agent failures and dropped work (default: stderr).
    pub fn error_logger<F: Fn(&str) + Send + Sync + 'static>(mut self, logger: F) -> Self {
        self.error_logger = Some(Arc::new(logger));
        self
    }
}

impl fmt::Debug for EnvParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvParams")
            .field("autoshutdown", &self.autoshutdown)
            .field("exception_reaction", &self.exception_reaction)
            .finish()
    }
}
