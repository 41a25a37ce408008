//! [`Interconnect`]: one node's end of the interconnect: the listener, a session per peer
//! node, the remote router installed in the actor system, and a proxy actor per peer
//! (the local service [`ActorId::interconnect_proxy`]) that takes subscriptions.

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::admission::Admission;
use super::base::NodeBase;
use super::challenge::{self, param, proof, verify_proof, NONCE, NONCE_LEN, PROOF};
use super::encryption::{self, EncryptionMode};
use super::error::ConnectFailed;
use super::error::{HandshakeError, InterconnectError};
use super::events::{Subscribe, Unsubscribe};
use super::handshake::{self, cluster_accepts};
use super::names::NameService;
use super::session::{outbox_meta, Fallout, Host, Session};
use super::setup::InterconnectSetup;
use super::stats::{Refusal, SessionStats};
use super::stream::IcStream;
use super::wire::{
    ClusterUuids, HandshakeRequest, HandshakeSuccess, SuccessRdma, HANDSHAKE_PROTOCOL,
};
use crate::actors::{
    Actor, ActorContext, ActorId, ActorSystem, DeadLetterReason, EventHandle, Handled,
    RemoteRouter, EV_POISON, EV_SUBSCRIBE, EV_UNSUBSCRIBE,
};
use crate::environment::{StopGuard, WeakEnv};
use crate::stats::{Quantity, StatsSource};

mod face;
mod hello;
pub use face::Interconnect;

/// How many refusals [`Interconnect::refusals`] keeps.
const REFUSALS_KEPT: usize = 64;

/// What every thread of a node shares.
pub(crate) struct NodeShared {
    /// What the sessions read too (`base.rs`); the node derefs to it.
    pub(crate) base: NodeBase,
    pub(crate) names: NameService,
    cluster_uuid: Option<String>,
    accept_uuids: Vec<String>,
    secret: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsSetup>,
    sessions: BTreeMap<u32, Arc<Session>>,
    local_addr: SocketAddr,
    pid: u64,
    start_time: u64,
    /// Which incoming connections may run a handshake now (`admission.rs`).
    pub(crate) admission: Arc<Admission>,
    refusals: Mutex<VecDeque<Refusal>>,
    /// The sessions' figures for the environment's stats controller (held weakly there).
    stats_source: Arc<dyn StatsSource>,
}

impl std::ops::Deref for NodeShared {
    type Target = NodeBase;

    #[inline(always)]
    fn deref(&self) -> &NodeBase {
        &self.base
    }
}

impl NodeShared {
    /// When this node runs TLS (DISABLED without a TLS setup).
    pub(crate) fn encryption_mode(&self) -> EncryptionMode {
        #[cfg(feature = "tls")]
        if let Some(t) = &self.tls {
            return t.mode;
        }
        EncryptionMode::Disabled
    }

    /// The cluster's shared secret, if it has one (the handshake then runs the challenge
    /// of `challenge.rs`).
    pub(crate) fn secret(&self) -> Option<&[u8]> {
        self.secret.as_deref()
    }

    pub(crate) fn session(&self, peer: u32) -> Option<Arc<Session>> {
        self.sessions.get(&peer).cloned()
    }

    pub(crate) fn refused(&self, r: Refusal) {
        let mut q = self.refusals.lock();
        if q.len() == REFUSALS_KEPT {
            q.pop_front();
        }
        q.push_back(r);
    }

    /// Takes an event for `peer` (the remote router's path): encodes it here, on the
    /// sender's thread, and queues it.
    fn send(self: &Arc<Self>, h: EventHandle, peer: u32) -> Result<(), EventHandle> {
        match self.send_parts(&h, h.local_any(), peer) {
            Ok(()) => Ok(()),
            Err(DeadLetterReason::Disconnected) => Err(h),
            Err(reason) => {
                self.system.0.not_delivered(h, reason);
                Ok(())
            }
        }
    }

    /// [`send`](Self::send) of the handle `h`'s fields with its event `local` (a local
    /// value) or `h`'s serialized bytes; the reason it is not delivered otherwise
    /// (`Disconnected`: no session or stopping; `NotSerializable`).
    fn send_parts(
        self: &Arc<Self>,
        h: &EventHandle,
        local: Option<&(dyn std::any::Any + Send)>,
        peer: u32,
    ) -> Result<(), DeadLetterReason> {
        let Some(s) = self.sessions.get(&peer) else {
            return Err(DeadLetterReason::Disconnected);
        };
        if self.is_stopping() {
            return Err(DeadLetterReason::Disconnected);
        }
        let codec = self.codecs.get(h.event_type());
        let decode = codec.map(|c| c.1).or_else(|| h.decoder());
        // The record is made where it is queued (profile, `ic_small_events`: made first and
        // moved through the closures, its 64 bytes were copied twice more per event).
        let queue = |body: &[u8]| {
            if body.len() > self.cfg.max_event_size {
                Err(DeadLetterReason::NotSerializable)
            } else {
                s.enqueue(self, outbox_meta(h, decode), body);
                Ok(())
            }
        };
        if let Some(bytes) = h.serialized_bytes() {
            queue(bytes)
        } else {
            match local.zip(codec) {
                Some((e, (encode, _))) => with_scratch(|out| match encode(e, out) {
                    Ok(()) => queue(out),
                    Err(e) => {
                        tracing::warn!(event_type = h.event_type(), error = %e, "interconnect: event not encoded");
                        Err(DeadLetterReason::NotSerializable)
                    }
                }),
                None => Err(DeadLetterReason::NotSerializable),
            }
        }
    }
}

