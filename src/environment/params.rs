//! Environment parameters.

use std::fmt;
use std::sync::Arc;

use crate::exception::ExceptionReaction;
use crate::trace::{TraceFilter, Tracer};

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
    pub(crate) tracer: Option<Arc<dyn Tracer>>,
    pub(crate) trace_filter: Option<TraceFilter>,
}

impl Default for EnvParams {
    fn default() -> Self {
        EnvParams {
            autoshutdown: true,
            exception_reaction: ExceptionReaction::Abort,
            error_logger: None,
            tracer: None,
            trace_filter: None,
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

    /// Turns message delivery tracing on, with `tracer` receiving the records (see
    /// [`crate::trace`]). Off by default, and then it costs nothing on the message path.
    pub fn message_tracer(mut self, tracer: Arc<dyn Tracer>) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// The initial trace filter (default: every record passes); see
    /// [`Environment::change_trace_filter`](crate::Environment::change_trace_filter).
    pub fn trace_filter(mut self, filter: TraceFilter) -> Self {
        self.trace_filter = Some(filter);
        self
    }
}

impl fmt::Debug for EnvParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvParams")
            .field("autoshutdown", &self.autoshutdown)
            .field("exception_reaction", &self.exception_reaction)
            .field("tracing", &self.tracer.is_some())
            .finish()
    }
}
