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
use super::error::{ConnectFailed, InterconnectError};
use super::events::{Subscribe, Unsubscribe};
use super::handshake;
use super::session::{outbox_meta, Fallout, Host, Session};
use super::setup::InterconnectSetup;
use super::shared::{close_after_linger, NodeShared};
use super::stats::{Refusal, SessionStats};
use crate::actors::{
    Actor, ActorContext, ActorId, ActorSystem, DeadLetterReason, EventHandle, Handled,
    RemoteRouter, EV_POISON, EV_SUBSCRIBE, EV_UNSUBSCRIBE,
};
use crate::environment::{StopGuard, WeakEnv};
use crate::stats::{Quantity, StatsSource};

mod face;
pub use face::Interconnect;

impl NodeShared {
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

/// The listener: a thread per admitted connection runs its handshake (`admission.rs`).
fn listen(node: &Arc<NodeShared>, listener: TcpListener) {
    super::listener::listen(node, listener);
}
