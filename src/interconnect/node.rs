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
use super::challenge::NONCE_LEN;
use super::codec::Codecs;
use super::encryption::{self, EncryptionMode};
use super::error::{HandshakeError, InterconnectError};
use super::events::{Subscribe, Unsubscribe};
use super::handshake::{self, cluster_accepts, param, proof, verify_proof, NONCE, PROOF};
use super::names::NameService;
use super::session::{outbox_meta, Session};
use super::setup::{Config, InterconnectSetup};
use super::stats::{Refusal, SessionStats};
use super::stream::IcStream;
use super::wire::{
    ClusterUuids, HandshakeRequest, HandshakeSuccess, SuccessRdma, HANDSHAKE_PROTOCOL,
};
use crate::actors::{
    Actor, ActorContext, ActorId, ActorSystem, DeadLetterReason, EventHandle, EventType, Handled,
    RemoteRouter, EV_POISON, EV_SUBSCRIBE, EV_UNSUBSCRIBE,
};
use crate::environment::{StopGuard, WeakEnv};
use crate::stats::{Quantity, StatsSource};

/// How many refusals [`Interconnect::refusals`] keeps.
const REFUSALS_KEPT: usize = 64;

/// How many event types without a codec a node logs (the first event of each); events of
/// later types are only counted (`SessionStats::events_without_codec`), so that a peer
/// sending ever new types cannot grow the set, or the log, for the life of the process.
pub(crate) const MISSING_CODECS_LOGGED: usize = 256;

/// What every thread of a node shares.
pub(crate) struct NodeShared {
    pub(crate) node_id: u32,
    pub(crate) system: ActorSystem,
    pub(crate) names: NameService,
    pub(crate) codecs: Codecs,
    pub(crate) cfg: Config,
    cluster_uuid: Option<String>,
    accept_uuids: Vec<String>,
    secret: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsSetup>,
    sessions: BTreeMap<u32, Arc<Session>>,
    local_addr: SocketAddr,
    epoch: Instant,
    pid: u64,
    start_time: u64,
    stopping: AtomicBool,
    next_session: AtomicU64,
    /// Which incoming connections may run a handshake now (`admission.rs`).
    pub(crate) admission: Arc<Admission>,
    refusals: Mutex<VecDeque<Refusal>>,
    /// The sessions' figures for the environment's stats controller (held weakly there).
    stats_source: Arc<dyn StatsSource>,
    /// The event types received without a codec and logged once already (at most
    /// [`MISSING_CODECS_LOGGED`]).
    missing_codecs: Mutex<ahash::AHashSet<EventType>>,
}

impl NodeShared {
    /// An event of `event_type` arrived and this node has no codec for it: whether it is
    /// the first of its type (then the caller reports it with
    /// [`log_missing_codec`](Self::log_missing_codec), outside its locks; the count is the
    /// session's). Only the first [`MISSING_CODECS_LOGGED`] types are kept and logged, the
    /// last of them with a note that no more will be.
    #[cold]
    #[inline(never)]
    pub(crate) fn first_missing_codec(&self, event_type: EventType) -> bool {
        let mut seen = self.missing_codecs.lock();
        if seen.len() >= MISSING_CODECS_LOGGED {
            return false;
        }
        seen.insert(event_type)
    }

