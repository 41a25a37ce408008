//! A live introspection page of a running environment (feature `monitor`, off by default).
//!
//! [`Monitor::start`] serves, on a thread of its own, one HTML page and its JSON endpoints:
//! the environment (uptime, coops, agents, named mboxes, timers, drops), the coop tree
//! with each agent's type, state, status and own queue, the named mboxes with their
//! message types and subscribers, the dispatchers (threads, queues and whose they are,
//! per-thread work and wait with activity tracking), the YDB actor systems attached with
//! [`Monitor::add_system`] (pools, actors, services, dead letters), and the interconnect
//! nodes attached with [`Monitor::add_node`] (sessions: peer, connected, RTT, bytes and
//! events in and out, unconfirmed packets, resends, reconnects, last error; refused
//! handshakes). The page polls `/api/all` once a second and draws the messages handled per
//! second and the demands waiting over the last minute. `/metrics` serves the same figures
//! in the Prometheus text format for the tools that scrape (see [Metrics](#metrics)).
//!
//! # Security
//!
//! **The page has no authentication and no encryption**: anyone who can connect to its
//! address can read everything it shows (type names, service ids, peers' addresses, error
//! texts). [`Monitor::start`] therefore refuses an address that is not a loopback address
//! (127.0.0.0/8, `::1`) with [`MonitorError::NotLoopback`]; serving on another interface
//! takes an explicit [`MonitorBuilder::allow_non_loopback`], behind a firewall or a proxy
//! that authenticates. The page only reads: no endpoint changes anything.
//!
//! # Cost
//!
//! Nothing runs on the message path for the page, whether or not it is open: it reads what
//! the environment, the dispatchers, the systems and the sessions count anyway (see
//! [`Environment::introspect`]). While a monitor runs, its thread reads the dispatchers'
//! and pools' counters once a second for the chart (each dispatcher's stats lock, briefly)
//! and looks for new connections every 10 ms (each served by a thread `agentbox-page`),
//! and a dead letter of an attached system is also logged by the monitor (a short lock).
//! Attaching a system subscribes the monitor to its dead-letters mbox, so its dead letters
//! no longer count as `no_subscribers` drops of the environment.
//!
//! # Lifetime
//!
//! The server stops, its thread ends and its listener closes when the [`Monitor`] is
//! dropped (the drop waits for the thread: at most 100 ms and the answers being made)
//! or when the environment starts shutting down (within 100 ms). It never keeps an
//! environment running: it holds no coop.
//!
//! # Clients
//!
//! No client can hold the page from others, nor the drop: each connection gets one
//! answer (`Connection: close`) on a thread of its own; at most 16 are served at once
//! (one more is answered 503 and closed); a client has 2 s to send its request head
//! (at most 8 KiB; else 408 or 431) and 5 s to take its answer, after which its
//! connection is closed. A client that pipelines requests without reading its answers
//! gets the first answer only.
//!
//! # Endpoints
//!
//! Every endpoint but `/` and `/metrics` answers `GET` with JSON (`application/json`);
//! other paths answer 404, other methods 405. Figures that a part of the system does not
//! keep are `null`.
//!
//! `GET /` — the page (one static HTML file with plain JavaScript, embedded in the binary).
//!
//! `GET /api/environment`:
//!
//! ```json
//! {"uptime_s": 12.5, "coops": 2, "agents": 3, "named_mboxes": 1, "pending_timers": 1,
//!  "drops": {"at_deregistration": 0, "filtered": 0, "no_handler": 0, "no_subscribers": 4,
//!            "over_limit": 0, "receiver_finished": 0, "redirection_depth": 0, "refused": 0,
//!            "unreachable": 0}}
//! ```
//!
//! `GET /api/coops` — the coop tree, each coop with its agents (`name` is the agent's name
//! for agents that have one; `queue` the demands waiting in the agent's own queue on
//! `active_obj` or an individual FIFO, `null` where the agent shares its queue, whose
//! per-agent share is not counted; `handled` the demands its own thread ran, for an agent
//! of an `active_obj` dispatcher with activity tracking, `null` elsewhere: no per-agent
//! count is kept on the message path):
//!
//! ```json
//! {"coops": [{"id": 3, "parent": null, "status": "registered", "queue": null,
//!   "agents": [{"id": 4, "type_name": "app::Ticker", "name": null, "state": "running",
//!               "status": "active", "priority": 0, "queue": 0, "handled": 120}],
//!   "children": []}]}
//! ```
//!
//! `GET /api/mboxes` — the named mboxes ([`Environment::named_mbox`] and
//! [`Environment::introduce_named_mbox`]; anonymous ones are in no registry), each
//! multi-consumer one with its message types and their subscribers in delivery order: an
//! agent (`agent` its id, `label` its id, type and name), a binding to another mbox
//! (`mbox`, `label` that mbox's name) or a custom sink (`custom`); `subscribed` is false
//! for a subscriber with only a delivery filter set:
//!
//! ```json
//! {"mboxes": [{"namespace": null, "name": "news", "id": 12, "multi_consumer": true,
//!   "subscriptions": [{"message_type": "app::Headline", "subscribers": [
//!     {"kind": "agent", "agent": 4, "label": "agent 4 app::Reader", "subscribed": true,
//!      "filtered": false},
//!     {"kind": "mbox", "agent": null, "label": "mpmc:15", "subscribed": true,
//!      "filtered": false}]}]}]}
//! ```
//!
//! `GET /api/dispatchers` — each dispatcher with its queues and worker threads by tag
//! and `owner`, what the tag stands for (`agent 4 app::Ticker "name"` for an agent's own
//! queue, `coop 3`, `worker thread 0`; see [`crate::stats`] for the tags), and `thread`,
//! the OS thread's name for a worker thread (`workers-0`: what a debugger shows)
//! (`work_*`/`wait_*` with activity tracking, see [`crate::stats`]; `busy_us`, `cpu_us`,
//! `parked_us` and `events` on the threads of an elastic pool). An elastic pool
//! (`thread_limits`) also has `elastic`: its thread range, its activation latencies
//! (bucket upper bound in µs → activations, non-empty buckets) and the harmonizer's
//! counters and flags on it (`null` for other dispatchers). `harmonizers` lists the last
//! step of each harmonizer attached with [`Monitor::add_harmonizer`] (or with its system);
//! `other` lists the quantities of other sources:
//!
//! ```json
//! {"dispatchers": [{"kind": "thread_pool", "name": "workers", "agents": 2, "threads": 2,
//!   "units": [{"tag": "cq-3", "owner": "coop 3", "thread": null, "demands": 0, "work_count": null, "work_ns": null,
//!              "wait_count": null, "wait_ns": null, "busy_us": null, "cpu_us": null,
//!              "parked_us": null, "events": null},
//!             {"tag": "wt-0", "owner": "worker thread 0", "thread": "workers-0",
//!              "demands": null, "work_count": null, "work_ns": null,
//!              "wait_count": null, "wait_ns": null, "busy_us": 5200, "cpu_us": 4900,
//!              "parked_us": 994800, "events": 120}],
//!   "elastic": {"target": 2, "min": 1, "default": 2, "max": 4,
//!               "activation_lt_us": {"8": 100, "16": 20}, "foreign_events": 0,
//!               "harmonizer": {"decreasing_threads_by_exchange": 0,
//!                              "decreasing_threads_by_hoggish_state": 0,
//!                              "decreasing_threads_by_starved_state": 0,
//!                              "increasing_threads_by_exchange": 0,
//!                              "increasing_threads_by_needy_state": 1, "is_hoggish": 0,
//!                              "is_needy": 1, "is_starved": 0,
//!                              "potential_max_thread_count_milli": 4000}}}],
//!  "harmonizers": [{"iterations": 12, "total_cores": 2.0, "budget": 0.4,
//!    "budget_last_second": 0.3, "lost_cpu": 0.0, "shared_free_cpu": 0.0,
//!    "pools": [{"name": "workers", "priority": 0, "state": "needy", "threads": 2,
//!               "full_threads": 2, "min_threads": 1, "default_threads": 2,
//!               "max_threads": 4, "potential_max_threads": 4.0, "elapsed": 1.6,
//!               "cpu": 1.5, "last_second_elapsed": 1.7, "last_second_cpu": 1.6,
//!               "activations": 120, "latency_p50_us": 8, "latency_p99_us": 16,
//!               "latency_max_us": 16,
//!               "operations": {"DecreasingThreadsByExchange": 0,
//!                              "DecreasingThreadsByHoggishState": 0,
//!                              "DecreasingThreadsByStarvedState": 0,
//!                              "IncreasingThreadsByExchange": 0,
//!                              "IncreasingThreadsByNeedyState": 1}}]}],
//!  "other": []}
//! ```
//!
//! `GET /api/systems` — the attached YDB actor systems (`dead_letter_reasons` and
//! `recent_dead_letters`, the last ten, count from the system's attachment):
//!
//! ```json
//! {"systems": [{"node_id": 1, "dead_letters": 1, "undelivered": 0, "forwarded": 0,
//!   "pools": [{"id": 0, "name": "user", "threads": 1, "actors": 2, "events_handled": 840,
//!              "queue_length": 0, "work_ns": 0, "idle_ns": 0}],
//!   "services": [{"service": "[1:7310575175264448354:1885432179]", "actor": "[1:5:0]"}],
//!   "dead_letter_reasons": {"ActorUnknown": 1},
//!   "recent_dead_letters": [{"recipient": "[1:99:0]", "sender": "[0:0:0]",
//!                            "event_type": 268500993, "cookie": 0,
//!                            "reason": "ActorUnknown"}]}]}
//! ```
//!
//! `GET /api/interconnect` — the attached nodes, each with its sessions and the handshakes
//! it refused (`rtt_us` once a ping came back; `last_error` stays once the session is
//! connected again, `last_error_age_s` says how many seconds ago it happened):
//!
//! ```json
//! {"nodes": [{"node_id": 1, "local_addr": "127.0.0.1:40123",
//!   "sessions": [{"peer": 2, "connected": true, "tls": false, "rtt_us": 180,
//!                 "bytes_out": 5120, "bytes_in": 4980, "events_out": 60, "events_in": 60,
//!                 "unconfirmed": 0, "queued_events": 0, "queued_bytes": 0, "resends": 0,
//!                 "skipped": 0, "reconnects": 0, "sessions_ended": 0,
//!                 "events_refused": 0, "events_not_delivered": 0,
//!                 "last_error": null, "last_error_age_s": null}],
//!   "refusals": [{"peer_addr": "127.0.0.2:51000", "claimed_node": 9,
//!                 "reason": "node 9 is not in this node's name service"}]}]}
//! ```
//!
//! `GET /api/history` — one sample a second over the last minute, oldest first:
//! `messages_per_s` is the messages handled per second (demands run by dispatchers with
//! activity tracking, plus events handled by the attached systems' pools), `queued` the
//! demands waiting in every dispatcher's queues; `rtt` has each attached session's
//! round-trip time at the same seconds (`null` until a ping came back):
//!
//! ```json
//! {"period_s": 1.0, "samples": [{"t": 41.0, "messages_per_s": 230.0, "queued": 2}],
//!  "rtt": [{"node": 1, "peer": 2, "samples": [{"t": 41.0, "rtt_us": 180}]}]}
//! ```
//!
//! `GET /api/all` — every view above in one object (`environment`, `coops`, `mboxes`,
//! `dispatchers`, `systems`, `interconnect`, `history`): what the page polls.
//!
//! # Metrics
//!
//! `GET /metrics` — the figures above for the operations tools that scrape (Prometheus,
//! VictoriaMetrics, the OpenTelemetry collector's Prometheus receiver), in the Prometheus
//! text exposition format version 0.0.4, content type
//! `text/plain; version=0.0.4; charset=utf-8`. Each family has its `# HELP` and
//! `# TYPE`; label values escape `\`, `"` and line feeds; counters end in `_total`.
//! Series are per drop reason, dispatcher, harmonized pool, attached system and session
//! peer, never per agent or per message: the number of series follows the system's
//! shape, not its traffic. A family with nothing to report (no harmonizer attached, say)
//! has its HELP and TYPE and no series. Like the JSON, the metrics read counters kept
//! anyway: a scrape costs the message path nothing.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `agentbox_uptime_seconds` | gauge | | seconds since the environment started |
//! | `agentbox_coops` | gauge | | coops registered now |
//! | `agentbox_agents` | gauge | | agents of those coops now |
//! | `agentbox_named_mboxes` | gauge | | named mboxes now |
//! | `agentbox_pending_timers` | gauge | | timers waiting to fire now |
//! | `agentbox_dropped_messages_total` | counter | `reason` | messages `send` accepted and then dropped, one series per field of [`DropCounts`](crate::DropCounts) ([`by_reason`](crate::DropCounts::by_reason)) |
//! | `agentbox_dispatcher_agents` | gauge | `kind`, `dispatcher` | agents bound to the dispatcher |
//! | `agentbox_dispatcher_threads` | gauge | `kind`, `dispatcher` | its worker threads |
//! | `agentbox_dispatcher_queued_demands` | gauge | `kind`, `dispatcher` | demands waiting in its queues (their sum: its agents' and coops' queues are not series of their own) |
//! | `agentbox_dispatcher_handled_demands_total` | counter | `kind`, `dispatcher` | demands its threads ran (dispatchers with activity tracking only) |
//! | `agentbox_harmonizer_iterations_total` | counter | `harmonizer` | steps the harmonizer ran (`harmonizer`: its attachment order, from 0) |
//! | `agentbox_harmonizer_pool_state` | gauge | `harmonizer`, `pool`, `state` | 1 for the pool's state at the last step, 0 for the others; `state` is `balanced`, `needy`, `hoggish` or `starved` |
//! | `agentbox_harmonizer_pool_threads` | gauge | `harmonizer`, `pool` | the pool's thread count at the last step |
//! | `agentbox_ydb_dead_letters_total` | counter | `node` | dead letters of the attached system since it started |
//! | `agentbox_ydb_dead_letters_by_reason_total` | counter | `node`, `reason` | its dead letters since it was attached, by reason (`ActorUnknown`, …) |
//! | `agentbox_ydb_pool_threads` | gauge | `node`, `pool` | threads of the system's pool |
//! | `agentbox_ydb_pool_actors` | gauge | `node`, `pool` | actors in the pool now |
//! | `agentbox_ydb_pool_handled_events_total` | counter | `node`, `pool` | events the pool handled |
//! | `agentbox_ydb_pool_queue_length` | gauge | `node`, `pool` | events waiting in the pool now |
//! | `agentbox_interconnect_session_connected` | gauge | `node`, `peer` | 1 while the session with `peer` has a connection up |
//! | `agentbox_interconnect_rtt_seconds` | gauge | `node`, `peer` | the last round-trip time a ping measured (once one came back) |
//! | `agentbox_interconnect_sent_bytes_total` | counter | `node`, `peer` | bytes written to the session's sockets |
//! | `agentbox_interconnect_received_bytes_total` | counter | `node`, `peer` | bytes read from them |
//! | `agentbox_interconnect_sent_events_total` | counter | `node`, `peer` | events sent (once each, resends not counted) |
//! | `agentbox_interconnect_received_events_total` | counter | `node`, `peer` | events received and handed to the local system |
//! | `agentbox_interconnect_resent_packets_total` | counter | `node`, `peer` | data packets sent again after a reconnect |
//! | `agentbox_interconnect_reconnects_total` | counter | `node`, `peer` | connections made after a session's first (resumes) |
//! | `agentbox_interconnect_refused_events_total` | counter | `node`, `peer` | events refused because the session held its limit |
//! | `agentbox_interconnect_queued_events` | gauge | `node`, `peer` | events waiting to leave now |
//! | `agentbox_interconnect_unconfirmed_packets` | gauge | `node`, `peer` | data packets sent and not yet confirmed |
//!
//! The interconnect's families are there with the feature `interconnect` (on by default);
//! `node` is the attached node's id, `peer` the other side's.
//!
//! ```text
//! # HELP agentbox_dropped_messages_total Messages accepted by send and then dropped, by reason, since the environment started.
//! # TYPE agentbox_dropped_messages_total counter
//! agentbox_dropped_messages_total{reason="no_subscribers"} 3
//! agentbox_dropped_messages_total{reason="filtered"} 0
//! ```
//!
//! # Examples
//!
//! ```
//! use std::io::{Read, Write};
//! use agentbox::monitor::Monitor;
//! use agentbox::prelude::*;
//!
//! struct Worker;
//! impl Agent for Worker {}
//!
//! Environment::launch(|env| {
//!     env.introduce_coop(|coop| { coop.add_agent(Worker); }).unwrap();
//!     let monitor = Monitor::start(env, "127.0.0.1:0").unwrap();
//!     let mut http = std::net::TcpStream::connect(monitor.local_addr()).unwrap();
//!     http.write_all(b"GET /api/coops HTTP/1.0\r\n\r\n").unwrap();
//!     let mut answer = String::new();
//!     http.read_to_string(&mut answer).unwrap();
//!     assert!(answer.contains("Worker"));
//!     // Anything but loopback is refused unless asked for.
//!     assert!(Monitor::start(env, "0.0.0.0:0").is_err());
//!     // Dropping the Monitor stops the page: at the end of this closure, unless the
//!     // environment keeps it until it ends.
//!     env.keep(monitor);
//!     env.stop();
//! }).unwrap();
//! ```

