//! The server's thread: accepts connections (served by `http`), samples the chart's
//! figures once a second, and ends when the monitor is dropped or the environment starts
//! shutting down.

use std::collections::{BTreeMap, VecDeque};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

use super::view::{
    CoopsView, DispatchersView, EnvView, InterconnectView, MboxesView, NodeView, SystemView,
    SystemsView,
};
use super::{http, metrics, Shared};
use crate::environment::{Environment, WeakEnv};
use crate::harmonizer::HarmonizerStats;

/// The page, embedded in the binary.
const PAGE: &str = include_str!("page.html");

/// The chart's sampling period and length (one minute).
const PERIOD: Duration = Duration::from_secs(1);
const SAMPLES: usize = 60;

#[derive(Serialize, Clone, Copy)]
struct Sample {
    t: f64,
    messages_per_s: f64,
    queued: usize,
}

#[derive(Serialize)]
struct History {
    period_s: f64,
    samples: Vec<Sample>,
    /// Each attached node's sessions' round-trip times over the same minute.
    rtt: Vec<RttHistory>,
}

/// One session's round-trip times, a sample a second (`null` before a ping came back
/// or while the session has none).
#[derive(Serialize, Clone)]
struct RttHistory {
    node: u32,
    peer: u32,
    samples: VecDeque<RttSample>,
}

#[derive(Serialize, Clone, Copy)]
struct RttSample {
    t: f64,
    rtt_us: Option<u128>,
}

/// The chart's figures, sampled by the server's thread.
struct Sampler {
    started: Instant,
    last: Option<(Instant, u64)>,
    samples: VecDeque<Sample>,
    rtt: Vec<RttHistory>,
}

impl Sampler {
    /// Adds each attached session's round-trip time at `t` (a session seen for the
    /// first time starts its own line; one whose node was let go keeps its samples until
    /// they are a minute old).
    fn sample_rtt(&mut self, shared: &Shared, t: f64) {
        #[cfg(feature = "interconnect")]
        for ic in shared.nodes.lock().iter() {
            let node = ic.node_id();
            for s in ic.stats() {
                let at = match self
                    .rtt
                    .iter()
                    .position(|h| h.node == node && h.peer == s.peer_node)
                {
                    Some(at) => at,
                    None => {
                        self.rtt.push(RttHistory {
                            node,
                            peer: s.peer_node,
                            samples: VecDeque::new(),
                        });
                        self.rtt.len() - 1
                    }
                };
                self.rtt[at].samples.push_back(RttSample {
                    t,
                    rtt_us: s.rtt.map(|d| d.as_micros()),
                });
            }
        }
        #[cfg(not(feature = "interconnect"))]
        let _ = shared;
        for h in &mut self.rtt {
            while h.samples.front().is_some_and(|s| t - s.t >= SAMPLES as f64) {
                h.samples.pop_front();
            }
        }
        self.rtt.retain(|h| !h.samples.is_empty());
    }

    fn sample(&mut self, env: &Environment, shared: &Shared) {
        let quantities = env.0.stats.collect();
        let systems = shared.systems.lock();
        // A pool's dispatcher (`node<N>-<pool>`) counts the events its pool counts: each
        // is counted once, by the pool.
        let pool_disps: Vec<String> = systems
            .iter()
            .flat_map(|a| {
                let node = a.system.node_id();
                a.system
                    .stats()
                    .pools
                    .into_iter()
                    .map(move |p| format!("node{node}-{}", p.name))
            })
            .collect();
        let mut handled: u64 = systems
            .iter()
            .flat_map(|a| a.system.stats().pools)
            .map(|p| p.events_handled)
            .sum();
        drop(systems);
        let mut queued = 0;
        for q in &quantities {
            let Some(rest) = q.prefix.strip_prefix("disp/") else {
                continue;
            };
            match q.suffix {
                "demands.count" => queued += q.value,
                "work.count" => {
                    let name = rest.split('/').nth(1).unwrap_or("");
                    if !pool_disps.iter().any(|p| p == name) {
                        handled += q.value as u64;
                    }
                }
                _ => {}
            }
        }
        let now = Instant::now();
        let rate = match self.last {
            Some((then, before)) => {
                let secs = now.duration_since(then).as_secs_f64().max(1e-3);
                handled.saturating_sub(before) as f64 / secs
            }
            None => 0.0,
        };
        self.last = Some((now, handled));
        if self.samples.len() == SAMPLES {
            self.samples.pop_front();
        }
        let t = now.duration_since(self.started).as_secs_f64();
        self.samples.push_back(Sample {
            t,
            messages_per_s: rate,
            queued,
        });
        self.sample_rtt(shared, t);
    }

    fn history(&self) -> History {
        History {
            period_s: PERIOD.as_secs_f64(),
            samples: self.samples.iter().copied().collect(),
            rtt: self.rtt.clone(),
        }
    }
}

/// How often the thread looks for new connections and at its stop conditions.
const ACCEPT_POLL: Duration = Duration::from_millis(10);
/// The name of a connection's thread.
const CONNECTION_THREAD: &str = "agentbox-page";

/// What a connection's thread needs to answer.
struct Ctx {
    shared: Arc<Shared>,
    env: WeakEnv,
    history: Mutex<History>,
    /// Set when the server stops: every connection ends within [`http::SLICE`].
    closing: AtomicBool,
}

