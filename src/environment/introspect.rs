//! A read-only snapshot of what an environment holds: [`Environment::introspect`].
//!
//! The snapshot is plain data, read on the caller's thread from figures the environment
//! keeps anyway, so that reading it costs nothing on the message path when nobody reads:
//!
//! | figure | kept by | written when |
//! |---|---|---|
//! | coops, their agents and statuses | the coop registry | a coop is registered or goes |
//! | an agent's type name (feature `monitor`) | the agent's core | the agent is created |
//! | an agent's current state (feature `monitor`) | the agent's core | the agent changes state |
//! | queue lengths, threads, busy/idle | the dispatchers' stats sources | (counted anyway) |
//! | named mboxes, timers, drops | the environment | (counted anyway) |
//! | named mboxes' subscribers and message types (feature `monitor`) | each multi-consumer mbox | a subscription or filter is made (the type's name) |
//!
//! An agent's type name and current state are kept only in builds with the feature
//! `monitor` (24 bytes an agent, and a lock taken at each state switch); without it they
//! are `None`. An agent's current state is published by its worker when the agent switches state (a
//! lock taken per switch, never per message); a reader sees the state the agent was in at
//! its last switch, which may be a switch requested by a handler still running.
//!
//! Every figure is read separately: a snapshot taken while coops come and go may show an
//! agent in a coop that is already gone from another list. It is a picture for people and
//! tools (the `monitor` feature's page), not a synchronization point.

use std::time::Duration;

use super::Environment;
use crate::agent::{AgentId, Priority};
use crate::drops::DropCounts;
pub use crate::mbox::info::{SinkInfo, SubscriberInfo, SubscriptionInfo};
use crate::stats::source::Quantity;

/// A snapshot of an environment ([`Environment::introspect`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Introspection {
    /// Time since the environment was launched.
    pub uptime: Duration,
    /// Registered coops (deregistering ones included), parents before their children, each
    /// with its agents.
    pub coops: Vec<CoopInfo>,
    /// Named mboxes alive ([`Environment::named_mbox_count`]).
    pub named_mboxes: usize,
    /// Timers pending ([`Environment::pending_timers`]).
    pub pending_timers: usize,
    /// Messages accepted and then dropped, by reason ([`Environment::drop_counts`]).
    pub drops: DropCounts,
    /// The figures of the dispatchers the environment's agents are bound to, and of the
    /// layers that report through the stats controller (YDB pools, interconnect
    /// sessions), as the [stats controller](crate::stats) would distribute them now
    /// (`disp/<kind>/<name>/…`, `ydb/node<N>/…`, `ic/node<N>/…`; see the table in
    /// [`crate::stats`]). Read whether or not the controller is on.
    pub quantities: Vec<Quantity>,
    /// The named mboxes ([`Environment::named_mbox`] and
    /// [`Environment::introduce_named_mbox`]), by namespace then name, each multi-consumer
    /// one with its message types and their subscribers (feature `monitor`; empty without
    /// it). Anonymous mboxes ([`Environment::create_mbox`]) are in no registry and are
    /// not listed.
    pub mboxes: Vec<MboxInfo>,
}

/// One named mbox of an [`Introspection`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MboxInfo {
    /// The namespace it was introduced in; `None` for [`Environment::named_mbox`]'s own.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: crate::mbox::MboxId,
    /// Whether it is multi-consumer.
    pub multi_consumer: bool,
    /// For a multi-consumer mbox of the crate's own: each message type subscribed to (or
    /// filtered) with its subscribers, in delivery order; empty for other mboxes.
    pub subscriptions: Vec<SubscriptionInfo>,
}

/// One coop of an [`Introspection`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CoopInfo {
    /// The coop's id (unique in the process).
    pub id: u64,
    /// The parent coop's id, for a child coop.
    pub parent: Option<u64>,
    /// Where the coop is in its life.
    pub status: CoopStatus,
    /// Its agents, in binding order (highest priority first).
    pub agents: Vec<AgentInfo>,
}

/// Where a coop is in its life (see [`crate::coop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoopStatus {
    /// Its agents are being defined and bound.
    Registering,
    /// Registered: its agents handle messages.
    Registered,
    /// Deregistering: its agents finish.
    Deregistering,
    /// Every agent finished; the coop is about to leave the registry.
    Final,
}

/// Where an agent is in its life (see [`crate::agent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AgentStatus {
    /// Created, `define` may run; not bound yet.
    Defining,
    /// Bound: handles messages.
    Active,
    /// Its coop is going: it handles only its `on_finish`.
    Deregistering,
    /// Its `on_finish` has run.
    Finished,
}