mod elastic_view;
mod http;
mod metrics;
mod server;
mod sink;
mod view;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use thiserror::Error;

use crate::actors::{ActorSystem, DeadLetter};
use crate::environment::Environment;
use crate::harmonizer::{Harmonizer, HarmonizerObserver};
use crate::mbox::{SingleSinkBinding, SubscribeError};
use crate::Sink;

use sink::DeadLetterLog;

/// Why a monitor could not start, or a system could not be attached.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MonitorError {
    /// The address could not be resolved.
    #[error("cannot resolve the monitor's address: {0}")]
    Resolve(#[source] std::io::Error),
    /// The address resolved to nothing.
    #[error("the monitor's address resolves to no address")]
    NoAddress,
    /// The address is not a loopback address and
    /// [`MonitorBuilder::allow_non_loopback`] was not given: the page has no
    /// authentication.
    #[error(
        "{0} is not a loopback address: the monitor has no authentication \
         (MonitorBuilder::allow_non_loopback serves it anyway)"
    )]
    NotLoopback(SocketAddr),
    /// The server could not listen on the address.
    #[error("the monitor cannot listen on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The server's thread could not be started.
    #[error("cannot spawn the monitor's thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The system's dead-letters mbox refused the monitor's subscription.
    #[error("cannot watch the system's dead letters: {0}")]
    DeadLetters(#[from] SubscribeError),
}

