//! The monitor's `GET /metrics` (feature `monitor`; this file needs `monitor-tests` for
//! its parser): the Prometheus text format as a real parser of it reads it, with the
//! figures an operations tool scrapes.
//!
//! The parser is the `openmetrics-parser` crate's Prometheus grammar (pest): it rejects a
//! malformed line, a bad label escape, a family whose HELP or TYPE comes twice or after
//! its samples, and a duplicate series; so a page that parses here parses in Prometheus.

#![cfg(feature = "monitor-tests")]

mod monitor_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use agentbox::monitor::Monitor;
use agentbox::prelude::*;
use agentbox::ActorId;
use monitor_support::{two_nodes, wait_for, PATIENCE};
use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{PrometheusType, PrometheusValue};

/// `GET /metrics`: the status, the Content-Type header and the body.
fn scrape(addr: SocketAddr) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_owned();
    (status, content_type, body.to_owned())
}

/// One parsed family: its type, and each series' labels with its value.
struct Family {
    kind: PrometheusType,
    help: String,
    series: Vec<(BTreeMap<String, String>, f64)>,
}

/// Parses the exposition with the real parser; panics with the text if it refuses it.
fn parse(text: &str) -> BTreeMap<String, Family> {
    let exposition =
        parse_prometheus(text).unwrap_or_else(|e| panic!("not the text format: {e:?}\n{text}"));
    exposition
        .families
        .into_iter()
        .map(|(name, f)| {
            let series = f
                .iter_samples()
                .map(|s| {
                    let labels = s
                        .get_labelset()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    let value = match &s.value {
                        PrometheusValue::Gauge(n) | PrometheusValue::Unknown(n) => n.as_f64(),
                        PrometheusValue::Counter(c) => c.value.as_f64(),
                        _ => panic!("{name}: neither a counter nor a gauge"),
                    };
                    (labels, value)
                })
                .collect();
            (
                name,
                Family {
                    kind: f.family_type.clone(),
                    help: f.help.clone(),
                    series,
                },
            )
        })
        .collect()
}

