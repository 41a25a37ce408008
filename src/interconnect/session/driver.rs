//! The driver of a session: one thread that connects (with backoff), ends the session
//! when it stays without a connection for too long, and is the writer of the connection
//! of the moment: unconfirmed packets again first, then ping answers, data packets while
//! the in-flight window allows, pings and clock samples, and confirms.
//!
//! Pings follow YDB's cadence (`IssuePingRequest`): a ping request and a clock sample go
//! out with the session's traffic at most once a second (`PingPeriodicity`), and an idle
//! session sends them every ping period (3 s, YDB's `PingPeriod` flush). The writer sleeps
//! until its next deadline (ping, pure confirm, dead peer, unconfirmed data) unless woken
//! by a send, a received packet that asks for an answer, or the end of the connection.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::outbox::write_packet;
use super::{Conn, Fallout, Host, SentPacket, Session, State};
use crate::interconnect::base::NodeBase;
use crate::interconnect::error::{HandshakeError, SessionError};
use crate::interconnect::stream::IcStream;
use crate::interconnect::wire::Packet;

const MIN_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// A write gathers packets up to about this many bytes.
const BATCH: usize = 256 << 10;
/// The least time between two pings of a session with traffic (YDB's `PingPeriodicity`).
const PING_PERIODICITY: Duration = Duration::from_secs(1);
/// The longest the writer sleeps without a deadline: a safety net only, every duty has a
/// deadline or a wake-up.
const MAX_SLEEP: Duration = Duration::from_secs(30);

pub(crate) fn spawn_driver<N: Host>(node: Arc<N>, s: Arc<Session>) {
    let name = format!("ic{}->{}", node.node_id, s.peer);
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || run(&node, &s));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "interconnect: cannot start a session thread");
    }
}

enum Step {
    Write(u64, Arc<IcStream>),
    Connect,
    Fallout(Fallout),
    Stop,
}

fn run<N: Host>(node: &Arc<N>, s: &Arc<Session>) {
    let mut backoff = MIN_BACKOFF;
    let mut next_attempt = Instant::now();
    loop {
        let step = {
            let mut st = s.state.lock();
            if node.is_stopping() {
                Step::Stop
            } else {
                match &st.conn {
                    Conn::Connected { gen, stream } => Step::Write(*gen, stream.clone()),
                    Conn::None if !st.needs_connection() => {
                        st.driver_waiting = true;
                        s.cond.wait_for(&mut st, Duration::from_secs(1));
                        st.driver_waiting = false;
                        continue;
                    }
                    Conn::None => {
                        let now = Instant::now();
                        let since = *st.disconnected_since.get_or_insert(now);
                        if now.duration_since(since) > node.cfg.lost_connection_timeout {
                            Step::Fallout(s.terminate(node, &mut st, SessionError::LostConnection))
                        } else if now < next_attempt || st.accepting.is_some() {
                            let wait = next_attempt
                                .saturating_duration_since(now)
                                .max(Duration::from_millis(10));
                            st.driver_waiting = true;
                            s.cond.wait_for(&mut st, wait);
                            st.driver_waiting = false;
                            continue;
                        } else {
                            Step::Connect
                        }
                    }
                }
            }
        };
        match step {
            Step::Stop => return,
            Step::Fallout(f) => f.deliver(node, s.peer),
            Step::Write(gen, stream) => {
                backoff = MIN_BACKOFF;
                write_loop(node, s, gen, &stream);
            }
            Step::Connect => match N::connect(node, s) {
                Ok(fallout) => {
                    backoff = MIN_BACKOFF;
                    fallout.deliver(node, s.peer);
                }
                Err(failed) => {
                    let e = failed.error;
                    let fallout = {
                        let mut st = s.state.lock();
                        if failed.stale || e.is_transient() || matches!(e, HandshakeError::Stopping)
                        {
                            // A stale attempt's failure says nothing of the session now.
                            st.stats.record_error(SessionError::Handshake(e));
                            None
                        } else if let HandshakeError::SessionMismatch(_) = e {
                            // The peer lost our session (it restarted): ours ends, and a new
                            // one starts at once with the events that never left.
                            Some(s.restart(node, &mut st, SessionError::PeerRestarted))
                        } else {
                            // Logged as the session ends (`Session::end`).
                            Some(s.terminate(node, &mut st, SessionError::Handshake(e)))
                        }
                    };
                    match fallout {
                        Some(f) => {
                            f.deliver(node, s.peer);
                            next_attempt = Instant::now();
                        }
                        None => {
                            // Some jitter, so that two nodes do not retry in lockstep.
                            let jitter = Duration::from_micros(node.random_u64() % 5_000);
                            next_attempt = Instant::now() + backoff + jitter;
                            backoff = (backoff * 2).min(MAX_BACKOFF);
                        }
                    }
                }
            },
        }
    }
}