/// A YDB actor system the page shows, with the log of its dead letters.
pub(crate) struct Attached {
    pub(crate) system: ActorSystem,
    pub(crate) log: Arc<DeadLetterLog>,
    /// Unbinds the log when the system is let go.
    _binding: SingleSinkBinding,
}

/// What the handle and the server's thread share.
pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    pub(crate) systems: Mutex<Vec<Attached>>,
    /// Watched harmonizers (weakly: a dropped one leaves the page).
    pub(crate) harmonizers: Mutex<Vec<HarmonizerObserver>>,
    #[cfg(feature = "interconnect")]
    pub(crate) nodes: Mutex<Vec<crate::interconnect::Interconnect>>,
}

impl Shared {
    /// Lets the attached systems and nodes go (the server has stopped).
    fn release(&self) {
        self.systems.lock().clear();
        self.harmonizers.lock().clear();
        #[cfg(feature = "interconnect")]
        self.nodes.lock().clear();
    }
}

/// A running introspection page: see the [module docs](self).
///
/// Dropping it stops the server (and waits for its thread).
#[must_use = "dropping the Monitor stops the page: keep it in a variable for as long as the page should be served, or give it to the environment with `env.keep(monitor)`"]
pub struct Monitor {
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// Options of a [`Monitor`]: how to start one other than with [`Monitor::start`].
///
/// # Examples
///
/// ```
/// use agentbox::monitor::Monitor;
/// use agentbox::Environment;
///
/// Environment::launch(|env| {
///     let monitor = Monitor::builder().start(env, ("localhost", 0)).unwrap();
///     assert!(monitor.local_addr().ip().is_loopback());
///     env.stop();
/// }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct MonitorBuilder {
    non_loopback: bool,
}

