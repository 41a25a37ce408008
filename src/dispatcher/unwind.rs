//! Panics in user code a worker runs outside a handler: an agent's `Drop` (its value, its
//! context and handlers, dropped after `on_finish`) and a message payload's `Drop` (when
//! the worker lets go of a message it ran, or of one no agent will run).
//!
//! A handler's panic is caught around the handler (`agent::exec`) and goes to the agent's
//! exception reaction. These go the same way while the agent is known: its core still
//! names its reaction after its executor is gone. A panic while dropping a demand whose
//! agent is gone (its receiver finished, or its worker stopped) goes to the environment's
//! error logger. Either way the worker keeps serving: a worker thread never dies of a
//! user's panic, and a queue is never left marked as scheduled by a worker that died.
//!
//! # Where the catches are
//!
//! - The rare paths catch each call: dropping an executor (once per agent), a demand queued
//!   for an agent that finished, a demand left behind by a stopped worker.
//! - The message path does not catch per message: each worker loop runs its demands under
//!   one `catch_unwind` and, after a panic, reports it ([`AgentTable::contain`]) and
//!   resumes. The table notes the key of the demand it runs (one store per message), so the
//!   panic of a payload's `Drop` goes to the reaction of the agent that handled it.
//!   `adv_thread_pool`, whose every demand already takes two locks, catches per demand.
//!
//! [`AgentTable::contain`]: super::AgentTable::contain

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::Demand;
use crate::agent::Failure;
use crate::agent::{AgentArc, AgentId, ExecBox};
use crate::drops::{DropCounters, DropReason};
use crate::environment::WeakEnv;
use crate::exception;
use crate::mbox::MboxId;
use crate::trace::{self, TraceEvent, TraceRecord};

/// What a worker keeps of an agent that finished, for the demands still queued for it:
/// where to count them, and where to log a panic while dropping them.
#[derive(Clone)]
pub(crate) struct Gone {
    drops: Arc<DropCounters>,
    env: WeakEnv,
    id: AgentId,
}

impl Gone {
    pub(crate) fn of(core: &AgentArc) -> Gone {
        Gone {
            drops: core.drops.clone(),
            env: core.env.clone(),
            id: core.id,
        }
    }

    pub(crate) fn env(&self) -> &WeakEnv {
        &self.env
    }
}

/// Runs `f`; its panic comes back as the panic's message.
pub(crate) fn catching(f: impl FnOnce()) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(message_of)
}

/// The message of a panic payload; the payload is dropped here, and a payload whose own
/// `Drop` panics is leaked rather than let escape.
pub(crate) fn message_of(payload: Box<dyn Any + Send>) -> String {
    let msg = exception::panic_message(&payload);
    if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
        std::mem::forget(again);
    }
    msg
}

/// Applies the agent's exception reaction to a panic in its code outside a handler. The
/// reaction's own steps run user code (the error logger): a panic there is written to
/// stderr, never let out of the worker.
pub(crate) fn react(core: &AgentArc, msg: String, during: &str) {
    let reacted = catching(|| crate::agent::react(core, Failure::Panic(msg), during));
    if let Err(again) = reacted {
        eprintln!("agentbox: a panic while reporting a panic in {during}: {again}");
    }
}

/// Writes a panic nobody's reaction applies to to the environment's error logger (stderr
/// when the environment is gone, or when the logger itself panics).
pub(crate) fn log(env: Option<&WeakEnv>, msg: &str, during: &str) {
    let line = format!("a panic while {during}: {msg}");
    let logged = env
        .and_then(WeakEnv::upgrade)
        .map(|env| catching(|| env.log_error(&line)));
    if !matches!(logged, Some(Ok(()))) {
        eprintln!("agentbox: {line}");
    }
}

/// Drops an agent's executor (the user's value, its context and handlers) after its
/// `Finish`; a panic in a `Drop` there goes to the agent's exception reaction.
pub(crate) fn drop_exec(core: &AgentArc, exec: ExecBox) {
    if let Err(msg) = catching(|| drop(exec)) {
        react(core, msg, "its Drop (after on_finish)");
    }
}

/// Drops a demand its agent will never run, counting a message as dropped because its
/// receiver finished (`gone` is the agent, or whatever is known of it).
#[cold]
#[inline(never)]
pub(crate) fn drop_unrun(demand: Demand, gone: Option<&Gone>) {
    let mbox = gone.and_then(|g| demand.message_mbox(|| MboxId(g.id.0)));
    if let (Some(g), Some(mbox)) = (gone, mbox) {
        g.drops.count(DropReason::ReceiverFinished);
        if let Some(env) = g.env.upgrade() {
            trace::emit(&env.0.trace, || {
                TraceRecord::new(TraceEvent::DroppedReceiverFinished)
                    .agent(g.id)
                    .mbox(mbox)
            });
        }
    }
    if let Err(msg) = catching(|| drop(demand)) {
        log(
            gone.map(|g| &g.env),
            &msg,
            "dropping a message whose receiver had finished",
        );
    }
}
