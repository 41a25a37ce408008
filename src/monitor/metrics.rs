//! `GET /metrics`: the figures of the page in the Prometheus text exposition format
//! (version 0.0.4), for the operations tools that scrape it. The metrics are listed in
//! the [module docs](super#metrics).
//!
//! Everything here reads what the JSON views read (the environment's snapshot, the
//! dispatchers' quantities, the attached systems, harmonizers and nodes): nothing on the
//! message path. Cardinality is bounded by the system's shape, never by its traffic: one
//! series per drop reason, per dispatcher, per harmonized pool and state, per attached
//! system's pool and dead-letter reason, per session's peer; none per agent.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::environment::Introspection;
use crate::harmonizer::HarmonizerStats;

use super::Shared;

/// The content type of the answer: the text format, version 0.0.4.
pub(super) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The harmonizer's states, each a series of `agentbox_harmonizer_pool_state` (1 for the
/// pool's state, 0 for the others).
const HARMONIZER_STATES: [&str; 4] = ["balanced", "needy", "hoggish", "starved"];

/// A value as the format writes it (Go's float syntax: `+Inf`, `-Inf`, `NaN`).
#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v == f64::INFINITY => f.write_str("+Inf"),
            Value::Float(v) if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(v as u64)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// One sample: its labels (name, value) and its value.
type Sample = (Vec<(&'static str, String)>, Value);

/// The exposition being written: each family once, its `# HELP` and `# TYPE` first.
#[derive(Default)]
struct Exposition {
    out: String,
}

impl Exposition {
    /// Writes a family. A counter's name ends in `_total` (checked in the tests).
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: Vec<Sample>) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            self.out.push_str(name);
            if !labels.is_empty() {
                self.out.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
                }
                self.out.push('}');
            }
            let _ = writeln!(self.out, " {value}");
        }
    }

    /// A family of one sample without labels.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl Into<Value>) {
        self.family(name, kind, help, vec![(Vec::new(), value.into())]);
    }
}

/// A `# HELP` text: backslash and line feed escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A label value: backslash, double quote and line feed escaped.
pub(super) fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Per dispatcher (kind, name): agents, threads, demands waiting, demands run.
#[derive(Default)]
struct Disp {
    agents: Option<usize>,
    threads: Option<usize>,
    queued: Option<usize>,
    handled: Option<usize>,
}

/// The whole exposition: see the metrics table in the [module docs](super#metrics).
pub(super) fn render(
    snap: &Introspection,
    shared: &Shared,
    harmonizers: &[HarmonizerStats],
) -> String {
    let mut x = Exposition::default();
    x.single(
        "agentbox_uptime_seconds",
        "gauge",
        "Seconds since the environment started.",
        snap.uptime.as_secs_f64(),
    );
    x.single(
        "agentbox_coops",
        "gauge",
        "Coops registered now.",
        snap.coops.len(),
    );
    x.single(
        "agentbox_agents",
        "gauge",
        "Agents of the registered coops now.",
        snap.coops.iter().map(|c| c.agents.len()).sum::<usize>(),
    );
    x.single(
        "agentbox_named_mboxes",
        "gauge",
        "Named mboxes now.",
        snap.named_mboxes,
    );
    x.single(
        "agentbox_pending_timers",
        "gauge",
        "Timers waiting to fire now.",
        snap.pending_timers,
    );
    x.family(
        "agentbox_dropped_messages_total",
        "counter",
        "Messages accepted by send and then dropped, by reason, since the environment started.",
        snap.drops
            .by_reason()
            .map(|(reason, n)| (vec![("reason", reason.to_owned())], n.into()))
            .collect(),
    );
    dispatchers(&mut x, snap);
    harmonizer_metrics(&mut x, harmonizers);
    systems(&mut x, shared);
    #[cfg(feature = "interconnect")]
    sessions(&mut x, shared);
    x.out
}

