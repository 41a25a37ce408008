//! Message delivery tracing: a record at each step a message goes through.
//!
//! Tracing is a run-time option of the environment ([`EnvParams::message_tracer`]), not a
//! compile-time one. With no tracer the message path tests one field that is `None` and
//! builds nothing. With a tracer, each step builds a [`TraceRecord`], runs it through the
//! current [`TraceFilter`] (replaceable while running with
//! [`Environment::change_trace_filter`]) and hands it to the [`Tracer`] on the thread where
//! the step happens.
//!
//! | step | [`TraceEvent`] | where |
//! |---|---|---|
//! | queued for an agent | `Delivered` | sender's thread |
//! | no subscriber for the type | `NoSubscribers` | sender's thread |
//! | refused by a delivery filter | `RejectedByFilter` | sender's thread |
//! | over the agent's message limit | `OverLimit(action)` | sender's thread |
//! | revealed nothing (an envelope said no) | `Hidden` | either |
//! | no handler in the current state | `NoHandler` | agent's worker |
//! | queued, but the agent is deregistering | `DroppedAtDeregistration` | agent's worker |
//! | the agent had finished (`on_finish` ran) | `DroppedReceiverFinished` | sender's thread, agent's worker, or a stopped worker's last owner |
//! | handler found and about to be called | `HandlerCalled` | agent's worker |
//! | state left / entered | `StateLeft` / `StateEntered` | agent's worker |
//!
//! [`EnvParams::message_tracer`]: crate::EnvParams::message_tracer
//! [`Environment::change_trace_filter`]: crate::Environment::change_trace_filter
//!
//! # Examples
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use agentbox::prelude::*;
//! use agentbox::trace::{TraceEvent, TraceFilter, TraceRecord, Tracer};
//! use agentbox::EnvParams;
//!
//! struct Collect(Mutex<Vec<TraceEvent>>);
//! impl Tracer for Collect {
//!     fn trace(&self, record: &TraceRecord<'_>) {
//!         self.0.lock().unwrap().push(record.event);
//!     }
//! }
//!
//! let seen = Arc::new(Collect(Mutex::new(Vec::new())));
//! let params = EnvParams::new()
//!     .message_tracer(seen.clone())
//!     .trace_filter(TraceFilter::new(|r| r.msg_type.is_some_and(|t| t.name() == "u8")));
//! Environment::launch_with(params, |env| {
//!     let mbox = env.create_mbox();
//!     send(&mbox, 1u8).unwrap();     // traced: nobody subscribes
//!     send(&mbox, 1u16).unwrap();    // filtered out
//! }).unwrap();
//! assert_eq!(*seen.0.lock().unwrap(), vec![TraceEvent::NoSubscribers]);
//! ```

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::agent::id::AgentId;
use crate::mbox::id::MboxId;
use crate::message::MessageType;

/// What a message limit did with a message over the limit.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LimitAction {
    /// Dropped.
    Drop,
    /// The process is aborted.
    Abort,
    /// Sent on to another mbox.
    Redirect,
    /// Transformed into another message, sent to another mbox.
    Transform,
}

/// One step of a message's way.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum TraceEvent {
    /// Queued for an agent.
    Delivered,
    /// Sent to an mbox where nobody subscribes to its type.
    NoSubscribers,
    /// A delivery filter refused it for one subscriber.
    RejectedByFilter,
    /// The agent's limit for its type was reached; what happened instead.
    OverLimit(LimitAction),
    /// Its envelope did not reveal the payload (revoked, expired, cancelled timer).
    Hidden,
    /// The agent has no handler for it in its current state (nor a dead-letter handler).
    NoHandler,
    /// It was queued but the agent is deregistering: dropped.
    DroppedAtDeregistration,
    /// Sent or queued for an agent that had finished (its `on_finish` ran): dropped.
    DroppedReceiverFinished,
    /// A handler was found and is called.
    HandlerCalled,
    /// The agent left a state.
    StateLeft,
    /// The agent entered a state.
    StateEntered,
}

/// One trace record. Fields that do not apply to the event are `None`.
#[derive(Clone, Copy, Debug)]
pub struct TraceRecord<'a> {
    /// What happened.
    pub event: TraceEvent,
    /// The agent concerned.
    pub agent: Option<AgentId>,
    /// The agent's name, if it has one (`Context::set_name`), from its environment; shown
    /// by the record's `Display` and by [`TracingTracer`] as `agent_name`.
    pub agent_name: Option<&'a str>,
    /// The mbox the message came through.
    pub mbox: Option<MboxId>,
    /// The message's type.
    pub msg_type: Option<MessageType>,
    /// The state's name, for state events and handler lookups.
    pub state: Option<&'a str>,
}