impl Host for NodeShared {
    fn session(&self, peer: u32) -> Option<Arc<Session>> {
        self.sessions.get(&peer).cloned()
    }

    fn connect(node: &Arc<Self>, s: &Arc<Session>) -> Result<Fallout, ConnectFailed> {
        handshake::connect(node, s)
    }
}

thread_local! {
    /// The encoding buffer of the sending thread, reused event after event.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer, emptied: an event is encoded into it and
/// queued from it (its body is copied once, into its channel's buffer in the outbox). A
/// reentered call (a codec that sends, or a send from the non-delivery path) gets a buffer
/// of its own.
fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            scratch.clear();
            let r = f(&mut scratch);
            // A large event's buffer is not kept.
            if scratch.capacity() > 64 << 10 {
                *scratch = Vec::new();
            }
            r
        }
        Err(_) => f(&mut Vec::new()),
    })
}

fn peer_cluster(c: Option<&ClusterUuids>, legacy: Option<&str>) -> String {
    c.and_then(|c| c.cluster_uuid.clone())
        .or_else(|| legacy.map(str::to_owned))
        .unwrap_or_default()
}

/// The sessions' figures, under `ic/node<N>/peer<P>` (see the `stats` module docs).
struct IcStatsSource(Weak<NodeShared>);

impl StatsSource for IcStatsSource {
    fn distribute(&self, out: &mut dyn FnMut(Quantity)) {
        let Some(node) = self.0.upgrade() else { return };
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        for (peer, s) in &node.sessions {
            let st = s.stats();
            let prefix = format!("ic/node{}/peer{peer}", node.node_id);
            let rtt = st.rtt.map_or(0, |d| n(d.as_micros() as u64));
            for (suffix, value) in [
                ("connected.count", usize::from(st.connected)),
                ("bytes_out.count", n(st.bytes_out)),
                ("bytes_in.count", n(st.bytes_in)),
                ("events_out.count", n(st.events_out)),
                ("events_in.count", n(st.events_in)),
                ("events_without_codec.count", n(st.events_without_codec)),
                (
                    "local_only_flags_cleared.count",
                    n(st.local_only_flags_cleared),
                ),
                ("proxy_refusals.count", n(st.proxy_refusals)),
                ("packets_resent.count", n(st.packets_resent)),
                ("reconnects.count", n(st.reconnects)),
                ("sessions_ended.count", n(st.sessions_ended)),
                ("queued_events.count", st.queued_events),
                ("queued_bytes.count", st.queued_bytes),
                ("events_refused.count", n(st.events_refused)),
                ("rtt.us", rtt),
            ] {
                out(Quantity {
                    prefix: prefix.clone(),
                    suffix,
                    value,
                });
            }
        }
    }
}

/// The hook installed in the actor system: events for other nodes come here.
struct Router(Weak<NodeShared>);

impl RemoteRouter for Router {
    fn send(&self, h: EventHandle, node_id: u32) -> Result<(), EventHandle> {
        match self.0.upgrade() {
            Some(node) => node.send(h, node_id),
            None => Err(h),
        }
    }

    fn send_value(
        &self,
        header: &EventHandle,
        event: &(dyn std::any::Any + Send),
        node_id: u32,
    ) -> Result<(), DeadLetterReason> {
        match self.0.upgrade() {
            Some(node) => node.send_parts(header, Some(event), node_id),
            None => Err(DeadLetterReason::Disconnected),
        }
    }

    fn can_encode(&self, event_type: crate::actors::EventType) -> bool {
        self.0
            .upgrade()
            .is_some_and(|node| node.codecs.get(event_type).is_some())
    }

    fn encode(
        &self,
        event_type: crate::actors::EventType,
        event: &(dyn std::any::Any + Send),
    ) -> Option<(Vec<u8>, crate::actors::DecodeFn)> {
        let (encode, decode) = self.0.upgrade()?.codecs.get(event_type)?;
        let mut bytes = Vec::new();
        match encode(event, &mut bytes) {
            Ok(()) => Some((bytes, decode)),
            Err(e) => {
                tracing::warn!(event_type, error = %e, "interconnect: event not encoded");
                None
            }
        }
    }
}

/// The proxy of one peer node: the local service `ICProxy@<node>`, which takes
/// [`Subscribe`] and [`Unsubscribe`].
struct Proxy {
    node: Weak<NodeShared>,
    peer: u32,
}

impl Actor for Proxy {
    fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _parent: ActorId) {
        ctx.become_state(Self::serving);
    }
}

