//! One session with one peer node: the events waiting to leave, the data packets kept
//! until confirmed, the connection of the moment, the subscribers. See the module README
//! for the protocol.
//!
//! Locks: `state` (everything of the session but the input side) and `input` (the reader
//! side: last serial processed, events being assembled). A reader holds `input` while it
//! processes and delivers a batch, then takes `state` alone; nothing takes `input` while
//! holding `state`, so the two never nest the other way. Events that fail (a session that
//! ends) are collected under `state` and reported after it is released ([`Fallout`]), since
//! sending may come back into a session; notices to subscribers are queued under `state`
//! and sent in order by one thread at a time ([`Session::flush_notices`]).

mod direct;
mod driver;
mod input;
mod lifecycle;
mod outbox;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::net::Shutdown;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::base::NodeBase;
use super::error::ConnectFailed;
use super::error::SessionError;
use super::events::{NodeConnected, NodeDisconnected};
use super::stats::SessionStats;
use super::stream::IcStream;
use super::wire::{Packet, PacketChecksum};
use crate::actors::{ActorId, Body, DeadLetterReason, EventFlags, EventHandle};

pub(crate) use driver::spawn_driver;
pub(crate) use input::spawn_reader;
pub(crate) use lifecycle::{NewPeer, PeerProgram};
pub(crate) use outbox::{outbox_meta, OutEvent, OutMeta, Outbox, SentPacket};

/// Confirmed packets' payload buffers (and event lists) are all kept for reuse while a
/// session streams, so that a steady stream allocates no packet buffers (bounded by the
/// in-flight window, since only sent packets come back).
///
/// Profile (`ic_small_events`, 64 Ki events in flight, ~1 200 packets): with 64 kept, the
/// rest of each confirmed run was freed on the reader's thread and allocated again on the
/// writer's: ~56 instructions per event in `malloc`/`free` and ~1 500 `mprotect` calls per
/// run on the writer's thread, its heap growing and shrinking. A writer going idle (nothing
/// queued or unconfirmed) trims the spares back to this many, on its own thread.
pub(crate) const SPARE_IDLE: usize = 64;

/// A subscriber list that grows to this length, and to each power of two above it, drops
/// the local actors that are gone (passed away, or an answer id already answered): a
/// subscriber that never unsubscribes is not kept for the session's life, and the list
/// stays within twice its live subscribers or this, whichever is more.
const PRUNE_SUBSCRIBERS_AT: usize = 64;

/// What a session needs of its node: the node's [`NodeBase`] (its target), the other
/// sessions of the node, and the outgoing handshake of the driver. The node
/// (`node::NodeShared`) implements it; the session layer names nothing above it and is
/// generic over its node, statically dispatched (one instance in the crate).
pub(crate) trait Host: Deref<Target = NodeBase> + Send + Sync + Sized + 'static {
    /// The session with `peer`, if the node has one.
    fn session(&self, peer: u32) -> Option<Arc<Session>>;

    /// An outgoing handshake for `s` (`handshake::connect`): on success the connection is
    /// installed and what that left to do is returned.
    fn connect(node: &Arc<Self>, s: &Arc<Session>) -> Result<Fallout, ConnectFailed>;
}

/// The connection a session has now.
pub(crate) enum Conn {
    None,
    Connected { gen: u64, stream: Arc<IcStream> },
}