impl<'a> TraceRecord<'a> {
    pub(crate) fn new(event: TraceEvent) -> Self {
        TraceRecord {
            event,
            agent: None,
            agent_name: None,
            mbox: None,
            msg_type: None,
            state: None,
        }
    }
    pub(crate) fn agent(mut self, id: AgentId) -> Self {
        self.agent = Some(id);
        self
    }
    pub(crate) fn mbox(mut self, id: MboxId) -> Self {
        self.mbox = Some(id);
        self
    }
    pub(crate) fn msg(mut self, ty: MessageType) -> Self {
        self.msg_type = Some(ty);
        self
    }
    pub(crate) fn state(mut self, name: &'a str) -> Self {
        self.state = Some(name);
        self
    }
}

impl fmt::Display for TraceRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.event)?;
        if let Some(a) = self.agent {
            write!(f, " {a}")?;
            if let Some(name) = self.agent_name {
                write!(f, " ({name})")?;
            }
        }
        if let Some(m) = self.mbox {
            write!(f, " {m}")?;
        }
        if let Some(t) = self.msg_type {
            write!(f, " msg={}", t.name())?;
        }
        if let Some(s) = self.state {
            write!(f, " state={s}")?;
        }
        Ok(())
    }
}

/// Receives trace records; called on whatever thread the step happens on.
pub trait Tracer: Send + Sync + 'static {
    /// One record that passed the filter.
    fn trace(&self, record: &TraceRecord<'_>);
}

/// Keeps or drops trace records before they reach the tracer.
#[derive(Clone)]
pub struct TraceFilter(Arc<dyn Fn(&TraceRecord<'_>) -> bool + Send + Sync>);

impl TraceFilter {
    /// A filter that keeps the records for which `keep` returns `true`.
    pub fn new<F: Fn(&TraceRecord<'_>) -> bool + Send + Sync + 'static>(keep: F) -> Self {
        TraceFilter(Arc::new(keep))
    }
}

impl fmt::Debug for TraceFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TraceFilter")
    }
}

/// A tracer that emits each record as a `tracing` crate event at `TRACE` level, target
/// `agentbox::trace`, with the record's fields as event fields.
///
/// ```
/// use std::sync::Arc;
/// use agentbox::trace::TracingTracer;
/// let params = agentbox::EnvParams::new().message_tracer(Arc::new(TracingTracer));
/// # let _ = params;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TracingTracer;

impl Tracer for TracingTracer {
    fn trace(&self, r: &TraceRecord<'_>) {
        tracing::event!(
            target: "agentbox::trace",
            tracing::Level::TRACE,
            event = ?r.event,
            agent = r.agent.map(|a| a.as_u64()),
            agent_name = r.agent_name,
            mbox = r.mbox.map(|m| m.as_u64()),
            msg_type = r.msg_type.map(|t| t.name()),
            state = r.state,
        );
    }
}

/// An environment's tracer with its current filter.
pub(crate) struct TraceHub {
    tracer: Arc<dyn Tracer>,
    filter: RwLock<Option<TraceFilter>>,
    /// The environment's agent names, for the records' `agent_name`.
    names: Arc<crate::agent::name::AgentNames>,
}

/// Where agents and mboxes keep their environment's tracer: `None` when tracing is off.
pub(crate) type Trace = Option<Arc<TraceHub>>;

impl TraceHub {
    pub(crate) fn new(
        tracer: Arc<dyn Tracer>,
        filter: Option<TraceFilter>,
        names: Arc<crate::agent::name::AgentNames>,
    ) -> Self {
        TraceHub {
            tracer,
            filter: RwLock::new(filter),
            names,
        }
    }

    pub(crate) fn set_filter(&self, filter: Option<TraceFilter>) {
        *self.filter.write() = filter;
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn emit(&self, record: TraceRecord<'_>) {
        let name = record.agent.and_then(|a| self.names.get(a));
        let record = TraceRecord {
            agent_name: name.as_deref(),
            ..record
        };
        // The filter is user code: called with the lock released (it may replace itself).
        let filter = self.filter.read_recursive().clone();
        let keep = filter.is_none_or(|f| (f.0)(&record));
        if keep {
            self.tracer.trace(&record);
        }
    }
}

/// Emits the record `make` builds, only when tracing is on.
#[inline(always)]
pub(crate) fn emit<'a>(trace: &Trace, make: impl FnOnce() -> TraceRecord<'a>) {
    if let Some(hub) = trace {
        hub.emit(make());
    }
}
