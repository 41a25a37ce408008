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
    pub(crate) log_drops: bool,
}

impl Default for EnvParams {
    fn default() -> Self {
        EnvParams {
            autoshutdown: true,
            exception_reaction: ExceptionReaction::Abort,
            error_logger: None,
            tracer: None,
            trace_filter: None,
            log_drops: cfg!(debug_assertions),
        }
    }
}

impl EnvParams {
    /// The defaults: autoshutdown on, exception reaction `Abort`, errors logged to stderr,
    /// drops logged in debug builds only ([`log_drops`](Self::log_drops)).
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

    /// Whether a message an agent drops is logged through the
    /// [error logger](Self::error_logger): the first drop of each (reason, agent type,
    /// message type), with the agent, its state and what to do about it. Later drops of the
    /// same kind are only counted ([`Environment::drop_counts`](crate::Environment::drop_counts)).
    ///
    /// On by default in debug builds (`cfg!(debug_assertions)`), off in release builds.
    /// It costs nothing where messages are handled: only a drop looks at it (and then
    /// takes a lock, once per dropped message).
    ///
    /// Logged today: a message with no handler in the agent's current state (nor in its
    /// parents, nor a dead-letter handler) — typically one subscribed in the default state
    /// while the agent lives in states of its own, where the default state's subscriptions
    /// are not seen.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use agentbox::prelude::*;
    /// use agentbox::EnvParams;
    ///
    /// struct Hello;
    /// struct Done;
    /// struct Greeter { busy: State }
    /// impl Agent for Greeter {
    ///     fn define(&mut self, ctx: &mut Context<Self>) -> Result<(), DefineError> {
    ///         // Subscribed in the default state ...
    ///         ctx.subscribe_self().event(|_: &mut Self, _, _: &Hello| {})?;
    ///         ctx.subscribe_self().in_state(&self.busy).event(|_: &mut Self, ctx, _: &Done| {
    ///             ctx.deregister_coop(DeregReason::Normal);
    ///         })?;
    ///         // ... but the agent lives in a state of its own, which does not see it.
    ///         ctx.change_state(&self.busy).unwrap();
    ///         Ok(())
    ///     }
    ///     fn on_start(&mut self, ctx: &mut Context<Self>) {
    ///         send(&ctx.direct_mbox(), Hello).unwrap();
    ///         send(&ctx.direct_mbox(), Done).unwrap();
    ///     }
    /// }
    ///
    /// let lines = Arc::new(Mutex::new(Vec::new()));
    /// let log = lines.clone();
    /// let params = EnvParams::new()
    ///     .log_drops(true)
    ///     .error_logger(move |line| log.lock().unwrap().push(line.to_owned()));
    /// Environment::launch_with(params, |env| {
    ///     env.introduce_coop(|coop| {
    ///         coop.add_agent(Greeter { busy: State::new("busy") });
    ///     })
    ///     .unwrap();
    /// })
    /// .unwrap();
    /// let lines = lines.lock().unwrap();
    /// assert_eq!(lines.len(), 1); // two drops, one line
    /// assert!(lines[0].contains("no handler") && lines[0].contains("Hello"));
    /// ```
    pub fn log_drops(mut self, on: bool) -> Self {
        self.log_drops = on;
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
            .field("log_drops", &self.log_drops)
            .finish()
    }
}
