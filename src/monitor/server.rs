//! The server's thread: answers requests, samples the chart's figures once a second, and
//! ends when the monitor is dropped or the environment starts shutting down.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;
use tiny_http::{Header, Method, Request, Response};

use super::view::{
    CoopsView, DispatchersView, EnvView, InterconnectView, NodeView, SystemView, SystemsView,
};
use super::Shared;
use crate::environment::{Environment, WeakEnv};
use crate::harmonizer::HarmonizerStats;

/// The page, embedded in the binary.
const PAGE: &str = include_str!("page.html");

/// How long the thread waits for a request before it looks at its stop conditions.
const POLL: Duration = Duration::from_millis(100);
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
}

/// The chart's figures, sampled by the server's thread.
struct Sampler {
    started: Instant,
    last: Option<(Instant, u64)>,
    samples: VecDeque<Sample>,
}

impl Sampler {
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
        self.samples.push_back(Sample {
            t: now.duration_since(self.started).as_secs_f64(),
            messages_per_s: rate,
            queued,
        });
    }

    fn history(&self) -> History {
        History {
            period_s: PERIOD.as_secs_f64(),
            samples: self.samples.iter().copied().collect(),
        }
    }
}

pub(crate) fn run(server: tiny_http::Server, shared: &Shared, env: &WeakEnv) {
    let mut sampler = Sampler {
        started: Instant::now(),
        last: None,
        samples: VecDeque::with_capacity(SAMPLES),
    };
    let mut next_sample = Instant::now();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        // The environment is held only while a sample or an answer is being made.
        match env.upgrade() {
            Some(e) if !e.is_shutting_down() => {
                if Instant::now() >= next_sample {
                    sampler.sample(&e, shared);
                    next_sample += PERIOD;
                    if next_sample < Instant::now() {
                        next_sample = Instant::now() + PERIOD;
                    }
                }
            }
            _ => return,
        }
        let wait = next_sample
            .saturating_duration_since(Instant::now())
            .min(POLL);
        match server.recv_timeout(wait) {
            Ok(Some(request)) => {
                let Some(e) = env.upgrade() else { return };
                answer(request, &e, shared, &sampler);
            }
            Ok(None) => {}
            // The listener failed.
            Err(_) => return,
        }
    }
}

fn answer(request: Request, env: &Environment, shared: &Shared, sampler: &Sampler) {
    if *request.method() != Method::Get && *request.method() != Method::Head {
        return respond(request, 405, "text/plain", "only GET\n".into());
    }
    let path = request.url().split('?').next().unwrap_or("").to_owned();
    let body = match path.as_str() {
        "/" | "/index.html" => {
            return respond(request, 200, "text/html; charset=utf-8", PAGE.into());
        }
        "/api/environment" => json(&EnvView::new(&env.introspect())),
        "/api/coops" => json(&CoopsView::new(&env.introspect())),
        "/api/dispatchers" => json(&DispatchersView::new(
            &env.0.stats.collect(),
            &harmonizers(shared),
        )),
        "/api/systems" => json(&systems(shared)),
        "/api/interconnect" => json(&interconnect(shared)),
        "/api/history" => json(&sampler.history()),
        "/api/all" => {
            let snap = env.introspect();
            let mut all = BTreeMap::new();
            all.insert("environment", value(&EnvView::new(&snap)));
            all.insert("coops", value(&CoopsView::new(&snap)));
            all.insert(
                "dispatchers",
                value(&DispatchersView::new(
                    &snap.quantities,
                    &harmonizers(shared),
                )),
            );
            all.insert("systems", value(&systems(shared)));
            all.insert("interconnect", value(&interconnect(shared)));
            all.insert("history", value(&sampler.history()));
            json(&all)
        }
        _ => return respond(request, 404, "text/plain", "not found\n".into()),
    };
    respond(request, 200, "application/json", body);
}

/// Answers `request`; a client gone meanwhile is not an error of the server.
fn respond(request: Request, status: u16, content_type: &str, body: String) {
    let mut response = Response::from_string(body).with_status_code(status);
    for (k, v) in [
        ("Content-Type", content_type),
        ("Cache-Control", "no-store"),
    ] {
        // Constants of this file, always valid.
        if let Ok(h) = Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            response = response.with_header(h);
        }
    }
    let _ = request.respond(response);
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