impl MonitorBuilder {
    /// Whether an address that is not a loopback address may be served (default: no).
    /// The page has no authentication: anyone who reaches the address reads it.
    pub fn allow_non_loopback(mut self, allow: bool) -> Self {
        self.non_loopback = allow;
        self
    }

    /// Starts serving the page of `env` on `addr` (port 0: a free port, see
    /// [`Monitor::local_addr`]).
    ///
    /// # Errors
    ///
    /// [`MonitorError`]: the address does not resolve, is not loopback (unless allowed),
    /// cannot be listened on, or the thread cannot start.
    pub fn start(
        self,
        env: &Environment,
        addr: impl ToSocketAddrs,
    ) -> Result<Monitor, MonitorError> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(MonitorError::Resolve)?
            .collect();
        let first = *addrs.first().ok_or(MonitorError::NoAddress)?;
        if !self.non_loopback {
            if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
                return Err(MonitorError::NotLoopback(*bad));
            }
        }
        let bind_error = |e: std::io::Error| MonitorError::Bind {
            addr: first,
            reason: e.to_string(),
        };
        let listener = std::net::TcpListener::bind(first).map_err(bind_error)?;
        // The server's thread polls for connections, so that nothing holds it.
        listener.set_nonblocking(true).map_err(bind_error)?;
        let bound = listener.local_addr().unwrap_or(first);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            systems: Mutex::new(Vec::new()),
            harmonizers: Mutex::new(Vec::new()),
            #[cfg(feature = "interconnect")]
            nodes: Mutex::new(Vec::new()),
        });
        let thread = {
            // The thread owns the server: the listener closes as soon as it ends, whether
            // the monitor was dropped or the environment stopped first.
            let (shared, env) = (shared.clone(), env.downgrade());
            std::thread::Builder::new()
                .name("agentbox-monitor".into())
                .spawn(move || {
                    server::run(listener, shared.clone(), env);
                    shared.release();
                })
                .map_err(MonitorError::Spawn)?
        };
        Ok(Monitor {
            shared,
            addr: bound,
            thread: Some(thread),
        })
    }
}