/// Writes to connection `gen` until it is lost or replaced.
fn write_loop<N: Host>(node: &Arc<N>, s: &Arc<Session>, gen: u64, stream: &IcStream) {
    let cfg = &node.cfg;
    let mut batch = Vec::with_capacity(BATCH + Packet::HEADER_LEN + Packet::MAX_PAYLOAD);
    let mut resend = true;
    let mut w: &IcStream = stream;
    let mut written = 0u64;
    // This driver holds the writer's turn (`State::writing`, see `direct`).
    let mut mine = false;
    loop {
        batch.clear();
        let mut events_out = 0;
        {
            let mut st = s.state.lock();
            if std::mem::take(&mut mine) {
                st.writing = false;
            }
            st.stats.bytes_out += std::mem::take(&mut written);
            if st.gen != gen || node.is_stopping() {
                return;
            }
            if st.writing {
                // A sender writes its packet: ours would overtake it.
                st.driver_held = true;
                st.driver_waiting = true;
                s.cond.wait_for(&mut st, Duration::from_millis(1));
                st.driver_waiting = false;
                st.driver_held = false;
                continue;
            }
            let mode = st.checksum;
            let now = Instant::now();
            if let Some(err) = dead_peer(node, s, &st, now) {
                let f = s.lose(node, &mut st, gen, err);
                drop(st);
                f.deliver(node, s.peer);
                return;
            }
            let confirm = s.confirm();
            if resend {
                resend = false;
                let mut n = 0;
                for p in &st.unconfirmed {
                    write_packet(&mut batch, mode, confirm, p.serial, &p.payload);
                    n += 1;
                }
                st.stats.packets_resent += n;
                // No ping yet on this connection: the first goes out at once.
                st.last_ping = None;
                st.ready_gen = gen;
            }
            for stamp in std::mem::take(&mut st.ping_responses) {
                let p = Packet::ping_response(confirm, stamp);
                write_packet(&mut batch, mode, confirm, p.serial, &[]);
            }
            while batch.len() < BATCH && st.unconfirmed_bytes < cfg.inflight_window {
                let mut payload = st.payload_buffer();
                let mut events = st.events_buffer();
                st.out
                    .fill(&mut payload, Packet::SENDER_PAYLOAD, &mut events);
                if payload.is_empty() {
                    st.spare.push(payload);
                    st.spare_events.push(events);
                    break;
                }
                events_out += events.len() as u64;
                st.next_serial += 1;
                let serial = st.next_serial;
                write_packet(&mut batch, mode, confirm, serial, &payload);
                if st.unconfirmed.is_empty() {
                    st.confirm_progress_at = now;
                }
                st.unconfirmed_bytes += payload.len();
                st.unconfirmed.push_back(SentPacket {
                    serial,
                    payload,
                    events,
                });
            }
            st.stats.events_out += events_out;
            let confirm_due = confirm > st.confirm_sent;
            let traffic = !batch.is_empty() || confirm_due;
            add_pings(node, &mut st, &mut batch, confirm, now, traffic);
            if batch.is_empty() && confirm_due {
                let waited = now.duration_since(st.last_confirm_at);
                if waited >= cfg.confirm_delay {
                    write_packet(&mut batch, mode, confirm, 0, &[]);
                }
            }
            if batch.is_empty() {
                let mut wait = st.last_ping.map_or(Duration::ZERO, |t| {
                    (t + cfg.ping_period).saturating_duration_since(now)
                });
                if confirm_due {
                    wait = wait.min(cfg.confirm_delay);
                }
                wait = wait.min(dead_peer_wait(node, s, &st, now));
                // With traffic coming in, wake up to confirm on time by ourselves: the
                // reader then need not wake us for every packet (profile: one wake-up of
                // this thread per packet received, for a confirm that usually goes out
                // with the next packet anyway).
                let rx_ago = node
                    .now_nanos()
                    .saturating_sub(s.last_rx.load(Ordering::Relaxed));
                if rx_ago < PING_PERIODICITY.as_nanos() as u64 {
                    wait = wait.min(cfg.confirm_delay);
                }
                wait = wait.clamp(Duration::from_millis(1), MAX_SLEEP);
                st.trim_spares();
                st.driver_waiting = true;
                st.driver_wake_at = Some(now + wait);
                s.cond.wait_for(&mut st, wait);
                st.driver_wake_at = None;
                st.driver_waiting = false;
                continue;
            }
            st.confirm_sent = confirm;
            st.last_confirm_at = now;
            st.writing = true;
            mine = true;
        }
        if let Err(e) = w.write_all(&batch) {
            let f = {
                let mut st = s.state.lock();
                st.writing = false;
                s.lose(node, &mut st, gen, SessionError::io(&e))
            };
            f.deliver(node, s.peer);
            return;
        }
        written = batch.len() as u64;
    }
}

