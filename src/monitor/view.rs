//! The JSON views of the endpoints: plain `Serialize` structs built from the core's
//! [`Introspection`] and the attached systems' and nodes' figures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::actors::ActorSystem;
use crate::environment::{AgentStatus, CoopInfo, CoopStatus, Introspection, SinkInfo};

use super::elastic_view::{ElasticView, HarmonizerView};
use super::sink::{DeadLetterLog, DeadLetterView};
use crate::harmonizer::HarmonizerStats;

/// `GET /api/environment`.
#[derive(Serialize)]
pub(crate) struct EnvView {
    pub(crate) uptime_s: f64,
    pub(crate) coops: usize,
    pub(crate) agents: usize,
    pub(crate) named_mboxes: usize,
    pub(crate) pending_timers: usize,
    pub(crate) drops: BTreeMap<&'static str, u64>,
}

impl EnvView {
    pub(crate) fn new(snap: &Introspection) -> Self {
        let d = &snap.drops;
        EnvView {
            uptime_s: snap.uptime.as_secs_f64(),
            coops: snap.coops.len(),
            agents: snap.coops.iter().map(|c| c.agents.len()).sum(),
            named_mboxes: snap.named_mboxes,
            pending_timers: snap.pending_timers,
            drops: d.by_reason().collect(),
        }
    }
}

/// `GET /api/coops`: the coop tree.
#[derive(Serialize)]
pub(crate) struct CoopsView {
    pub(crate) coops: Vec<CoopView>,
}

#[derive(Serialize)]
pub(crate) struct CoopView {
    id: u64,
    parent: Option<u64>,
    status: &'static str,
    /// Demands waiting in the coop's own queue (a thread pool's cooperation FIFO).
    queue: Option<usize>,
    agents: Vec<AgentView>,
    children: Vec<CoopView>,
}

#[derive(Serialize)]
struct AgentView {
    id: u64,
    type_name: Option<&'static str>,
    name: Option<String>,
    state: Option<String>,
    status: &'static str,
    priority: usize,
    /// Demands waiting in the agent's own queue (`active_obj`, an individual FIFO).
    queue: Option<usize>,
    /// Demands the agent's own thread ran: an agent of an `active_obj` dispatcher with
    /// activity tracking (its thread runs only its demands); `null` elsewhere, where no
    /// per-agent count is kept (one would cost an increment per message).
    handled: Option<usize>,
}

impl CoopsView {
    pub(crate) fn new(snap: &Introspection) -> Self {
        // Queues of one agent or one coop, by their tags (`ao-<id>`, `aq-<id>`, `cq-<id>`).
        let mut own = BTreeMap::new();
        let mut run = BTreeMap::new();
        for q in &snap.quantities {
            if !q.prefix.starts_with("disp/") {
                continue;
            }
            let Some(tag) = q.prefix.rsplit('/').next() else {
                continue;
            };
            match q.suffix {
                "demands.count" => {
                    own.insert(tag.to_owned(), q.value);
                }
                "work.count" if tag.starts_with("ao-") => {
                    run.insert(tag.to_owned(), q.value);
                }
                _ => {}
            }
        }
        let view = |c: &CoopInfo| CoopView {
            id: c.id,
            parent: c.parent,
            status: match c.status {
                CoopStatus::Registering => "registering",
                CoopStatus::Registered => "registered",
                CoopStatus::Deregistering => "deregistering",
                _ => "final",
            },
            queue: own.get(&format!("cq-{}", c.id)).copied(),
            agents: c
                .agents
                .iter()
                .map(|a| {
                    let id = a.id.as_u64();
                    AgentView {
                        id,
                        type_name: a.type_name,
                        name: a.name.clone(),
                        state: a.state.clone(),
                        status: match a.status {
                            AgentStatus::Defining => "defining",
                            AgentStatus::Active => "active",
                            AgentStatus::Deregistering => "deregistering",
                            _ => "finished",
                        },
                        priority: a.priority.index(),
                        queue: own
                            .get(&format!("ao-{id}"))
                            .or_else(|| own.get(&format!("aq-{id}")))
                            .copied(),
                        handled: run.get(&format!("ao-{id}")).copied(),
                    }
                })
                .collect(),
            children: Vec::new(),
        };
        // Parents come before their children (ids grow with registration): build the tree
        // bottom-up, children first.
        let mut nodes: BTreeMap<u64, CoopView> =
            snap.coops.iter().map(|c| (c.id, view(c))).collect();
        let ids: Vec<u64> = nodes.keys().rev().copied().collect();
        for id in ids {
            let parent = nodes.get(&id).and_then(|c| c.parent);
            if let Some(p) = parent.filter(|p| nodes.contains_key(p)) {
                if let Some(child) = nodes.remove(&id) {
                    if let Some(parent) = nodes.get_mut(&p) {
                        parent.children.insert(0, child);
                    }
                }
            }
        }
        CoopsView {
            coops: nodes.into_values().collect(),
        }
    }
}