fn dispatchers(x: &mut Exposition, snap: &Introspection) {
    let mut disps: BTreeMap<(&str, &str), Disp> = BTreeMap::new();
    for q in &snap.quantities {
        let Some(rest) = q.prefix.strip_prefix("disp/") else {
            continue;
        };
        let mut parts = rest.splitn(3, '/');
        let (Some(kind), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        let d = disps.entry((kind, name)).or_default();
        let add = |slot: &mut Option<usize>| *slot = Some(slot.unwrap_or(0) + q.value);
        match (parts.next(), q.suffix) {
            (None, "agent.count") => d.agents = Some(q.value),
            (None, "threads.count") => d.threads = Some(q.value),
            (Some(_), "demands.count") => add(&mut d.queued),
            (Some(_), "work.count") => add(&mut d.handled),
            _ => {}
        }
    }
    let labels = |(kind, name): &(&str, &str)| {
        vec![
            ("kind", (*kind).to_owned()),
            ("dispatcher", (*name).to_owned()),
        ]
    };
    let series = |pick: &dyn Fn(&Disp) -> Option<usize>| -> Vec<Sample> {
        disps
            .iter()
            .filter_map(|(k, d)| pick(d).map(|v| (labels(k), v.into())))
            .collect()
    };
    x.family(
        "agentbox_dispatcher_agents",
        "gauge",
        "Agents bound to the dispatcher now.",
        series(&|d| d.agents),
    );
    x.family(
        "agentbox_dispatcher_threads",
        "gauge",
        "Worker threads of the dispatcher now.",
        series(&|d| d.threads),
    );
    x.family(
        "agentbox_dispatcher_queued_demands",
        "gauge",
        "Demands waiting in the dispatcher's queues now (the sum over its queues).",
        series(&|d| d.queued),
    );
    x.family(
        "agentbox_dispatcher_handled_demands_total",
        "counter",
        "Demands run by the dispatcher's threads (dispatchers with activity tracking only).",
        series(&|d| d.handled),
    );
}

fn harmonizer_metrics(x: &mut Exposition, harmonizers: &[HarmonizerStats]) {
    let mut states = Vec::new();
    let mut threads = Vec::new();
    let mut iterations = Vec::new();
    for (i, h) in harmonizers.iter().enumerate() {
        iterations.push((vec![("harmonizer", i.to_string())], h.iterations.into()));
        for p in &h.pools {
            let labels = vec![("harmonizer", i.to_string()), ("pool", p.name.clone())];
            let now = p.state_name();
            for state in HARMONIZER_STATES {
                let mut l = labels.clone();
                l.push(("state", state.to_owned()));
                states.push((l, u64::from(state == now).into()));
            }
            threads.push((labels, p.current_thread_count.into()));
        }
    }
    x.family(
        "agentbox_harmonizer_iterations_total",
        "counter",
        "Steps the harmonizer ran (harmonizer: its attachment order on the monitor).",
        iterations,
    );
    x.family(
        "agentbox_harmonizer_pool_state",
        "gauge",
        "1 for the pool's state at the harmonizer's last step, 0 for the other states \
         (balanced, needy: busy and wants a thread, hoggish: holds threads it does not use, \
         starved: busy but short of CPU).",
        states,
    );
    x.family(
        "agentbox_harmonizer_pool_threads",
        "gauge",
        "The pool's thread count at the harmonizer's last step.",
        threads,
    );
}

fn systems(x: &mut Exposition, shared: &Shared) {
    let mut dead = Vec::new();
    let mut by_reason = Vec::new();
    let mut pool_threads = Vec::new();
    let mut pool_actors = Vec::new();
    let mut pool_events = Vec::new();
    let mut pool_queue = Vec::new();
    for a in shared.systems.lock().iter() {
        let s = a.system.stats();
        let node = s.node_id.to_string();
        dead.push((vec![("node", node.clone())], s.dead_letters.into()));
        let (reasons, _) = a.log.snapshot();
        for (reason, n) in reasons {
            by_reason.push((vec![("node", node.clone()), ("reason", reason)], n.into()));
        }
        for p in s.pools {
            let l = vec![("node", node.clone()), ("pool", p.name)];
            pool_threads.push((l.clone(), p.threads.into()));
            pool_actors.push((l.clone(), p.actors.into()));
            pool_events.push((l.clone(), p.events_handled.into()));
            pool_queue.push((l, p.queue_length.into()));
        }
    }
    x.family(
        "agentbox_ydb_dead_letters_total",
        "counter",
        "Dead letters of the attached YDB actor system since it started.",
        dead,
    );
    x.family(
        "agentbox_ydb_dead_letters_by_reason_total",
        "counter",
        "Dead letters of the attached YDB actor system since it was attached, by reason.",
        by_reason,
    );
    x.family(
        "agentbox_ydb_pool_threads",
        "gauge",
        "Threads of the actor system's pool.",
        pool_threads,
    );
    x.family(
        "agentbox_ydb_pool_actors",
        "gauge",
        "Actors registered in the actor system's pool now.",
        pool_actors,
    );
    x.family(
        "agentbox_ydb_pool_handled_events_total",
        "counter",
        "Events handled by the actor system's pool.",
        pool_events,
    );
    x.family(
        "agentbox_ydb_pool_queue_length",
        "gauge",
        "Events waiting in the actor system's pool now.",
        pool_queue,
    );
}

#[cfg(feature = "interconnect")]
fn sessions(x: &mut Exposition, shared: &Shared) {
    type Pick = fn(&crate::interconnect::SessionStats) -> Option<Value>;
    let stats: Vec<(u32, Vec<crate::interconnect::SessionStats>)> = shared
        .nodes
        .lock()
        .iter()
        .map(|ic| (ic.node_id(), ic.stats()))
        .collect();
    let families: [(&str, &str, &str, Pick); 11] = [
        (
            "agentbox_interconnect_session_connected",
            "gauge",
            "1 while the session with the peer has a connection up, 0 otherwise.",
            |s| Some(u64::from(s.connected).into()),
        ),
        (
            "agentbox_interconnect_rtt_seconds",
            "gauge",
            "The last round-trip time a ping measured (sessions with a ping back only).",
            |s| s.rtt.map(|d| d.as_secs_f64().into()),
        ),
        (
            "agentbox_interconnect_sent_bytes_total",
            "counter",
            "Bytes written to the session's sockets (headers, resends and aux packets included).",
            |s| Some(s.bytes_out.into()),
        ),
        (
            "agentbox_interconnect_received_bytes_total",
            "counter",
            "Bytes read from the session's sockets.",
            |s| Some(s.bytes_in.into()),
        ),
        (
            "agentbox_interconnect_sent_events_total",
            "counter",
            "Events that left in data packets (counted once, when first sent).",
            |s| Some(s.events_out.into()),
        ),
        (
            "agentbox_interconnect_received_events_total",
            "counter",
            "Events received and handed to the local system.",
            |s| Some(s.events_in.into()),
        ),
        (
            "agentbox_interconnect_resent_packets_total",
            "counter",
            "Data packets sent again after a reconnect.",
            |s| Some(s.packets_resent.into()),
        ),
        (
            "agentbox_interconnect_reconnects_total",
            "counter",
            "Connections made after the first one of a session (resumes).",
            |s| Some(s.reconnects.into()),
        ),
        (
            "agentbox_interconnect_refused_events_total",
            "counter",
            "Events not queued because the session held its limit for the peer.",
            |s| Some(s.events_refused.into()),
        ),
        (
            "agentbox_interconnect_queued_events",
            "gauge",
            "Events waiting to leave now.",
            |s| Some(s.queued_events.into()),
        ),
        (
            "agentbox_interconnect_unconfirmed_packets",
            "gauge",
            "Data packets sent and not yet confirmed now.",
            |s| Some(s.unconfirmed_packets.into()),
        ),
    ];
    for (name, kind, help, pick) in families {
        let samples = stats
            .iter()
            .flat_map(|(node, sessions)| {
                sessions.iter().filter_map(move |s| {
                    pick(s).map(|v| {
                        (
                            vec![
                                ("node", node.to_string()),
                                ("peer", s.peer_node.to_string()),
                            ],
                            v,
                        )
                    })
                })
            })
            .collect();
        x.family(name, kind, help, samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_line_feed() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn values_use_go_float_syntax() {
        assert_eq!(Value::Float(f64::INFINITY).to_string(), "+Inf");
        assert_eq!(Value::Float(f64::NEG_INFINITY).to_string(), "-Inf");
        assert_eq!(Value::Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Value::Float(0.25).to_string(), "0.25");
        assert_eq!(Value::Int(7).to_string(), "7");
    }
}
