//! A peer process killed: this test binary runs itself as a child process (with
//! `AGENTBOX_IC_CHILD` set) that runs node 2; the parent runs node 1, talks to node 2 until
//! an echo works, subscribes to the session, kills the child, and queues tracked events for
//! node 2. The subscriber gets `NodeDisconnected` and the events come back
//! `Undelivered(Disconnected)` once the lost-connection timeout ends the session.
//!
//! The child exits by itself when its stdin closes (the parent died) or after two minutes.
//!
//! And what such an outage shows an operator: the events a session drops when its peer
//! stays unreachable are counted as `unreachable` drops and logged once with their number.

#![cfg(feature = "interconnect")]

mod interconnect_support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use agentbox::actors::*;
use agentbox::interconnect::{InterconnectSetup, Subscribe};
use agentbox::{ActorId, WrappedEnv};
use interconnect_support::*;

const CHILD: &str = "AGENTBOX_IC_CHILD";
const PARENT_PORT: &str = "AGENTBOX_IC_PARENT_PORT";
const PORT_LINE: &str = "AGENTBOX_IC_CHILD_PORT=";

fn echo_service() -> ActorId {
    ActorId::service(2, b"echo").unwrap()
}

/// Node 2, in the child process: an echo service, until stdin closes.
#[test]
fn child_entry() {
    let Some(parent_port) = std::env::var_os(PARENT_PORT) else {
        return; // only meaningful inside the child process
    };
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let parent_port: u16 = parent_port.to_str().unwrap().parse().unwrap();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l, port) = bind();
    let setup =
        remote_events(InterconnectSetup::new(names(&[(1, parent_port), (2, port)])).listener(l));
    let node = start_node(w.environment(), 2, setup);
    let echo = node.system.register(echo(None)).unwrap();
    node.system
        .register_local_service(echo_service(), echo)
        .unwrap();
    // On a line of its own (libtest may have started one: "test child_entry ... ").
    println!("\n{PORT_LINE}{port}");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        while let Ok(n) = std::io::stdin().read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(120));
    w.stop_then_join().unwrap();
}

/// Runs node 2 in a child process, talks to it, kills it, then queues five events with
/// `flags` (which include `TRACK_DELIVERY`) for it; checks that they come back
/// `Undelivered(Disconnected)` (with `unsure: false` unless `unsure_ok`) and that the
/// subscriber gets `NodeDisconnected`.
fn kill_the_peer_then_send(flags: EventFlags, unsure_ok: bool) {
    let (l1, p1) = bind();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env(PARENT_PORT, p1.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Kills the child if the test fails before it does.
    struct Reaper(std::process::Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = Reaper(child);
    let (port_tx, port_rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find(PORT_LINE) {
                let port = line[at + PORT_LINE.len()..].trim().parse::<u16>();
                let _ = port_tx.send(port.unwrap());
            }
        }
    });
    let p2 = next(&port_rx, "the child's port");

    let w = WrappedEnv::new(|_| {}).unwrap();
    let setup = remote_events(InterconnectSetup::new(names(&[(1, p1), (2, p2)])).listener(l1))
        .ping_period(Duration::from_millis(500))
        .dead_peer_timeout(Duration::from_secs(2))
        .lost_connection_timeout(Duration::from_secs(2));
    let node = start_node(w.environment(), 1, setup);
    let (tx, rx) = channel();
    let me = node.system.register(recorder(tx)).unwrap();

    // An echo through node 2 works.
    node.system
        .send_with(echo_service(), me, Ping(1), EventFlags::TRACK_DELIVERY, 1);
    let got = next(&rx, "the echo");
    assert_eq!((got.what, got.cookie), (What::Pong(1), 1));
    let proxy = ActorId::interconnect_proxy(2);
    node.system
        .send_with(proxy, me, Subscribe, EventFlags::empty(), 41);
    let got = next(&rx, "NodeConnected");
    assert_eq!(
        (got.what, got.sender, got.cookie),
        (What::Connected(2), proxy, 41)
    );

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // Once node 1 has seen the connection go, new events should wait in the session's
    // queue: no connection can take them, so they are not "unsure" (the test below checks
    // that with `TRACK_DELIVERY` alone).
    wait_until("node 1 sees the connection closed", || {
        !node.ic.is_connected(2)
    });
    let cookies = 100..105;
    for c in cookies.clone() {
        node.system.send_with(echo_service(), me, Ping(c), flags, c);
    }

    let mut disconnected = false;
    let mut undelivered = Vec::new();
    let mut unsure = 0;
    while !disconnected || undelivered.len() < cookies.clone().count() {
        // The lost-connection timeout (2 s) ends the session, then everything comes.
        let Ok(got) = rx.recv_timeout(SOON) else {
            panic!(
                "disconnected: {disconnected}, undelivered: {undelivered:?}; session: {:?}",
                node.ic.session_stats(2)
            );
        };
        match got.what {
            What::Disconnected(2) => {
                assert_eq!((got.sender, got.cookie), (proxy, 41));
                assert!(!disconnected, "a second NodeDisconnected");
                disconnected = true;
            }
            What::Undelivered(u) => {
                assert_eq!(
                    u,
                    Undelivered {
                        source_type: Ping::EVENT_TYPE,
                        reason: UndeliveredReason::Disconnected,
                        unsure: unsure_ok && u.unsure,
                    }
                );
                assert_eq!(got.sender, echo_service());
                undelivered.push(got.cookie);
                unsure += usize::from(u.unsure);
            }
            _ => panic!("unexpected {got:?}"),
        }
    }
    assert_eq!(undelivered, cookies.collect::<Vec<_>>());
    println!("{unsure} of the Undelivered events said unsure");
    let s = node.ic.session_stats(2).unwrap();
    assert!(s.sessions_ended >= 1 && !s.connected, "{s:?}");
    assert_eq!(s.queued_events, 0);
    w.stop_then_join().unwrap();
}