/// Everything of a session but its input side (see the module docs).
pub(crate) struct State {
    /// This side's session virtual id (fresh for every new session).
    pub(crate) self_id: ActorId,
    /// The peer's session virtual id; empty until the session's first handshake.
    pub(crate) peer_id: ActorId,
    /// The packet checksum of this session (from its first handshake).
    pub(crate) checksum: PacketChecksum,
    /// The peer's program and the last handshake serial seen from it, kept across
    /// sessions (see `lifecycle`).
    pub(crate) peer_program: Option<PeerProgram>,
    /// Whether the session's first handshake is done (a lost connection is then resumed).
    pub(crate) established: bool,
    /// Whether the session runs TLS (decided by its first handshake; its resumes do too).
    pub(crate) encrypted: bool,
    pub(crate) out: Outbox,
    /// The last data serial used.
    pub(crate) next_serial: u64,
    pub(crate) unconfirmed: VecDeque<SentPacket>,
    pub(crate) unconfirmed_bytes: usize,
    /// Since when the oldest unconfirmed packet has waited without the peer confirming
    /// anything (reset by every confirm that drops packets and by a new connection).
    pub(crate) confirm_progress_at: Instant,
    /// The confirm carried by the last packet sent.
    pub(crate) confirm_sent: u64,
    pub(crate) last_confirm_at: Instant,
    pub(crate) conn: Conn,
    /// Generation of connections: every installed connection gets the next one.
    pub(crate) gen: u64,
    /// Tokens of handshakes in progress.
    pub(crate) attempts: u64,
    /// Our outgoing handshake in progress (past the TCP connect).
    pub(crate) connecting: Option<u64>,
    /// An incoming handshake in progress.
    pub(crate) accepting: Option<u64>,
    /// Incoming new-session handshakes waiting for the peer's proof (secret or TLS): our
    /// own connect gives way meanwhile (`handshake/takeover.rs`).
    pub(crate) proving: u32,
    /// When the connection of the moment was installed by our own connect (`None` if it
    /// was accepted): see `handshake/takeover.rs`, `resume_gate`.
    pub(crate) outgoing_since: Option<Instant>,
    /// Since when the session has wanted a connection and had none.
    pub(crate) disconnected_since: Option<Instant>,
    pub(crate) driver_started: bool,
    pub(crate) driver_waiting: bool,
    /// The driver waits for another writer to finish (see `direct`).
    pub(crate) driver_held: bool,
    /// Until when the waiting driver sleeps (a reader wakes it for a confirm only if that
    /// is later than the confirm delay).
    pub(crate) driver_wake_at: Option<Instant>,
    /// Someone writes packets outside the lock (the driver or a sender, see `direct`).
    pub(crate) writing: bool,
    /// The connection whose resends the driver has written: senders may write to it.
    pub(crate) ready_gen: u64,
    /// A sender's packet buffer, kept for the next.
    pub(crate) direct_buf: Vec<u8>,
    /// When the last ping request went out on this connection (`None`: none yet).
    pub(crate) last_ping: Option<Instant>,
    /// Subscribers and their cookies; `announced` says whether NodeConnected was sent.
    pub(crate) subscribers: Vec<Subscriber>,
    /// Notices for subscribers, in the order they were decided: (actor, cookie,
    /// connected). Sent by one thread at a time (`notifying`), outside the lock, so that a
    /// subscriber never gets a NodeConnected after the NodeDisconnected that followed it.
    notices: VecDeque<(ActorId, u64, bool)>,
    notifying: bool,
    /// Ping requests to answer (their stamps).
    pub(crate) ping_responses: Vec<u64>,
    /// Payload buffers of confirmed packets, for the next ones.
    pub(crate) spare: Vec<Vec<u8>>,
    /// The event lists of confirmed packets (emptied), for the next ones.
    pub(crate) spare_events: Vec<Vec<OutMeta>>,
    pub(crate) stats: SessionStats,
}

pub(crate) struct Subscriber {
    pub(crate) actor: ActorId,
    pub(crate) cookie: u64,
    pub(crate) announced: bool,
}

/// The input side: the last data serial processed and the events being assembled.
pub(crate) struct Input {
    /// The session epoch these values belong to (see [`Session::epoch`]).
    pub(crate) epoch: u64,
    pub(crate) last_processed: u64,
    pub(crate) assembly: ahash::AHashMap<u16, Vec<u8>>,
    /// The bytes of all the partial events in `assembly`.
    pub(crate) assembly_bytes: usize,
}

/// One session with one peer node.
pub(crate) struct Session {
    pub(crate) peer: u32,
    pub(crate) state: Mutex<State>,
    /// The driver (writer) waits here for work.
    pub(crate) cond: Condvar,
    pub(crate) input: Mutex<Input>,
    /// The generation of the connection whose reader may process input.
    pub(crate) reader_gen: AtomicU64,
    /// Bumped when a session ends, so that the input side starts over.
    pub(crate) epoch: AtomicU64,
    /// A copy of `Input::last_processed` for the writer and the handshakes, with the
    /// epoch it belongs to (read it with [`confirm`](Self::confirm)).
    processed: Mutex<(u64, u64)>,
    /// When the last bytes came from the peer (nanoseconds since the node started).
    pub(crate) last_rx: AtomicU64,
}