/// Appends a ping request and a clock sample if they are due (YDB's cadence: with
/// traffic at most once a `PING_PERIODICITY`, idle once a ping period); the writer of the
/// moment calls it (the driver, or a sender writing its own packet, see `direct`).
pub(super) fn add_pings(
    node: &NodeBase,
    st: &mut State,
    batch: &mut Vec<u8>,
    confirm: u64,
    now: Instant,
    traffic: bool,
) {
    let cfg = &node.cfg;
    let busy_period = PING_PERIODICITY.min(cfg.ping_period);
    let since_ping = st.last_ping.map(|t| now.duration_since(t));
    let ping_due = since_ping.is_none_or(|d| d >= cfg.ping_period || (traffic && d >= busy_period));
    if ping_due {
        let mode = st.checksum;
        st.last_ping = Some(now);
        let stamp = node.now_nanos() & !Packet::PING_REQUEST_MASK;
        let ping = Packet::ping_request(confirm, stamp);
        write_packet(batch, mode, confirm, ping.serial, &[]);
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let clock = Packet::clock(confirm, micros & !(7 << 61));
        write_packet(batch, mode, confirm, clock.serial, &[]);
    }
}

/// Whether the peer is dead: silent for the dead-peer timeout (YDB's rule), or keeping
/// data packets unconfirmed that long while it may still send (pings, say).
fn dead_peer(node: &NodeBase, s: &Session, st: &State, now: Instant) -> Option<SessionError> {
    let timeout = node.cfg.dead_peer_timeout;
    let silent = node
        .now_nanos()
        .saturating_sub(s.last_rx.load(Ordering::Relaxed));
    if silent > timeout.as_nanos() as u64 {
        Some(SessionError::DeadPeer)
    } else if !st.unconfirmed.is_empty() && now.duration_since(st.confirm_progress_at) > timeout {
        Some(SessionError::NotConfirming)
    } else {
        None
    }
}

/// How long until [`dead_peer`] may say yes (a little after its deadlines).
fn dead_peer_wait(node: &NodeBase, s: &Session, st: &State, now: Instant) -> Duration {
    let timeout = node.cfg.dead_peer_timeout;
    let silent = Duration::from_nanos(
        node.now_nanos()
            .saturating_sub(s.last_rx.load(Ordering::Relaxed)),
    );
    let mut wait = timeout.saturating_sub(silent);
    if !st.unconfirmed.is_empty() {
        let waited = now.duration_since(st.confirm_progress_at);
        wait = wait.min(timeout.saturating_sub(waited));
    }
    wait + Duration::from_millis(1)
}