#[test]
fn a_killed_peer_ends_the_session_with_node_disconnected_and_undelivered_events() {
    // With GENERATE_UNSURE_UNDELIVERED every event comes back, sure or not.
    let flags = EventFlags::TRACK_DELIVERY | EventFlags::GENERATE_UNSURE_UNDELIVERED;
    kill_the_peer_then_send(flags, true);
}

#[test]
fn events_queued_after_the_connection_is_lost_come_back_undelivered_and_sure() {
    kill_the_peer_then_send(EventFlags::TRACK_DELIVERY, false);
}

/// The warnings (and errors) logged through `tracing` in this process, each as its fields
/// (`name=value`, the message first).
struct Warnings(Mutex<Vec<String>>);

impl Warnings {
    /// The process's subscriber, installed on first use.
    fn installed() -> &'static Warnings {
        static W: OnceLock<&'static Warnings> = OnceLock::new();
        W.get_or_init(|| {
            let w: &'static Warnings = Box::leak(Box::new(Warnings(Mutex::new(Vec::new()))));
            tracing::subscriber::set_global_default(Forward(w)).expect("no other subscriber");
            w
        })
    }

    fn matching(&self, part: &str) -> Vec<String> {
        let all = self.0.lock().unwrap();
        all.iter().filter(|l| l.contains(part)).cloned().collect()
    }
}

struct Forward(&'static Warnings);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Forward {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        *meta.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut f = Fields(String::new());
        event.record(&mut f);
        self.0 .0.lock().unwrap().push(f.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The rule: an event a session drops because its peer stayed unreachable (no connection
/// within the lost-connection timeout) is counted as an `unreachable` drop of the
/// environment, never as `no_subscribers` (nobody listens on the dead letters here), and
/// in the session's `events_not_delivered`; the session's end is logged once, a warning
/// with their number. (A user who killed node 2 for longer than the timeout saw 10 011
/// queued jobs dropped with nothing logged, counted as `no_subscribers`.)
#[test]
fn the_events_an_unreachable_peer_never_got_are_counted_as_unreachable_and_logged_once() {
    const EVENTS: u64 = 137;
    let warnings = Warnings::installed();
    let w = WrappedEnv::new(|_| {}).unwrap();
    let (l1, p1) = bind();
    let (_, nobody) = bind(); // closed at once: node 2 never answers
    let setup = remote_events(InterconnectSetup::new(names(&[(1, p1), (2, nobody)])).listener(l1))
        .lost_connection_timeout(Duration::from_secs(1));
    let node = start_node(w.environment(), 1, setup);
    let (tx, _rx) = channel();
    let me = node.system.register(recorder(tx)).unwrap();
    let before = SystemTime::now();
    for n in 0..EVENTS {
        let to = ActorId::new(2, 5, 0);
        node.system
            .send_with(to, me, Ping(n), EventFlags::empty(), n);
    }
    // The drops are counted once the session's end has reported its events (after
    // `sessions_ended` shows it).
    wait_until("the session ends and its events are counted", || {
        node.ic.session_stats(2).unwrap().sessions_ended == 1
            && w.environment().drop_counts().total() >= EVENTS
    });
    let drops = w.environment().drop_counts();
    assert_eq!(drops.unreachable, EVENTS, "{drops:?}");
    assert_eq!(drops.no_subscribers, 0, "{drops:?}");
    assert_eq!(drops.total(), EVENTS, "{drops:?}");
    let s = node.ic.session_stats(2).unwrap();
    assert_eq!(s.events_not_delivered, EVENTS, "{s:?}");
    assert_eq!(
        s.last_error,
        Some(agentbox::interconnect::SessionError::LostConnection)
    );
    let at = s.last_error_at.expect("when the session ended");
    assert!(before <= at && at <= SystemTime::now(), "{s:?}");
    let logged = warnings.matching(&format!("not_delivered={EVENTS} "));
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("peer=2 "), "{logged:?}");
    w.stop_then_join().unwrap();
}