    /// Logs an event type with no codec, through the environment's error logger (user
    /// code: called with no session lock held).
    pub(crate) fn log_missing_codec(&self, event_type: EventType, sender: ActorId) {
        let last = self.missing_codecs.lock().len() >= MISSING_CODECS_LOGGED;
        let more = if last {
            " (this is the last type logged: events of types not seen yet are only counted)"
        } else {
            ""
        };
        self.system.environment().log_error(&format!(
            "interconnect node {}: an event of type {event_type:#x} ({event_type}) from {sender} \
             has no codec registered on this node: its handler gets the bytes, and \
             `EventHandle::is`/`get` see no event of the type (register it with \
             `InterconnectSetup::event`, or with `agentbox::register_remote_event!` and \
             `InterconnectSetup::linked_events`); further events of this type are only counted \
             (`SessionStats::events_without_codec`){more}",
            self.node_id
        ));
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

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

    /// Nanoseconds since the node started (ping stamps, silence).
    pub(crate) fn now_nanos(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    pub(crate) fn random_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        if getrandom::fill(&mut b).is_err() {
            // No OS randomness: a time-derived value (proofs then rest on the secret alone).
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            b[..16].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    pub(crate) fn random_u64(&self) -> u64 {
        let b = self.random_bytes();
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// A fresh session virtual id: own node, pool 0, the next local id, hint 0. Local ids
    /// increase within a process (YDB's peer refuses a handshake `Serial` lower than the
    /// last one it saw from the same process); they start at the start time's seconds
    /// `<< 32` plus 31 random bits, so that a restarted node's ids differ from its last.
    pub(crate) fn new_session_id(&self) -> ActorId {
        ActorId::new(
            self.node_id,
            self.next_session.fetch_add(1, Ordering::Relaxed),
            0,
        )
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

    fn own_host(&self) -> String {
        self.names
            .get(self.node_id)
            .map(|a| a.host.clone())
            .unwrap_or_default()
    }

    fn cluster(&self) -> Option<ClusterUuids> {
        if self.cluster_uuid.is_none() && self.accept_uuids.is_empty() {
            return None;
        }
        Some(ClusterUuids {
            cluster_uuid: self.cluster_uuid.clone(),
            accept_uuid: self.accept_uuids.clone(),
        })
    }

    /// Our `THandshakeRequest` to `peer` for session `self_id` (`YDB_WIRE.md` §3.4), with
    /// the fields YDB always sets (§6.6): `UUID` when there is a cluster id,
    /// `RequestAuthOnly`, `HandshakeId`, `RequestXxhash` and `RequestXdcShuffle`.
    pub(crate) fn request(&self, peer: u32, self_id: ActorId, nonce: &[u8]) -> HandshakeRequest {
        let sender_actor_id = self_id.to_string();
        let mut params = Vec::new();
        if let Some(secret) = &self.secret {
            let to = peer.to_le_bytes();
            let tag = proof(
                secret,
                &[
                    b"agentbox-ic-request",
                    nonce,
                    sender_actor_id.as_bytes(),
                    &to,
                ],
            );
            params.push(handshake::kv(NONCE, nonce.to_vec()));
            params.push(handshake::kv(PROOF, tag));
        }
        HandshakeRequest {
            protocol: HANDSHAKE_PROTOCOL,
            program_pid: self.pid,
            program_start_time: self.start_time,
            serial: self_id.local_id(),
            receiver_node_id: peer,
            sender_actor_id,
            sender_host_name: Some(self.own_host()),
            receiver_host_name: Some(
                self.names
                    .get(peer)
                    .map(|a| a.host.clone())
                    .unwrap_or_default(),
            ),
            cluster_uuids: self.cluster(),
            request_modern_frame: Some(true),
            request_extended_trace_fmt: Some(true),
            request_external_data_channel: Some(false),
            require_encryption: encryption::request_field(self.encryption_mode()),
            uuid: self.cluster_uuid.clone(),
            request_auth_only: Some(false),
            handshake_id: Some(self.random_bytes().to_vec()),
            request_xxhash: Some(true),
            request_xdc_shuffle: Some(true),
            params,
            ..Default::default()
        }
    }

    /// Checks a request from `peer` (accepting side); returns the peer's session id and
    /// nonce.
    pub(crate) fn check_request(
        &self,
        peer: u32,
        r: &HandshakeRequest,
    ) -> Result<(ActorId, Vec<u8>), HandshakeError> {
        if r.protocol != HANDSHAKE_PROTOCOL {
            return Err(HandshakeError::Incompatible(format!(
                "handshake protocol {}",
                r.protocol
            )));
        }
        if r.receiver_node_id != self.node_id {
            return Err(HandshakeError::WrongReceiverNode {
                wanted: r.receiver_node_id,
                actual: self.node_id,
            });
        }
        let session: ActorId = r.sender_actor_id.parse().map_err(|_| {
            HandshakeError::Incompatible(format!("sender id {:?}", r.sender_actor_id))
        })?;
        if session.node_id() != peer {
            return Err(HandshakeError::Incompatible(format!(
                "sender id {session} is not of node {peer}"
            )));
        }
        let expected = self
            .names
            .get(peer)
            .ok_or(HandshakeError::UnknownNode(peer))?
            .host
            .clone();
        let got = r.sender_host_name.clone().unwrap_or_default();
        if got != expected {
            return Err(HandshakeError::HostNameMismatch {
                field: "SenderHostName",
                got,
                expected,
            });
        }
        let own = self.own_host();
        let got = r.receiver_host_name.clone().unwrap_or_default();
        if got != own {
            return Err(HandshakeError::HostNameMismatch {
                field: "ReceiverHostName",
                got,
                expected: own,
            });
        }
        let legacy = Some(r.uuid.as_deref());
        if !cluster_accepts(
            self.cluster_uuid.as_deref(),
            &self.accept_uuids,
            r.cluster_uuids.as_ref(),
            legacy,
        ) {
            return Err(HandshakeError::ClusterMismatch {
                peer: peer_cluster(r.cluster_uuids.as_ref(), r.uuid.as_deref()),
            });
        }
        if r.request_modern_frame != Some(true) || r.request_extended_trace_fmt != Some(true) {
            return Err(HandshakeError::Incompatible("obsolete peer version".into()));
        }
        if r.do_check_cookie.is_some() {
            return Err(HandshakeError::Incompatible(
                "cookie checks are not supported".into(),
            ));
        }
        let nonce = param(&r.params, NONCE)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if let Some(secret) = &self.secret {
            let tag = param(&r.params, PROOF).ok_or(HandshakeError::BadSecret)?;
            let to = self.node_id.to_le_bytes();
            let parts: [&[u8]; 4] = [
                b"agentbox-ic-request",
                &nonce,
                r.sender_actor_id.as_bytes(),
                &to,
            ];
            // No proof of freshness (a recorded request passes): the challenge is
            // (`challenge.rs`), before anything of the session changes.
            if nonce.len() != NONCE_LEN || !verify_proof(secret, &parts, tag) {
                return Err(HandshakeError::BadSecret);
            }
        }
        Ok((session, nonce))
    }

    /// Our `THandshakeSuccess` for session `self_id` (accepting side), with our `nonce`
    /// (the challenge the peer answers, if the cluster has a secret) and the fields YDB
    /// always sets (`AuthOnly`, `RdmaErr`); the caller sets `UseXxhash` and
    /// `UseXdcShuffle` from the request (`NewPeer::grant`), and `StartEncryption` when
    /// the modes chose TLS.
    pub(crate) fn success(
        &self,
        self_id: ActorId,
        peer_nonce: &[u8],
        nonce: &[u8],
    ) -> HandshakeSuccess {
        let sender_actor_id = self_id.to_string();
        let mut params = Vec::new();
        if let Some(secret) = &self.secret {
            let tag = proof(
                secret,
                &[
                    b"agentbox-ic-reply",
                    peer_nonce,
                    nonce,
                    sender_actor_id.as_bytes(),
                ],
            );
            params.push(handshake::kv(NONCE, nonce.to_vec()));
            params.push(handshake::kv(PROOF, tag));
        }
        HandshakeSuccess {
            protocol: HANDSHAKE_PROTOCOL,
            program_pid: self.pid,
            program_start_time: self.start_time,
            serial: self_id.local_id(),
            sender_actor_id,
            cluster_uuids: self.cluster(),
            start_encryption: Some(false),
            use_modern_frame: Some(true),
            use_extended_trace_fmt: Some(true),
            use_external_data_channel: Some(false),
            auth_only: Some(false),
            use_xxhash: Some(false),
            rdma: Some(SuccessRdma::RdmaErr("no RDMA on this node".into())),
            params,
            ..Default::default()
        }
    }

    /// Checks a success from `peer` (connecting side); returns the peer's session id and
    /// its nonce (empty without a secret).
    pub(crate) fn check_success(
        &self,
        peer: u32,
        s: &HandshakeSuccess,
        our_nonce: &[u8],
    ) -> Result<(ActorId, Vec<u8>), HandshakeError> {
        handshake::check_success_flags(s)?;
        if !cluster_accepts(
            self.cluster_uuid.as_deref(),
            &self.accept_uuids,
            s.cluster_uuids.as_ref(),
            None,
        ) {
            return Err(HandshakeError::ClusterMismatch {
                peer: peer_cluster(s.cluster_uuids.as_ref(), None),
            });
        }
        let session: ActorId = s.sender_actor_id.parse().map_err(|_| {
            HandshakeError::Incompatible(format!("sender id {:?}", s.sender_actor_id))
        })?;
        if session.node_id() != peer {
            return Err(HandshakeError::Incompatible(format!(
                "sender id {session} is not of node {peer}"
            )));
        }
        if let Some(secret) = &self.secret {
            let nonce = param(&s.params, NONCE).ok_or(HandshakeError::BadSecret)?;
            let tag = param(&s.params, PROOF).ok_or(HandshakeError::BadSecret)?;
            let parts: [&[u8]; 4] = [
                b"agentbox-ic-reply",
                our_nonce,
                nonce,
                s.sender_actor_id.as_bytes(),
            ];
            if nonce.len() != NONCE_LEN || !verify_proof(secret, &parts, tag) {
                return Err(HandshakeError::BadSecret);
            }
            return Ok((session, nonce.to_vec()));
        }
        Ok((session, Vec::new()))
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
            // Nobody to notify (a subscriber with the empty id would be kept for nothing).
            EV_SUBSCRIBE | EV_UNSUBSCRIBE => ev.sender().is_empty(),
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

/// One node's end of YDB's interconnect: sessions to the other nodes of the name service,
/// over TCP, framed as YDB frames them. A cheap handle.
///
/// Once started, a send from any actor of the system to an [`ActorId`] on another node
/// goes through the session to that node, created on the first send: the event is encoded
/// with its [`RemoteEvent`](super::RemoteEvent) codec on the sender's thread, cut into
/// channel parts, and kept in data packets until the peer confirms them. The rules a user
/// relies on:
///
/// - **Order**: events on one channel ([`EventFlags::with_channel`](crate::actors::EventFlags::with_channel)) arrive in the order
///   they were sent, across reconnects; channels do not wait for each other.
/// - **Exactly once within a session**: a broken connection is resumed (the unconfirmed
///   packets are sent again with their serials, and the receiver skips what it already
///   processed).
/// - **Non-delivery**: when a session ends (no connection within the lost-connection
///   timeout, a dead peer, a refused handshake, a protocol violation, a clean close by the
///   peer with nothing pending), its queued events are not delivered, reason
///   `Disconnected`: an event with `TRACK_DELIVERY` gets
///   [`Undelivered`](crate::actors::Undelivered); one already sent but never confirmed
///   (the peer may have processed it) is forwarded or gets it only if it also asked for
///   `GENERATE_UNSURE_UNDELIVERED` (then `unsure: true`). When the peer restarted (it
///   refuses a resume, or asks for a new session), the queued events go out in a new
///   session instead, started at once. A session that ends with events it did not
///   deliver logs their number once (a `tracing` warning) and counts them in its
///   [`SessionStats::events_not_delivered`](super::SessionStats::events_not_delivered);
///   those dropped count as the environment's
///   [`DropCounts::unreachable`](crate::DropCounts::unreachable).
/// - **Stopping** closes every connection cleanly (an end of stream; what the peer sends
///   meanwhile is taken for [`close_linger`](super::InterconnectSetup::close_linger)),
///   also one whose handshake was answered but not yet installed: a peer with nothing
///   pending ends its session at once.
/// - **Bounded queues**: a session queues at most
///   [`max_queued_events`](super::InterconnectSetup::max_queued_events) events and
///   [`max_queued_bytes`](super::InterconnectSetup::max_queued_bytes) bytes; an event
///   beyond them is not delivered at once (reason
///   [`Overloaded`](crate::actors::DeadLetterReason::Overloaded)) and counted.
/// - **Dead peers**: a peer silent, or confirming nothing it was sent, for the dead-peer
///   timeout ends the session.
///   On the peer, an unknown recipient gives `Undelivered(ActorUnknown)` back over the
///   wire, with the cookie.
/// - **Subscriptions**: [`Subscribe`] to [`ActorId::interconnect_proxy`]`(node)`, or any
///   event sent with `SUBSCRIBE_ON_SESSION`, gives
///   [`NodeConnected`](super::NodeConnected) when the session is up and
///   [`NodeDisconnected`](super::NodeDisconnected) when it ends. A subscriber list that
///   grows drops this node's actors that are gone ([`SessionStats::subscribers`]).
/// - **What a peer may not do**: the flags of a local send (`FORWARD_ON_NONDELIVERY`,
///   `SUBSCRIBE_ON_SESSION`) are cleared from a received event
///   ([`SessionStats::local_only_flags_cleared`]); the proxies refuse a
///   [`Poison`](crate::actors::Poison), from anyone ([`SessionStats::proxy_refusals`]); the
///   event types without a codec are logged for the first 256 types only.
/// - **Who may join**: nodes of the name service only, with matching host names, cluster
///   ids and (if set) the shared secret, proven afresh in every handshake, resumes
///   included; a refused peer gets nothing delivered. Incoming handshakes are admitted
///   fairly: the name service's addresses have slots of their own, any other address a
///   few, and a connection that sends nothing is closed within a second. With a secret, a
///   member proves it in its first bytes and gets a slot kept for proven peers: strangers,
///   from any address (the member's own host included), cannot keep it out.
/// - **TLS** (feature `tls`, `InterconnectSetup::tls`): YDB's modes decide per session;
///   both sides' certificates are checked against the cluster's CA (as YDB does; against
///   the name service's host names too with `TlsSetup::check_host_names`), packets carry
///   no checksum (0, as YDB writes), and a session with TLS is taken over only by a peer
///   that completed TLS.
/// - An event type without a codec, or an event over the size limit, is not delivered
///   (reason `NotSerializable`); the session goes on.
/// - Bodies in YDB's extended `TEventPB` format (descriptor flag `0x20`) reach the handler
///   as the raw bytes ([`EventHandle::serialized_bytes`](crate::actors::EventHandle::serialized_bytes));
///   the [`Protobuf`](super::Protobuf) codec reads plain protobuf bodies only.
///
/// The interconnect stops with its environment (or with [`stop`](Self::stop)).
///
/// # Examples
///
/// ```
/// use std::net::TcpListener;
/// use agentbox::actors::*;
/// use agentbox::interconnect::{Interconnect, InterconnectSetup, NameService, NodeAddress, RemoteEvent, Serde};
/// use agentbox::{ActorId, Environment};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Hello(String);
/// impl Event for Hello { const EVENT_TYPE: u32 = event_space_begin(ES_USERSPACE) + 1; }
/// impl RemoteEvent for Hello { type Codec = Serde; }
///
/// /// Node 2's greeter: prints, then ends everything.
/// struct Greeter;
/// impl Actor for Greeter {
///     fn bootstrap(&mut self, ctx: &mut ActorContext<Self>, _: ActorId) {
///         ctx.become_state(Self::serving);
///     }
/// }
/// impl Greeter {
///     fn serving(&mut self, ctx: &mut ActorContext<Self>, ev: EventHandle) -> Handled {
///         let Some(Hello(text)) = ev.get::<Hello>() else { return ev.unhandled() };
///         assert_eq!(text, "hello from node 1");
///         ctx.system().environment().stop();
///         Handled::Yes
///     }
/// }
///
/// Environment::launch(|env| {
///     // Two nodes in one process, on ports the OS picks.
///     let (l1, l2) = (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
///     let names = NameService::new()
///         .node(1, NodeAddress::new("127.0.0.1", l1.local_addr().unwrap().port()))
///         .node(2, NodeAddress::new("127.0.0.1", l2.local_addr().unwrap().port()));
///     let mut nodes = Vec::new();
///     for (id, listener) in [(1, l1), (2, l2)] {
///         let system = ActorSystem::start(env, SystemSetup::new(id)).unwrap();
///         let setup = InterconnectSetup::new(names.clone()).listener(listener).event::<Hello>();
///         Interconnect::start(&system, setup).unwrap();
///         nodes.push(system);
///     }
///     let greeter = ActorId::service(2, b"greeter").unwrap();
///     let actor = nodes[1].register(Greeter).unwrap();
///     nodes[1].register_local_service(greeter, actor).unwrap();
///     nodes[0].send(greeter, Hello("hello from node 1".into()));
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Interconnect {
    node: Arc<NodeShared>,
}

impl Interconnect {
    /// Starts the interconnect of `system`'s node: binds (or takes) the listener, installs
    /// the remote router, and registers a proxy service per peer node.
    ///
    /// # Errors
    ///
    /// [`InterconnectError`]: the node is not in the name service, the address cannot be
    /// bound, the system already has an interconnect, or the environment is stopping.
    pub fn start(
        system: &ActorSystem,
        setup: InterconnectSetup,
    ) -> Result<Interconnect, InterconnectError> {
        let node_id = system.node_id();
        let own = setup
            .names
            .get(node_id)
            .cloned()
            .ok_or(InterconnectError::NotInNameService(node_id))?;
        let listener = match setup.listener {
            Some(l) => l,
            None => TcpListener::bind((own.address.as_str(), own.port)).map_err(|source| {
                InterconnectError::Listen {
                    address: format!("{}:{}", own.address, own.port),
                    source,
                }
            })?,
        };
        let local_addr = listener
            .local_addr()
            .map_err(|source| InterconnectError::Listen {
                address: format!("{}:{}", own.address, own.port),
                source,
            })?;
        let start_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let node = Arc::new_cyclic(|me: &Weak<NodeShared>| {
            let mut n = NodeShared {
                node_id,
                system: system.clone(),
                names: setup.names.clone(),
                codecs: setup.codecs.clone(),
                cfg: setup.cfg.clone(),
                cluster_uuid: setup.cluster_uuid.clone(),
                accept_uuids: setup.accept_uuids.clone(),
                secret: setup.secret.clone(),
                #[cfg(feature = "tls")]
                tls: setup.tls.clone(),
                sessions: BTreeMap::new(),
                local_addr,
                epoch: Instant::now(),
                pid: u64::from(std::process::id()),
                start_time,
                stopping: AtomicBool::new(false),
                next_session: AtomicU64::new(0),
                admission: Arc::new(Admission::new(&setup.names)),
                refusals: Mutex::new(VecDeque::new()),
                stats_source: Arc::new(IcStatsSource(me.clone())),
                missing_codecs: Mutex::new(ahash::AHashSet::new()),
            };
            let first = ((start_time / 1_000_000) << 32) | (n.random_u64() & 0x7FFF_FFFF);
            n.next_session = AtomicU64::new(first.max(1));
            let peers: Vec<u32> = setup.names.node_ids().filter(|&p| p != node_id).collect();
            for p in peers {
                let id = n.new_session_id();
                n.sessions.insert(p, Arc::new(Session::new(p, id)));
            }
            n
        });
        if system
            .0
            .remote
            .set(Box::new(Router(Arc::downgrade(&node))))
            .is_err()
        {
            return Err(InterconnectError::AlreadyStarted(node_id));
        }
        system.environment().0.stats.add_source(&node.stats_source);
        let guard = Arc::new(Guard {
            node: Arc::downgrade(&node),
            env: system.environment().downgrade(),
            me: Mutex::new(None),
        });
        let as_dyn: Arc<dyn StopGuard> = guard.clone();
        *guard.me.lock() = Some(as_dyn.clone());
        if system.environment().setup_stop_guard(as_dyn).is_err() {
            shutdown(&node);
            return Err(InterconnectError::Stopping);
        }
        for &peer in node.sessions.keys() {
            let proxy = Proxy {
                node: Arc::downgrade(&node),
                peer,
            };
            if let Ok(actor) = system.register(proxy) {
                let _ = system.register_local_service(ActorId::interconnect_proxy(peer), actor);
            }
        }
        let listening = node.clone();
        std::thread::Builder::new()
            .name(format!("ic{node_id}-listen"))
            .spawn(move || listen(&listening, listener))
            .map_err(|source| InterconnectError::Listen {
                address: local_addr.to_string(),
                source,
            })?;
        Ok(Interconnect { node })
    }

    /// The node's shared core (unit tests of the handshake).
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<NodeShared> {
        &self.node
    }

    /// This node's id.
    pub fn node_id(&self) -> u32 {
        self.node.node_id
    }

    /// The address the node listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.node.local_addr
    }

    /// The figures of the session with `peer` (`None` if `peer` is not in the name
    /// service or is this node).
    pub fn session_stats(&self, peer: u32) -> Option<SessionStats> {
        self.node.session(peer).map(|s| s.stats())
    }

    /// The figures of every session, by peer node.
    pub fn stats(&self) -> Vec<SessionStats> {
        self.node.sessions.values().map(|s| s.stats()).collect()
    }

    /// Whether a connection to `peer` is up now.
    pub fn is_connected(&self, peer: u32) -> bool {
        self.session_stats(peer).is_some_and(|s| s.connected)
    }

    /// How many event types without a codec this node has logged (the tests' view of a
    /// bound: at most 256).
    #[doc(hidden)]
    pub fn missing_codec_types_logged(&self) -> usize {
        self.node.missing_codecs.lock().len()
    }

    /// The last handshakes this node refused (at most 64), oldest first.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.node.refusals.lock().iter().cloned().collect()
    }

    /// Stops the node's interconnect: sessions end (their queued events are not
    /// delivered, subscribers get `NodeDisconnected`), connections close, and sends to
    /// other nodes are not delivered from now on (`Disconnected`). Returns at once.
    pub fn stop(&self) {
        shutdown(&self.node);
    }
}

impl std::fmt::Debug for Interconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interconnect")
            .field("node_id", &self.node.node_id)
            .field("local_addr", &self.node.local_addr)
            .field("peers", &self.node.sessions.len())
            .finish()
    }
}

/// The listener: a thread per admitted connection runs its handshake (`admission.rs`).
fn listen(node: &Arc<NodeShared>, listener: TcpListener) {
    super::admission::listen(node, listener);
}