/// What to do once the state lock is released: report the events that were not
/// delivered, and send the notices queued for subscribers (`State::notices`).
#[derive(Default)]
#[must_use = "deliver it after releasing the lock"]
pub(crate) struct Fallout {
    failed: Vec<(EventHandle, bool)>,
    /// Notices were queued.
    notify: bool,
    /// The session ended so: logged once, with the lock released (a `tracing`
    /// subscriber is user code).
    ended: Option<SessionError>,
}

impl Fallout {
    pub(crate) fn deliver<N: Host>(self, node: &Arc<N>, peer: u32) {
        if let Some(err) = &self.ended {
            lifecycle::log_end(node, peer, err, &self.failed);
        }
        let sys = &node.system.0;
        for (h, unsure) in self.failed {
            sys.not_delivered_as(h, crate::actors::DeadLetterReason::Disconnected, unsure);
        }
        if self.notify {
            if let Some(s) = node.session(peer) {
                s.flush_notices(node);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.failed.is_empty() && !self.notify && self.ended.is_none()
    }
}

impl Session {
    pub(crate) fn new(peer: u32, self_id: ActorId) -> Session {
        Session {
            peer,
            state: Mutex::new(State {
                self_id,
                peer_id: ActorId::EMPTY,
                checksum: PacketChecksum::Crc32c,
                peer_program: None,
                established: false,
                encrypted: false,
                out: Outbox::default(),
                next_serial: 0,
                unconfirmed: Default::default(),
                unconfirmed_bytes: 0,
                confirm_progress_at: Instant::now(),
                confirm_sent: 0,
                last_confirm_at: Instant::now(),
                conn: Conn::None,
                gen: 0,
                attempts: 0,
                connecting: None,
                accepting: None,
                proving: 0,
                outgoing_since: None,
                disconnected_since: None,
                driver_started: false,
                driver_waiting: false,
                driver_held: false,
                driver_wake_at: None,
                writing: false,
                ready_gen: 0,
                direct_buf: Vec::new(),
                last_ping: None,
                subscribers: Vec::new(),
                notices: VecDeque::new(),
                notifying: false,
                ping_responses: Vec::new(),
                spare: Vec::new(),
                spare_events: Vec::new(),
                stats: SessionStats {
                    peer_node: peer,
                    session_id: self_id,
                    ..SessionStats::default()
                },
            }),
            cond: Condvar::new(),
            input: Mutex::new(Input {
                epoch: 0,
                last_processed: 0,
                assembly: Default::default(),
                assembly_bytes: 0,
            }),
            reader_gen: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            processed: Mutex::new((0, 0)),
            last_rx: AtomicU64::new(0),
        }
    }

    /// The last data serial processed in the current session (the confirm to send, and a
    /// resume's `NextPacket`). A value published for an ended session reads as 0: a reader
    /// still finishing the old session's batch may publish after the session ended.
    pub(crate) fn confirm(&self) -> u64 {
        let (epoch, last) = *self.processed.lock();
        if epoch == self.epoch.load(Ordering::Acquire) {
            last
        } else {
            0
        }
    }

    /// Publishes the input side's last serial processed, for session `epoch`.
    pub(crate) fn publish_processed(&self, epoch: u64, last: u64) {
        *self.processed.lock() = (epoch, last);
    }

    /// Queues an event for the peer (the remote router's path). Its body was encoded by
    /// the caller, outside the lock. An event beyond the queue's limits (events or bytes)
    /// is not queued: it follows the non-delivery rules at once, reason `Overloaded`.
    ///
    /// The usual event (no refusal, no subscription) builds no `Fallout` and wakes the
    /// driver only if it waits (profile, `ic_small_events`: the empty fallout, the tuple out
    /// of the locked block and the out-of-line wake were ~40 of the ~220 instructions per
    /// event queued).
    pub(crate) fn enqueue<N: Host>(self: &Arc<Self>, node: &Arc<N>, meta: OutMeta, body: &[u8]) {
        let subscribe = meta.flags.contains(EventFlags::SUBSCRIBE_ON_SESSION);
        let (sender, cookie) = (meta.sender, meta.cookie);
        let mut st = self.state.lock();
        let refused = if node.is_stopping() {
            // The session has ended for good (see `shutdown`): nothing would send it.
            Some(DeadLetterReason::Disconnected)
        } else if st.out.len() >= node.cfg.max_queued_events
            || st.out.bytes() + Outbox::cost(body.len()) > node.cfg.max_queued_bytes
        {
            st.stats.events_refused += 1;
            Some(DeadLetterReason::Overloaded)
        } else {
            None
        };
        if let Some(reason) = refused {
            drop(st);
            let ev = OutEvent {
                meta,
                body: Body::from_slice(body),
            };
            node.system.0.not_delivered(ev.into_handle(), reason);
            return;
        }
        st.out.push(meta, body);
        let before = st.subscribers.len();
        let fallout = if subscribe && !sender.is_empty() {
            Some(st.subscribe(sender, cookie, false))
        } else {
            None
        };
        let prune = st.subscribers.len() > before && st.prune_due();
        let direct = self.take_direct_write(node, &mut st);
        if direct.is_none() && (!st.driver_started || st.driver_waiting) {
            self.wake(node, &mut st);
        }
        drop(st);
        if prune {
            self.prune_subscribers(node);
        }
        if let Some(w) = direct {
            self.direct_write(node, w);
        }
        if let Some(f) = fallout.filter(|f| !f.is_empty()) {
            f.deliver(node, self.peer);
        }
    }

    /// Subscribes `actor` (explicitly, or through `SUBSCRIBE_ON_SESSION`).
    pub(crate) fn subscribe<N: Host>(self: &Arc<Self>, node: &Arc<N>, actor: ActorId, cookie: u64) {
        let fallout = {
            let mut st = self.state.lock();
            if node.is_stopping() {
                st.notices.push_back((actor, cookie, false));
                drop(st);
                self.flush_notices(node);
                return;
            }
            let before = st.subscribers.len();
            let f = st.subscribe(actor, cookie, true);
            self.wake(node, &mut st);
            (f, st.subscribers.len() > before && st.prune_due())
        };
        if fallout.1 {
            self.prune_subscribers(node);
        }
        fallout.0.deliver(node, self.peer);
    }

    /// Drops the subscribers that are actors of this node no longer registered (see
    /// [`PRUNE_SUBSCRIBERS_AT`]); asked outside the lock, since the actor table has locks
    /// of its own. A subscriber of another node stays until it unsubscribes or the
    /// session ends.
    fn prune_subscribers(&self, node: &NodeBase) {
        let local: Vec<ActorId> = {
            let st = self.state.lock();
            st.subscribers
                .iter()
                .map(|s| s.actor)
                .filter(|a| a.node_id() == 0 || a.node_id() == node.node_id)
                .collect()
        };
        let gone: ahash::AHashSet<ActorId> = local
            .into_iter()
            .filter(|&a| !node.system.is_registered(a))
            .collect();
        if !gone.is_empty() {
            self.state
                .lock()
                .subscribers
                .retain(|s| !gone.contains(&s.actor));
        }
    }

    /// Sends the queued notices, unless another thread is sending them (it then sends
    /// these too): one sender at a time keeps their order.
    pub(crate) fn flush_notices(&self, node: &NodeBase) {
        let mut batch = {
            let mut st = self.state.lock();
            if st.notifying || st.notices.is_empty() {
                return;
            }
            st.notifying = true;
            std::mem::take(&mut st.notices)
        };
        let me = ActorId::interconnect_proxy(self.peer);
        let flags = EventFlags::empty();
        loop {
            for (actor, cookie, connected) in batch.drain(..) {
                let node_id = self.peer;
                if connected {
                    node.system
                        .send_with(actor, me, NodeConnected { node_id }, flags, cookie);
                } else {
                    node.system
                        .send_with(actor, me, NodeDisconnected { node_id }, flags, cookie);
                }
            }
            let mut st = self.state.lock();
            if st.notices.is_empty() {
                st.notifying = false;
                return;
            }
            std::mem::swap(&mut batch, &mut st.notices);
        }
    }

    pub(crate) fn unsubscribe(&self, actor: ActorId) {
        self.state.lock().subscribers.retain(|s| s.actor != actor);
    }

    /// Starts the driver if it is not running, or wakes it if it waits.
    pub(crate) fn wake<N: Host>(self: &Arc<Self>, node: &Arc<N>, st: &mut State) {
        if !st.driver_started {
            st.driver_started = true;
            spawn_driver(node.clone(), self.clone());
        } else if st.driver_waiting {
            st.driver_waiting = false;
            self.cond.notify_one();
        }
    }

    pub(crate) fn stats(&self) -> SessionStats {
        let st = self.state.lock();
        let mut s = st.stats.clone();
        s.session_id = st.self_id;
        s.peer_session_id = st.peer_id;
        s.connected = matches!(st.conn, Conn::Connected { .. });
        s.tls = st.encrypted;
        s.queued_events = st.out.len();
        s.queued_bytes = st.out.bytes();
        s.unconfirmed_packets = st.unconfirmed.len();
        s.subscribers = st.subscribers.len();
        s
    }

    /// Installs a connection whose handshake is done: it replaces any other, the peer's
    /// `peer_next` confirms what it already processed, and a reader starts. The writer
    /// (the driver) sends the unconfirmed packets again first.
    pub(crate) fn install<N: Host>(
        self: &Arc<Self>,
        node: &Arc<N>,
        st: &mut State,
        stream: IcStream,
        peer_next: u64,
    ) -> Fallout {
        if let Conn::Connected { stream, .. } = &st.conn {
            drop_for_resume(stream);
        }
        // The handshake's deadlines are over: the writer may block up to the dead-peer
        // timeout, the reader (see `input`) without limit.
        let _ = stream.set_write_timeout(Some(node.cfg.dead_peer_timeout));
        st.gen += 1;
        let gen = st.gen;
        let stream = Arc::new(stream);
        let reader = stream.clone();
        st.encrypted = stream.is_tls();
        st.conn = Conn::Connected { gen, stream };
        self.reader_gen.store(gen, Ordering::Release);
        self.last_rx.store(node.now_nanos(), Ordering::Relaxed);
        st.confirm(peer_next);
        st.confirm_progress_at = Instant::now();
        if st.established {
            st.stats.reconnects += 1;
        }
        st.established = true;
        st.connecting = None;
        st.accepting = None;
        st.outgoing_since = None;
        st.disconnected_since = None;
        st.confirm_sent = 0;
        let mut fallout = Fallout::default();
        for s in &mut st.subscribers {
            if !s.announced {
                s.announced = true;
                st.notices.push_back((s.actor, s.cookie, true));
                fallout.notify = true;
            }
        }
        spawn_reader(node.clone(), self.clone(), (gen, st.checksum), reader);
        self.wake(node, st);
        fallout
    }

    /// The connection `gen` is gone (if it is still the current one): it is closed, and
    /// the session either waits for a new one or, for `err` that ends it, ends.
    pub(crate) fn lose(
        &self,
        node: &NodeBase,
        st: &mut State,
        gen: u64,
        err: SessionError,
    ) -> Fallout {
        if let Conn::Connected { gen: g, stream } = &st.conn {
            if *g != gen {
                return Fallout::default();
            }
            drop_for_resume(stream);
            st.conn = Conn::None;
            // A new generation: the connection's writer and reader stop at their next
            // look, and what is queued from now on waits for the next connection.
            st.gen += 1;
            self.reader_gen.store(st.gen, Ordering::Release);
            st.disconnected_since = Some(Instant::now());
        } else {
            return Fallout::default();
        }
        if node.is_stopping() {
            return Fallout::default();
        }
        if err.ends_session() {
            // Logged as it ends (`Session::end`).
            return self.terminate(node, st, err);
        }
        tracing::debug!(node = node.node_id, peer = self.peer, error = %err, "interconnect connection lost");
        st.stats.record_error(err);
        if st.driver_waiting {
            st.driver_waiting = false;
            self.cond.notify_one();
        }
        Fallout::default()
    }
}

/// Closes a connection that the session resumes on another one: with a reset once its
/// last descriptor closes (SO_LINGER 0), never with an end of stream, which the peer takes
/// for the end of the session when it has nothing pending (YDB's clean-close rule). The
/// read shutdown wakes our reader and sends nothing.
fn drop_for_resume(stream: &IcStream) {
    let _ = socket2::SockRef::from(stream.socket()).set_linger(Some(std::time::Duration::ZERO));
    let _ = stream.shutdown(Shutdown::Read);
}

impl State {
    /// The connection's stream, while connected.
    pub(crate) fn stream(&self) -> Option<&Arc<IcStream>> {
        match &self.conn {
            Conn::Connected { stream, .. } => Some(stream),
            Conn::None => None,
        }
    }

    /// Whether the subscriber list, just grown by one, is pruned now
    /// ([`PRUNE_SUBSCRIBERS_AT`]).
    fn prune_due(&self) -> bool {
        let n = self.subscribers.len();
        n >= PRUNE_SUBSCRIBERS_AT && n.is_power_of_two()
    }

    /// Adds a subscriber; announces NodeConnected at once if the session is up (always for
    /// an explicit subscription, once for `SUBSCRIBE_ON_SESSION`).
    fn subscribe(&mut self, actor: ActorId, cookie: u64, explicit: bool) -> Fallout {
        let up = self.established && matches!(self.conn, Conn::Connected { .. });
        let mut fallout = Fallout::default();
        match self.subscribers.iter_mut().find(|s| s.actor == actor) {
            Some(s) => {
                s.cookie = cookie;
                if up && (explicit || !s.announced) {
                    s.announced = true;
                    self.notices.push_back((actor, cookie, true));
                    fallout.notify = true;
                }
            }
            None => {
                self.subscribers.push(Subscriber {
                    actor,
                    cookie,
                    announced: up,
                });
                if up {
                    self.notices.push_back((actor, cookie, true));
                    fallout.notify = true;
                }
            }
        }
        fallout
    }

    /// The peer confirmed every data packet up to `serial`: they are dropped.
    pub(crate) fn confirm(&mut self, serial: u64) {
        if self.unconfirmed.front().is_some_and(|p| p.serial <= serial) {
            self.confirm_progress_at = Instant::now();
        }
        while self.unconfirmed.front().is_some_and(|p| p.serial <= serial) {
            if let Some(mut p) = self.unconfirmed.pop_front() {
                self.unconfirmed_bytes -= p.payload.len();
                // Kept whatever their number (see `SPARE_IDLE`).
                p.payload.clear();
                self.spare.push(p.payload);
                p.events.clear();
                self.spare_events.push(p.events);
            }
        }
    }

    /// Drops the spare buffers beyond [`SPARE_IDLE`] once nothing is queued or in flight
    /// (the writer calls it before it sleeps, so the frees happen on the thread that
    /// allocated the buffers).
    pub(crate) fn trim_spares(&mut self) {
        if self.out.is_empty() && self.unconfirmed.is_empty() {
            self.spare.truncate(SPARE_IDLE);
            self.spare_events.truncate(SPARE_IDLE);
        }
    }

    /// An empty payload buffer for the next data packet (a confirmed one's, if any: an
    /// 8 KiB allocation and its free on another thread per packet cost more than the rest
    /// of the packet's bookkeeping).
    pub(crate) fn payload_buffer(&mut self) -> Vec<u8> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Packet::SENDER_PAYLOAD))
    }

    /// An empty list for the events of the next data packet (a confirmed one's, if any).
    pub(crate) fn events_buffer(&mut self) -> Vec<OutMeta> {
        self.spare_events.pop().unwrap_or_default()
    }

    /// Whether the session needs a connection now.
    pub(crate) fn needs_connection(&self) -> bool {
        self.established
            || !self.out.is_empty()
            || !self.unconfirmed.is_empty()
            || !self.subscribers.is_empty()
    }
}