/// The value of `family`'s series whose labels include `labels`.
fn value(m: &BTreeMap<String, Family>, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    m.get(family)?
        .series
        .iter()
        .find(|(l, _)| {
            labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| *v)
}

struct Idle;
impl Agent for Idle {}

#[test]
fn metrics_parse_as_the_prometheus_text_format_with_every_figure() {
    use agentbox::harmonizer::Harmonizer;
    Environment::launch(|env| {
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .name("elastic")
            .thread_limits(1, 2, 3)
            .build()
            .unwrap();
        env.introduce_coop(|c| {
            c.set_binder(pool.binder());
            c.add_agent(Idle);
            c.add_agent(Idle);
        })
        .unwrap();
        let h = Harmonizer::builder()
            .dispatcher(&pool)
            .cpu_budget(2.0)
            .period(Duration::from_secs(3600))
            .build()
            .unwrap();
        h.harmonize_at(h.origin() + Duration::from_secs(1));
        for _ in 0..3 {
            send(&env.create_mbox(), 1u8).unwrap(); // nobody listens: 3 drops
        }
        let (systems, nodes) = two_nodes(env);
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        m.add_harmonizer(&h);
        for s in &systems {
            m.add_system(s).unwrap();
        }
        for n in &nodes {
            m.add_node(n);
        }
        systems[0].send(ActorId::new(1, 424_242, 0), monitor_support::Ping); // a dead letter
        let addr = m.local_addr();

        // The session 1 → 2 is up and a ping came back.
        wait_for("a connected session with an RTT", || {
            let (_, _, body) = scrape(addr);
            let m = parse(&body);
            value(
                &m,
                "agentbox_interconnect_rtt_seconds",
                &[("node", "1"), ("peer", "2")],
            )
            .is_some()
                && value(&m, "agentbox_ydb_dead_letters_total", &[("node", "1")])
                    .is_some_and(|v| v >= 1.0)
        });
        let (status, content_type, body) = scrape(addr);
        assert_eq!(status, 200);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        let m = parse(&body);

        // The naming rules: the crate's prefix, counters end in `_total`, every family
        // says what it is.
        for (name, f) in &m {
            assert!(name.starts_with("agentbox_"), "{name}");
            assert!(!f.help.is_empty(), "{name} has no HELP");
            match f.kind {
                PrometheusType::Counter => assert!(name.ends_with("_total"), "{name}"),
                PrometheusType::Gauge => assert!(!name.ends_with("_total"), "{name}"),
                _ => panic!("{name}: untyped"),
            }
        }

        // Drops by reason, every reason of DropCounts a series.
        assert!(
            value(
                &m,
                "agentbox_dropped_messages_total",
                &[("reason", "no_subscribers")]
            )
            .is_some_and(|v| v >= 3.0),
            "{body}"
        );
        for (reason, _) in env.drop_counts().by_reason() {
            assert!(
                value(&m, "agentbox_dropped_messages_total", &[("reason", reason)]).is_some(),
                "no series for the drop reason {reason}"
            );
        }
        // The two Idle agents, and the nodes' own.
        assert!(
            value(&m, "agentbox_agents", &[]).is_some_and(|n| n >= 2.0),
            "{body}"
        );

        // Per dispatcher: agents, threads, queued demands.
        let elastic = [("kind", "thread_pool"), ("dispatcher", "elastic")];
        assert_eq!(
            value(&m, "agentbox_dispatcher_agents", &elastic),
            Some(2.0),
            "{body}"
        );
        assert!(
            value(&m, "agentbox_dispatcher_threads", &elastic)
                .is_some_and(|t| (1.0..=3.0).contains(&t)),
            "{body}"
        );
        assert!(
            value(&m, "agentbox_dispatcher_queued_demands", &elastic).is_some(),
            "{body}"
        );

        // The harmonizer: exactly one state is 1 for its pool.
        let states = &m["agentbox_harmonizer_pool_state"].series;
        let of_pool: Vec<_> = states
            .iter()
            .filter(|(l, _)| l["pool"] == "elastic" && l["harmonizer"] == "0")
            .collect();
        assert_eq!(of_pool.len(), 4, "{body}");
        assert_eq!(
            of_pool.iter().filter(|(_, v)| *v == 1.0).count(),
            1,
            "{body}"
        );
        assert_eq!(
            value(
                &m,
                "agentbox_harmonizer_iterations_total",
                &[("harmonizer", "0")]
            ),
            Some(1.0)
        );

        // Sessions per peer, and the attached systems' dead letters and pools.
        let session = [("node", "1"), ("peer", "2")];
        assert_eq!(
            value(&m, "agentbox_interconnect_session_connected", &session),
            Some(1.0)
        );
        for counter in [
            "agentbox_interconnect_sent_bytes_total",
            "agentbox_interconnect_received_bytes_total",
            "agentbox_interconnect_sent_events_total",
            "agentbox_interconnect_received_events_total",
        ] {
            assert!(
                value(&m, counter, &session).is_some_and(|v| v > 0.0),
                "{counter}: {body}"
            );
        }
        for counter in [
            "agentbox_interconnect_resent_packets_total",
            "agentbox_interconnect_reconnects_total",
        ] {
            assert!(value(&m, counter, &session).is_some(), "{counter}");
        }
        assert!(
            value(
                &m,
                "agentbox_ydb_dead_letters_by_reason_total",
                &[("node", "1"), ("reason", "ActorUnknown")]
            )
            .is_some_and(|v| v >= 1.0),
            "{body}"
        );
        assert!(
            value(&m, "agentbox_ydb_pool_actors", &[("node", "2")]).is_some_and(|v| v >= 1.0),
            "{body}"
        );
        for s in &systems {
            s.stop();
        }
        env.stop();
    })
    .unwrap();
}

#[test]
fn label_values_with_quotes_backslashes_and_line_feeds_read_back_unchanged() {
    Environment::launch(|env| {
        let name = "we\"ird\\pool\nline two";
        let pool = agentbox::dispatcher::thread_pool::Builder::new()
            .name(name)
            .threads(1)
            .build()
            .unwrap();
        env.introduce_coop(|c| {
            c.set_binder(pool.binder());
            c.add_agent(Idle);
        })
        .unwrap();
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let (status, _, body) = scrape(m.local_addr());
        assert_eq!(status, 200);
        let parsed = parse(&body);
        assert_eq!(
            value(
                &parsed,
                "agentbox_dispatcher_agents",
                &[("dispatcher", name)]
            ),
            Some(1.0),
            "{body}"
        );
        env.stop();
    })
    .unwrap();
}

#[test]
fn an_environment_with_nothing_attached_still_parses() {
    Environment::launch(|env| {
        let m = Monitor::start(env, "127.0.0.1:0").unwrap();
        let (status, content_type, body) = scrape(m.local_addr());
        assert_eq!(status, 200);
        assert!(content_type.starts_with("text/plain; version=0.0.4"));
        let parsed = parse(&body);
        assert_eq!(value(&parsed, "agentbox_coops", &[]), Some(0.0), "{body}");
        assert!(parsed.contains_key("agentbox_uptime_seconds"));
        env.stop();
    })
    .unwrap();
}