/// One agent of a [`CoopInfo`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentInfo {
    /// The agent's id (its direct mbox's id).
    pub id: AgentId,
    /// The Rust type of the agent ([`std::any::type_name`]); `None` without the feature
    /// `monitor`.
    pub type_name: Option<&'static str>,
    /// The agent's name, for agents that have one; `None` otherwise.
    pub name: Option<String>,
    /// The name of its current leaf state (`"<default>"` for the default state), as of its
    /// last state switch; `None` without the feature `monitor`.
    pub state: Option<String>,
    /// Where the agent is in its life.
    pub status: AgentStatus,
    /// Its priority.
    pub priority: Priority,
}

impl Environment {
    /// A snapshot of the environment: uptime, coops with their agents (status; type and
    /// state with the feature `monitor`), named mboxes, timers, drops, and the dispatchers' figures.
    ///
    /// Read-only and taken on the caller's thread; it takes the environment's lock (and each
    /// coop's, one at a time) briefly, never while calling user code. What it reads is kept
    /// whether or not anybody asks (see the module docs of `introspect`): an environment
    /// nobody introspects does no extra work per message.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::prelude::*;
    ///
    /// struct Worker;
    /// impl Agent for Worker {}
    ///
    /// Environment::launch(|env| {
    ///     env.introduce_coop(|coop| { coop.add_agent(Worker); }).unwrap();
    ///     let snap = env.introspect();
    ///     assert_eq!(snap.coops.len(), 1);
    ///     let agent = &snap.coops[0].agents[0];
    ///     assert_eq!(agent.status, agentbox::environment::AgentStatus::Active);
    ///     if cfg!(feature = "monitor") {
    ///         assert!(agent.type_name.unwrap().ends_with("Worker"));
    ///         assert_eq!(agent.state.as_deref(), Some("<default>"));
    ///     }
    ///     env.stop();
    /// }).unwrap();
    /// ```
    pub fn introspect(&self) -> Introspection {
        let mut coops: Vec<_> = self.0.state.lock().coops.coops().cloned().collect();
        coops.sort_by_key(|c| c.id);
        let coops = coops
            .iter()
            .map(|c| {
                let (status, agents) = c.introspect();
                CoopInfo {
                    id: c.id,
                    parent: c.parent.as_ref().map(|p| p.id),
                    status,
                    agents: agents
                        .iter()
                        .map(|a| AgentInfo {
                            id: a.id,
                            #[cfg(feature = "monitor")]
                            type_name: Some((a.shown.type_name)()),
                            #[cfg(not(feature = "monitor"))]
                            type_name: None,
                            name: self.0.names.get(a.id).map(|n| n.to_string()),
                            #[cfg(feature = "monitor")]
                            state: Some(a.shown.state_name()),
                            #[cfg(not(feature = "monitor"))]
                            state: None,
                            status: match a.status() {
                                crate::agent::core::DEFINING => AgentStatus::Defining,
                                crate::agent::core::ACTIVE => AgentStatus::Active,
                                crate::agent::core::DEREGISTERING => AgentStatus::Deregistering,
                                _ => AgentStatus::Finished,
                            },
                            priority: a.priority,
                        })
                        .collect(),
                }
            })
            .collect();
        Introspection {
            uptime: self.0.started.elapsed(),
            coops,
            named_mboxes: self.named_mbox_count(),
            pending_timers: self.pending_timers(),
            drops: self.drop_counts(),
            quantities: self.0.stats.collect(),
            mboxes: self.mboxes(),
        }
    }

    /// The named mboxes with their subscriptions (see [`Introspection::mboxes`]).
    fn mboxes(&self) -> Vec<MboxInfo> {
        #[cfg(feature = "monitor")]
        {
            use crate::mbox::{MboxKind, Repr};
            let mut out: Vec<MboxInfo> = Vec::new();
            // The handles are dropped after the registries' locks are released.
            let named = self.0.named.alive();
            for (name, m) in &named {
                out.push(MboxInfo {
                    namespace: None,
                    name: name.clone(),
                    id: m.id,
                    multi_consumer: true,
                    subscriptions: m.snapshot(),
                });
            }
            let introduced = self.0.introduced.all();
            for (ns, name, m) in &introduced {
                out.push(MboxInfo {
                    namespace: Some(ns.clone()),
                    name: name.clone(),
                    id: m.id(),
                    multi_consumer: m.kind() == MboxKind::MultiConsumer,
                    subscriptions: match &m.0 {
                        Repr::Mpmc(m) => m.snapshot(),
                        _ => Vec::new(),
                    },
                });
            }
            out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            drop(named);
            drop(introduced);
            out
        }
        #[cfg(not(feature = "monitor"))]
        Vec::new()
    }
}