impl Monitor {
    /// Serves the page of `env` on the loopback address `addr` (port 0: a free port, see
    /// [`local_addr`](Self::local_addr)); [`builder`](Self::builder) for other options.
    ///
    /// # Errors
    ///
    /// [`MonitorError::NotLoopback`] for an address that is not loopback (the page has no
    /// authentication), and the other [`MonitorError`]s.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn start(env: &Environment, addr: impl ToSocketAddrs) -> Result<Monitor, MonitorError> {
        MonitorBuilder::default().start(env, addr)
    }

    /// A builder for options (serving a non-loopback address).
    pub fn builder() -> MonitorBuilder {
        MonitorBuilder::default()
    }

    /// The address the page is served on (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, `http://<local_addr>/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Whether the server still runs: false once its environment began shutting down.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Shows the YDB actor system `system` on the page (`/api/systems`): its pools, local
    /// services and dead letters (counted from now on), and its harmonizer if it has one
    /// ([`SystemSetup::harmonize`](crate::actors::SystemSetup::harmonize), under
    /// `harmonizers` of `/api/dispatchers`). Attaching a system twice shows it once. The
    /// monitor keeps a handle to the system until it stops.
    ///
    /// # Errors
    ///
    /// [`MonitorError::DeadLetters`] if the system's dead-letters mbox refuses the
    /// monitor's subscription (it does not for the built-in mbox).
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::actors::{ActorSystem, SystemSetup};
    /// use agentbox::monitor::Monitor;
    /// use agentbox::Environment;
    ///
    /// Environment::launch(|env| {
    ///     let system = ActorSystem::start(env, SystemSetup::new(1)).unwrap();
    ///     let monitor = Monitor::start(env, "127.0.0.1:0").unwrap();
    ///     monitor.add_system(&system).unwrap();
    ///     system.stop();
    ///     env.stop();
    /// }).unwrap();
    /// ```
    pub fn add_system(&self, system: &ActorSystem) -> Result<(), MonitorError> {
        let mut systems = self.shared.systems.lock();
        if systems.iter().any(|a| Arc::ptr_eq(&a.system.0, &system.0)) {
            return Ok(());
        }
        let log = Arc::new(DeadLetterLog::default());
        let mut binding = SingleSinkBinding::new();
        binding.bind::<DeadLetter>(&system.dead_letters(), Sink::custom(log.clone()))?;
        systems.push(Attached {
            system: system.clone(),
            log,
            _binding: binding,
        });
        systems.sort_by_key(|a| a.system.node_id());
        drop(systems);
        if let Some(h) = system.harmonizer() {
            self.add_harmonizer(h);
        }
        Ok(())
    }

    /// Shows `harmonizer`'s last step on the page (`harmonizers` of `/api/dispatchers`):
    /// budget, lost CPU, and per pool its state, thread counts, CPU figures, activation
    /// latencies and operations. The monitor does not keep the harmonizer alive: a dropped
    /// harmonizer leaves the page. Attaching one twice shows it once.
    ///
    /// The pools' own figures (range, per-thread busy/CPU/parked time, latency buckets and
    /// the harmonizer's counters) are on the page without this, under each elastic
    /// dispatcher's `elastic`.
    ///
    /// # Examples
    ///
    /// ```
    /// use agentbox::dispatcher::thread_pool;
    /// use agentbox::harmonizer::Harmonizer;
    /// use agentbox::monitor::Monitor;
    /// use agentbox::Environment;
    ///
    /// Environment::launch(|env| {
    ///     let pool = thread_pool::Builder::new().thread_limits(1, 2, 4).build().unwrap();
    ///     let harmonizer = Harmonizer::builder().dispatcher(&pool).build().unwrap();
    ///     let monitor = Monitor::start(env, "127.0.0.1:0").unwrap();
    ///     monitor.add_harmonizer(&harmonizer);
    ///     env.stop();
    /// }).unwrap();
    /// ```
    pub fn add_harmonizer(&self, harmonizer: &Harmonizer) {
        let watch = harmonizer.observer();
        let mut all = self.shared.harmonizers.lock();
        if !all.iter().any(|h| h.same_as(&watch)) {
            all.push(watch);
        }
    }

    /// Shows the interconnect node `node` on the page (`/api/interconnect`): its sessions
    /// and refused handshakes. Attaching a node twice shows it once. The monitor keeps a
    /// handle to the node until it stops.
    #[cfg(feature = "interconnect")]
    pub fn add_node(&self, node: &crate::interconnect::Interconnect) {
        let mut nodes = self.shared.nodes.lock();
        let same = |n: &crate::interconnect::Interconnect| {
            n.node_id() == node.node_id() && n.local_addr() == node.local_addr()
        };
        if nodes.iter().any(same) {
            return;
        }
        nodes.push(node.clone());
        nodes.sort_by_key(|n| n.node_id());
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        // The thread looks at the flag at least every 100 ms.
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.release();
    }
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor").field("addr", &self.addr).finish()
    }
}