/// `GET /api/mboxes`: the named mboxes with their message types and subscribers.
#[derive(Serialize)]
pub(crate) struct MboxesView {
    mboxes: Vec<MboxView>,
}

#[derive(Serialize)]
struct MboxView {
    namespace: Option<String>,
    name: String,
    id: u64,
    multi_consumer: bool,
    subscriptions: Vec<SubscriptionView>,
}

#[derive(Serialize)]
struct SubscriptionView {
    message_type: &'static str,
    subscribers: Vec<SubscriberView>,
}

#[derive(Serialize)]
struct SubscriberView {
    /// `agent`, `mbox` (a binding to another mbox) or `custom`.
    kind: &'static str,
    /// The agent's id, for an agent.
    agent: Option<u64>,
    /// Who it is, in words: `agent 4 app::Ticker "name"`, the bound mbox's name, `custom sink`.
    label: String,
    subscribed: bool,
    filtered: bool,
}

impl MboxesView {
    pub(crate) fn new(snap: &Introspection) -> Self {
        let agents = agent_words(snap);
        MboxesView {
            mboxes: snap
                .mboxes
                .iter()
                .map(|m| MboxView {
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    id: m.id.0,
                    multi_consumer: m.multi_consumer,
                    subscriptions: m
                        .subscriptions
                        .iter()
                        .map(|s| SubscriptionView {
                            message_type: s.message_type,
                            subscribers: s
                                .subscribers
                                .iter()
                                .map(|x| {
                                    let (kind, agent, label) = match &x.sink {
                                        SinkInfo::Agent(a) => {
                                            let id = a.as_u64();
                                            let words = agents
                                                .get(&id)
                                                .cloned()
                                                .unwrap_or_else(|| format!("agent {id}"));
                                            ("agent", Some(id), words)
                                        }
                                        SinkInfo::Mbox(name) => ("mbox", None, name.clone()),
                                        _ => ("custom", None, "custom sink".to_owned()),
                                    };
                                    SubscriberView {
                                        kind,
                                        agent,
                                        label,
                                        subscribed: x.subscribed,
                                        filtered: x.filtered,
                                    }
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// Each agent of the snapshot in words: `agent 4 app::Ticker "name"`.
fn agent_words(snap: &Introspection) -> BTreeMap<u64, String> {
    snap.coops
        .iter()
        .flat_map(|c| c.agents.iter())
        .map(|a| {
            let id = a.id.as_u64();
            let mut words = format!("agent {id}");
            if let Some(t) = a.type_name {
                words.push(' ');
                words.push_str(t);
            }
            if let Some(n) = &a.name {
                words.push_str(&format!(" \"{n}\""));
            }
            (id, words)
        })
        .collect()
}

/// `GET /api/dispatchers`.
#[derive(Serialize)]
pub(crate) struct DispatchersView {
    dispatchers: Vec<DispatcherView>,
    /// The attached harmonizers' last steps.
    harmonizers: Vec<HarmonizerView>,
    /// Quantities of other stats sources (neither a dispatcher, a YDB system nor an
    /// interconnect node), as the stats controller names them.
    other: Vec<QuantityView>,
}

#[derive(Serialize)]
struct DispatcherView {
    kind: String,
    name: String,
    agents: Option<usize>,
    threads: Option<usize>,
    /// Its queues and worker threads, by tag (`wt`, `wt-0`, `ao-7`, `cq-3`, `p2`, …).
    units: Vec<UnitView>,
    /// An elastic pool's range, latencies and harmonizer counters (`null` otherwise).
    elastic: Option<ElasticView>,
}

#[derive(Serialize, Default)]
struct UnitView {
    tag: String,
    /// What the tag stands for, in words: `agent 5 app::Ticker "name"` for an agent's own
    /// queue (`ao-5`, `aq-5`), `coop 3` for a coop's (`cq-3`), `worker thread 0` (`wt-0`),
    /// `worker thread` (`wt`, a dispatcher of one thread), `priority 2` (`p2`); `null` for a tag of another form.
    owner: Option<String>,
    /// The OS thread's name (as `std::thread::current().name()`, a debugger or `top -H`
    /// show it) for a worker thread of a `thread_pool` or `adv_thread_pool` (`wt-N`), a
    /// `one_thread` (`wt`) or an `active_obj` agent's (`ao-ID`); `null` for other units.
    thread: Option<String>,
    /// Demands waiting in this queue.
    demands: Option<usize>,
    /// With activity tracking: demands run by this thread and the time they took.
    work_count: Option<usize>,
    work_ns: Option<usize>,
    /// With activity tracking: times this thread waited for work and the time it waited.
    wait_count: Option<usize>,
    wait_ns: Option<usize>,
    /// An elastic pool's thread: time not parked, the OS's CPU time, time parked (µs) and
    /// demands run.
    busy_us: Option<usize>,
    cpu_us: Option<usize>,
    parked_us: Option<usize>,
    events: Option<usize>,
}

#[derive(Serialize)]
struct QuantityView {
    prefix: String,
    suffix: &'static str,
    value: usize,
}

impl DispatchersView {
    pub(crate) fn new(snap: &Introspection, harmonizers: &[HarmonizerStats]) -> Self {
        let quantities = &snap.quantities;
        let agents = agent_words(snap);
        let mut disps: BTreeMap<(String, String), DispatcherView> = BTreeMap::new();
        let mut units: BTreeMap<(String, String), BTreeMap<String, UnitView>> = BTreeMap::new();
        let mut other = Vec::new();
        for q in quantities {
            let Some(rest) = q.prefix.strip_prefix("disp/") else {
                if !q.prefix.starts_with("ydb/") && !q.prefix.starts_with("ic/") {
                    other.push(QuantityView {
                        prefix: q.prefix.clone(),
                        suffix: q.suffix,
                        value: q.value,
                    });
                }
                continue;
            };
            let mut parts = rest.splitn(3, '/');
            let (Some(kind), Some(name)) = (parts.next(), parts.next()) else {
                continue;
            };
            let key = (kind.to_owned(), name.to_owned());
            let d = disps.entry(key.clone()).or_insert_with(|| DispatcherView {
                kind: kind.to_owned(),
                name: name.to_owned(),
                agents: None,
                threads: None,
                units: Vec::new(),
                elastic: None,
            });
            match parts.next() {
                None => match q.suffix {
                    "agent.count" => d.agents = Some(q.value),
                    "threads.count" => d.threads = Some(q.value),
                    s => {
                        ElasticView::take(&mut d.elastic, s, q.value);
                    }
                },
                Some(tag) => {
                    let u = units
                        .entry(key)
                        .or_default()
                        .entry(tag.to_owned())
                        .or_insert_with(|| UnitView {
                            tag: tag.to_owned(),
                            owner: owner(tag, &agents),
                            thread: thread_name(kind, name, tag),
                            ..UnitView::default()
                        });
                    let v = Some(q.value);
                    match q.suffix {
                        "demands.count" => u.demands = v,
                        "work.count" => u.work_count = v,
                        "work.total_ns" => u.work_ns = v,
                        "wait.count" => u.wait_count = v,
                        "wait.total_ns" => u.wait_ns = v,
                        "busy_us" => u.busy_us = v,
                        "cpu_us" => u.cpu_us = v,
                        "parked_us" => u.parked_us = v,
                        "events.count" => u.events = v,
                        _ => {}
                    }
                }
            }
        }
        for (key, u) in units {
            if let Some(d) = disps.get_mut(&key) {
                d.units = u.into_values().collect();
            }
        }
        DispatchersView {
            dispatchers: disps.into_values().collect(),
            harmonizers: harmonizers.iter().map(HarmonizerView::new).collect(),
            other,
        }
    }
}

/// The OS name of a unit's thread, by the dispatchers' naming rules (see [`UnitView::thread`]).
fn thread_name(kind: &str, name: &str, tag: &str) -> Option<String> {
    match (kind, tag.split_once('-')) {
        ("thread_pool" | "adv_thread_pool", Some(("wt", n))) | ("active_obj", Some(("ao", n))) => {
            Some(format!("{name}-{n}"))
        }
        ("one_thread", None) if tag == "wt" => Some(name.to_owned()),
        _ => None,
    }
}

/// What a unit's tag stands for, in words (see [`UnitView::owner`]).
fn owner(tag: &str, agents: &BTreeMap<u64, String>) -> Option<String> {
    if tag == "wt" {
        return Some("worker thread".to_owned());
    }
    let (kind, n) = tag.split_once('-').unwrap_or_else(|| tag.split_at(1));
    let n: u64 = n.parse().ok()?;
    match kind {
        "ao" | "aq" => Some(
            agents
                .get(&n)
                .cloned()
                .unwrap_or_else(|| format!("agent {n}")),
        ),
        "cq" => Some(format!("coop {n}")),
        "wt" => Some(format!("worker thread {n}")),
        "p" => Some(format!("priority {n}")),
        _ => None,
    }
}

/// `GET /api/systems`.
#[derive(Serialize)]
pub(crate) struct SystemsView {
    pub(crate) systems: Vec<SystemView>,
}

#[derive(Serialize)]
pub(crate) struct SystemView {
    node_id: u32,
    dead_letters: u64,
    undelivered: u64,
    forwarded: u64,
    pools: Vec<PoolView>,
    services: Vec<ServiceView>,
    /// Dead letters since the system was attached, by reason.
    dead_letter_reasons: BTreeMap<String, u64>,
    /// The last few dead letters, oldest first.
    recent_dead_letters: Vec<DeadLetterView>,
}

#[derive(Serialize)]
struct PoolView {
    id: u32,
    name: String,
    threads: usize,
    actors: usize,
    events_handled: u64,
    queue_length: u64,
    work_ns: u128,
    idle_ns: u128,
}

#[derive(Serialize)]
struct ServiceView {
    service: String,
    actor: String,
}

impl SystemView {
    pub(crate) fn new(sys: &ActorSystem, log: &DeadLetterLog) -> Self {
        let s = sys.stats();
        let (reasons, recent) = log.snapshot();
        SystemView {
            node_id: s.node_id,
            dead_letters: s.dead_letters,
            undelivered: s.undelivered,
            forwarded: s.forwarded,
            pools: s
                .pools
                .into_iter()
                .map(|p| PoolView {
                    id: p.pool_id,
                    name: p.name,
                    threads: p.threads,
                    actors: p.actors,
                    events_handled: p.events_handled,
                    queue_length: p.queue_length,
                    work_ns: p.work.as_nanos(),
                    idle_ns: p.idle.as_nanos(),
                })
                .collect(),
            services: sys
                .local_services()
                .into_iter()
                .map(|(s, a)| ServiceView {
                    service: s.to_string(),
                    actor: a.to_string(),
                })
                .collect(),
            dead_letter_reasons: reasons,
            recent_dead_letters: recent,
        }
    }
}

/// `GET /api/interconnect`.
#[derive(Serialize)]
pub(crate) struct InterconnectView {
    pub(crate) nodes: Vec<NodeView>,
}

#[derive(Serialize)]
pub(crate) struct NodeView {
    node_id: u32,
    local_addr: String,
    sessions: Vec<SessionView>,
    refusals: Vec<RefusalView>,
}

#[derive(Serialize)]
struct SessionView {
    peer: u32,
    connected: bool,
    tls: bool,
    rtt_us: Option<u128>,
    bytes_out: u64,
    bytes_in: u64,
    events_out: u64,
    events_in: u64,
    unconfirmed: usize,
    queued_events: usize,
    queued_bytes: usize,
    resends: u64,
    skipped: u64,
    reconnects: u64,
    sessions_ended: u64,
    events_refused: u64,
    events_not_delivered: u64,
    last_error: Option<String>,
    /// How long ago `last_error` happened (seconds).
    last_error_age_s: Option<f64>,
}

#[derive(Serialize)]
struct RefusalView {
    peer_addr: Option<String>,
    claimed_node: u32,
    reason: String,
}

impl NodeView {
    #[cfg(feature = "interconnect")]
    pub(crate) fn new(ic: &crate::interconnect::Interconnect) -> Self {
        NodeView {
            node_id: ic.node_id(),
            local_addr: ic.local_addr().to_string(),
            sessions: ic
                .stats()
                .into_iter()
                .map(|s| SessionView {
                    peer: s.peer_node,
                    connected: s.connected,
                    tls: s.tls,
                    rtt_us: s.rtt.map(|d| d.as_micros()),
                    bytes_out: s.bytes_out,
                    bytes_in: s.bytes_in,
                    events_out: s.events_out,
                    events_in: s.events_in,
                    unconfirmed: s.unconfirmed_packets,
                    queued_events: s.queued_events,
                    queued_bytes: s.queued_bytes,
                    resends: s.packets_resent,
                    skipped: s.packets_skipped,
                    reconnects: s.reconnects,
                    sessions_ended: s.sessions_ended,
                    events_refused: s.events_refused,
                    events_not_delivered: s.events_not_delivered,
                    last_error: s.last_error.map(|e| e.to_string()),
                    last_error_age_s: s
                        .last_error_at
                        .map(|t| t.elapsed().unwrap_or_default().as_secs_f64()),
                })
                .collect(),
            refusals: ic
                .refusals()
                .into_iter()
                .map(|r| RefusalView {
                    peer_addr: r.peer_addr.map(|a| a.to_string()),
                    claimed_node: r.claimed_node,
                    reason: r.reason.to_string(),
                })
                .collect(),
        }
    }
}
