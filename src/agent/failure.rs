//! A handler's failure (a panic or an error) and the reaction to it: the agent's
//! [`ExceptionReaction`], looked up agent → coop → environment (see [`crate::exception`]).

use std::fmt;

use crate::agent::AgentArc;
use crate::coop::DeregReason;
use crate::exception::ExceptionReaction;
use crate::mbox::DeliveryFilter;

/// What went wrong in an agent.
pub(crate) enum Failure {
    Panic(String),
    Error(crate::agent::StateError),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Panic(m) => write!(f, "panic: {m}"),
            Failure::Error(e) => write!(f, "error: {e}"),
        }
    }
}

/// Applies the agent's effective reaction to a failure.
pub(crate) fn react(agent: &AgentArc, failure: Failure, during: &str) {
    let core = agent;
    let coop = core.coop();
    let env = core.env.upgrade();
    let mut reaction = core.reaction;
    if reaction == ExceptionReaction::Inherit {
        if let Some(c) = &coop {
            reaction = c.exception_reaction();
        }
    }
    if reaction == ExceptionReaction::Inherit {
        reaction = env
            .as_ref()
            .map_or(ExceptionReaction::Abort, |e| e.exception_reaction());
    }
    let text = format!(
        "agent {}{} failed in {during}: {failure}; reaction: {reaction:?}",
        core.id.0,
        env.as_ref()
            .and_then(|e| e.0.names.get(core.id))
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    );
    match &env {
        Some(env) => env.log_error(&text),
        None => eprintln!("agentbox: {text}"),
    }
    match reaction {
        ExceptionReaction::Abort | ExceptionReaction::Inherit => {
            eprintln!("agentbox: aborting the process: {text}");
            std::process::abort();
        }
        ExceptionReaction::ShutdownEnvironment => {
            if let Some(env) = env {
                env.stop();
            }
        }
        ExceptionReaction::DeregisterCoop => {
            if let Some(c) = coop {
                c.deregister(DeregReason::Panic);
            }
        }
        ExceptionReaction::Ignore => {}
    }
}

/// `filter` owned by `agent`: a panic in it goes to the agent's exception reaction (or,
/// once the agent is gone, to stderr).
pub(crate) fn owned_filter(filter: DeliveryFilter, agent: &AgentArc) -> DeliveryFilter {
    let owner = agent.downgrade();
    filter.owned_by(Box::new(move |message| match owner.upgrade() {
        Some(agent) => react(&agent, Failure::Panic(message), "a delivery filter"),
        None => eprintln!("agentbox: a delivery filter failed: panic: {message}"),
    }))
}