/// The server's thread: accepts connections (each served on a thread of its own, at
/// most [`http::MAX_CONNECTIONS`] at once), samples the chart, and stops when the
/// monitor is dropped or the environment shuts down; then it ends its connections and
/// waits for their threads (each ends within [`http::SLICE`] of the stop, or once the
/// answer it is making is made).
pub(crate) fn run(listener: TcpListener, shared: Arc<Shared>, env: WeakEnv) {
    let ctx = Arc::new(Ctx {
        shared,
        env,
        history: Mutex::new(History {
            period_s: PERIOD.as_secs_f64(),
            samples: Vec::new(),
            rtt: Vec::new(),
        }),
        closing: AtomicBool::new(false),
    });
    let mut sampler = Sampler {
        started: Instant::now(),
        last: None,
        samples: VecDeque::with_capacity(SAMPLES),
        rtt: Vec::new(),
    };
    let mut next_sample = Instant::now();
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    loop {
        if ctx.shared.stop.load(Ordering::Acquire) {
            break;
        }
        // The environment is held only while a sample or an answer is being made.
        match ctx.env.upgrade() {
            Some(e) if !e.is_shutting_down() => {
                if Instant::now() >= next_sample {
                    sampler.sample(&e, &ctx.shared);
                    *ctx.history.lock() = sampler.history();
                    next_sample += PERIOD;
                    if next_sample < Instant::now() {
                        next_sample = Instant::now() + PERIOD;
                    }
                }
            }
            _ => break,
        }
        connections.retain(|c| !c.is_finished());
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if connections.len() >= http::MAX_CONNECTIONS {
                        http::refuse(stream);
                        continue;
                    }
                    let ctx = ctx.clone();
                    let spawned = std::thread::Builder::new()
                        .name(CONNECTION_THREAD.into())
                        .spawn(move || {
                            http::serve(stream, &ctx.closing, |head| answer(head, &ctx));
                        });
                    // No thread to spare: the connection is dropped with the closure.
                    if let Ok(t) = spawned {
                        connections.push(t);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // A connection that failed before it was accepted (reset, no memory
                // for its socket): the next one may do.
                Err(_) => break,
            }
        }
        std::thread::sleep(ACCEPT_POLL);
    }
    drop(listener);
    ctx.closing.store(true, Ordering::Release);
    for c in connections {
        let _ = c.join();
    }
}

fn answer(head: &http::Head, ctx: &Ctx) -> http::Answer {
    if head.method != "GET" && head.method != "HEAD" {
        return http::Answer::text(405, "only GET\n");
    }
    let Some(env) = ctx.env.upgrade() else {
        return http::Answer::text(503, "the environment is gone\n");
    };
    let shared = &ctx.shared;
    let body = match head.path.as_str() {
        "/" | "/index.html" => {
            return http::Answer {
                status: 200,
                content_type: "text/html; charset=utf-8",
                body: PAGE.into(),
            };
        }
        "/api/environment" => json(&EnvView::new(&env.introspect())),
        "/api/coops" => json(&CoopsView::new(&env.introspect())),
        "/api/mboxes" => json(&MboxesView::new(&env.introspect())),
        "/api/dispatchers" => json(&DispatchersView::new(
            &env.introspect(),
            &harmonizers(shared),
        )),
        "/api/systems" => json(&systems(shared)),
        "/api/interconnect" => json(&interconnect(shared)),
        "/api/history" => json(&*ctx.history.lock()),
        "/metrics" => {
            return http::Answer {
                status: 200,
                content_type: metrics::CONTENT_TYPE,
                body: metrics::render(&env.introspect(), shared, &harmonizers(shared)),
            };
        }
        "/api/all" => {
            let snap = env.introspect();
            let mut all = BTreeMap::new();
            all.insert("environment", value(&EnvView::new(&snap)));
            all.insert("coops", value(&CoopsView::new(&snap)));
            all.insert("mboxes", value(&MboxesView::new(&snap)));
            all.insert(
                "dispatchers",
                value(&DispatchersView::new(&snap, &harmonizers(shared))),
            );
            all.insert("systems", value(&systems(shared)));
            all.insert("interconnect", value(&interconnect(shared)));
            all.insert("history", value(&*ctx.history.lock()));
            json(&all)
        }
        _ => return http::Answer::text(404, "not found\n"),
    };
    http::Answer {
        status: 200,
        content_type: "application/json",
        body,
    }
}

fn systems(shared: &Shared) -> SystemsView {
    SystemsView {
        systems: shared
            .systems
            .lock()
            .iter()
            .map(|a| SystemView::new(&a.system, &a.log))
            .collect(),
    }
}

/// The attached harmonizers still alive (the others are let go), in attachment order.
fn harmonizers(shared: &Shared) -> Vec<HarmonizerStats> {
    let mut out = Vec::new();
    shared.harmonizers.lock().retain(|h| match h.stats() {
        Some(s) => {
            out.push(s);
            true
        }
        None => false,
    });
    out
}

fn interconnect(shared: &Shared) -> InterconnectView {
    #[cfg(feature = "interconnect")]
    let nodes = shared.nodes.lock().iter().map(NodeView::new).collect();
    #[cfg(not(feature = "interconnect"))]
    let nodes: Vec<NodeView> = {
        let _ = shared;
        Vec::new()
    };
    InterconnectView { nodes }
}

fn json<T: Serialize>(v: &T) -> String {
    // The views are plain structs and maps with string keys: they always serialize.
    serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn value<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