impl Proxy {
    fn serving(&mut self, _ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
        let Some(node) = self.node.upgrade() else {
            return ev.unhandled();
        };
        let Some(s) = node.session(self.peer) else {
            return ev.unhandled();
        };
        let refuse = match ev.event_type() {
            // The proxy lives as long as the interconnect (YDB's proxies live as long as
            // their actor system): a Poison, from a peer above all, would leave the service
            // resolving to a dead id and every later subscription a dead letter.
            EV_POISON => true,
            // Nobody to notify (a subscriber with the empty id would be kept for nothing);
            // and only this node's actors subscribe to its sessions (as in YDB, where a
            // subscription is a local send): a peer's made-up senders, relayed here,
            // would otherwise grow another session's list without bound.
            EV_SUBSCRIBE => ev.sender().is_empty() || ev.sender().node_id() != node.node_id,
            EV_UNSUBSCRIBE => ev.sender().is_empty(),
            _ => false,
        };
        if refuse {
            s.state.lock().stats.proxy_refusals += 1;
            tracing::debug!(
                node = node.node_id,
                peer = self.peer,
                event_type = ev.event_type(),
                sender = %ev.sender(),
                "interconnect proxy: event refused"
            );
            Handled::Yes
        } else if ev.is::<Subscribe>() {
            s.subscribe(&node, ev.sender(), ev.cookie());
            Handled::Yes
        } else if ev.is::<Unsubscribe>() {
            s.unsubscribe(ev.sender());
            Handled::Yes
        } else {
            ev.unhandled()
        }
    }
}

/// Stops the node when the environment stops.
struct Guard {
    node: Weak<NodeShared>,
    /// The environment, to remove the guard from: held on its own, since the node may be
    /// gone by then (shutting down lets the node's threads, and their references, go).
    env: WeakEnv,
    me: Mutex<Option<Arc<dyn StopGuard>>>,
}

impl StopGuard for Guard {
    fn stop(&self) {
        if let Some(node) = self.node.upgrade() {
            shutdown(&node);
        }
        if let Some(me) = self.me.lock().take() {
            if let Some(env) = self.env.upgrade() {
                env.remove_stop_guard(&me);
            }
        }
    }
}

fn shutdown(node: &Arc<NodeShared>) {
    if node.stopping.swap(true, Ordering::AcqRel) {
        return;
    }
    let mut open = Vec::new();
    for s in node.sessions.values() {
        let f = {
            let mut st = s.state.lock();
            if let Some(stream) = st.stream() {
                open.push(stream.clone());
            }
            let f = s.terminate(node, &mut st, super::error::SessionError::Stopping);
            s.cond.notify_all();
            f
        };
        f.deliver(node, s.peer);
    }
    close_after_linger(open, node.cfg.close_linger);
    // Wake the listener so that it sees the flag.
    let _ = TcpStream::connect_timeout(&node.local_addr, Duration::from_millis(200));
}

/// Closes a connection that a handshake holds when the node stops (it lost its session
/// to the stop, or failed because of it) as the sessions' connections are closed: an end
/// of stream now, the socket kept open for reading for the close linger. The peer may have
/// installed its side already (it did once it read our answer) and sent on it: dropped at
/// once, with those bytes unread, the socket was reset, which the peer takes for a lost
/// connection and resumes for its whole lost-connection timeout, where an end of stream
/// with nothing of its pending ends its session at once. A handshake that fails while the
/// node runs drops its connection as before.
pub(crate) fn close_if_stopping(node: &NodeShared, stream: IcStream) {
    if !node.is_stopping() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    close_after_linger(vec![Arc::new(stream)], node.cfg.close_linger);
}

/// Shuts the reading half of `streams` (their sending half is shut: `Session::terminate`
/// with `Stopping`) after `linger` (`InterconnectSetup::close_linger`), on a thread of its own: meanwhile what the
/// peer sends is accepted (and dropped by our ended reader), so our close is not a reset
/// that the peer could see before our end of stream. The shutdown wakes a reader still
/// waiting, which lets the socket go; a peer that closes first ends it sooner.
fn close_after_linger(streams: Vec<Arc<IcStream>>, linger: Duration) {
    if streams.is_empty() {
        return;
    }
    let shut = |streams: Vec<Arc<IcStream>>| {
        for s in streams {
            let _ = s.shutdown(std::net::Shutdown::Read);
        }
    };
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Arc<IcStream>>>();
    let spawned = std::thread::Builder::new()
        .name("ic-close".into())
        .spawn(move || {
            if let Ok(streams) = rx.recv() {
                std::thread::sleep(linger);
                shut(streams);
            }
        });
    match spawned {
        Ok(_) => {
            let _ = tx.send(streams);
        }
        // No thread: closed at once, as before.
        Err(_) => shut(streams),
    }
}

/// The listener: a thread per admitted connection runs its handshake (`admission.rs`).
fn listen(node: &Arc<NodeShared>, listener: TcpListener) {
    super::admission::listen(node, listener);
}
