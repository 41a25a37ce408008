//! The cluster mbox's sending path: one encoded copy per interested node, the local
//! fan-out or round-robin turn, and what arrives from other nodes.

use std::sync::atomic::Ordering;

use super::core::{Core, Local, PeerWant, TypeEntry};
use crate::actors::{Body, EventHandle};
use crate::drops::DropReason;
use crate::mbox::{DeliveryMode, SendError};
use crate::message::{Message, RedirectionDepth};

impl Core {
    fn refused(&self, msg: &Message, reason: &'static str) -> SendError {
        SendError::NotSerializable {
            type_name: msg.message_type().name(),
            mbox: format!("cluster:{}", self.name),
            reason,
        }
    }

    fn count(&self, reason: DropReason) {
        if let Some(env) = self.env.upgrade() {
            env.0.drops.count(reason);
        }
    }

    fn no_subscribers(&self, msg: &Message) {
        if let Some(env) = self.env.upgrade() {
            env.trace_no_subscribers(self.id, msg);
        }
    }

    /// Sends one encoded copy of `msg` to each of `nodes`.
    fn ship(
        &self,
        entry: &TypeEntry,
        msg: &Message,
        nodes: impl Iterator<Item = u32>,
    ) -> Result<(), SendError> {
        let mut nodes = nodes.peekable();
        if nodes.peek().is_none() {
            return Ok(());
        }
        let sys = self.sys.upgrade().ok_or_else(|| SendError::Refused {
            type_name: msg.message_type().name(),
            mbox: format!("cluster:{}", self.name),
            reason: "the actor system is gone".to_owned(),
        })?;
        let me = self.me.get().copied().unwrap_or_default();
        let (bytes, decode) = (entry.encode)(msg, &sys)
            .ok_or_else(|| self.refused(msg, "its codec failed, or its envelope hides it"))?;
        let mut bytes = Some(bytes);
        while let Some(node) = nodes.next() {
            let Some(to) = self.service_of(node) else {
                continue;
            };
            // The last node takes the bytes, the others a copy.
            let body = if nodes.peek().is_some() {
                Body::from_slice(bytes.as_deref().unwrap_or_default())
            } else {
                Body::from_vec(bytes.take().unwrap_or_default())
            };
            let h = EventHandle::serialized_with(entry.event_type, to, me, body, Some(decode))
                .with_flags(self.flags);
            sys.send(h);
        }
        Ok(())
    }

    pub(super) fn passes(want: &PeerWant, entry: &TypeEntry, msg: &Message) -> bool {
        match (&want.keys, entry.key) {
            (Some(keys), Some(key_of)) => match key_of(msg) {
                Some(k) => keys.iter().any(|p| p.matches(k)),
                None => true,
            },
            _ => true,
        }
    }

    pub(super) fn send(
        &self,
        msg: Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
    ) -> Result<(), SendError> {
        let ty = msg.message_type();
        if ty.is_mutable() {
            return Err(SendError::MutableToMultiConsumer {
                type_name: ty.name(),
                mbox: format!("cluster:{}", self.name),
            });
        }
        let Some(entry) = self.entry_by_type(msg.type_id()) else {
            return Err(self.refused(&msg, "its type is not named for this cluster mbox"));
        };
        let view = self.view.read().clone();
        let wants: &[PeerWant] = view
            .remote
            .get(&entry.event_type)
            .map_or(&[], Vec::as_slice);
        let local = view.local.get(&msg.type_id());
        match &self.local {
            Local::Fanout(inner) => {
                let mut shipped_out = 0;
                let to = wants.iter().filter(|w| {
                    let pass = Self::passes(w, entry, &msg);
                    if !pass {
                        shipped_out += 1;
                    }
                    pass
                });
                let to: Vec<u32> = to.map(|w| w.node).collect();
                let any_remote = !to.is_empty();
                self.ship(entry, &msg, to.into_iter())?;
                for _ in 0..shipped_out {
                    self.count(DropReason::Filtered);
                }
                match local {
                    Some(_) => inner.deliver_with(msg, depth, mode)?,
                    None if !any_remote && shipped_out == 0 => self.no_subscribers(&msg),
                    None => {}
                }
            }
            Local::RoundRobin => {
                let remote: Vec<&PeerWant> = wants
                    .iter()
                    .filter(|w| Self::passes(w, entry, &msg))
                    .collect();
                let here = local.map_or(0, |l| l.len());
                let total = here + remote.iter().map(|w| w.subscribers as usize).sum::<usize>();
                if total == 0 {
                    if wants.is_empty() {
                        self.no_subscribers(&msg);
                    } else {
                        self.count(DropReason::Filtered);
                    }
                    return Ok(());
                }
                let mut k = self.turn.fetch_add(1, Ordering::Relaxed) % total;
                if k < here {
                    drop(view);
                    self.deliver_one(&msg, depth, mode, k);
                    return Ok(());
                }
                k -= here;
                for w in remote {
                    if k < w.subscribers as usize {
                        return self.ship(entry, &msg, std::iter::once(w.node));
                    }
                    k -= w.subscribers as usize;
                }
            }
        }
        Ok(())
    }

    /// Round-robin on this node: the subscriber at `start` (in turn), or the next one
    /// whose filter accepts.
    pub(super) fn deliver_one(
        &self,
        msg: &Message,
        depth: RedirectionDepth,
        mode: DeliveryMode,
        start: usize,
    ) {
        let list = self.view.read().local.get(&msg.type_id()).cloned();
        let Some(list) = list else {
            self.no_subscribers(msg);
            return;
        };
        let n = list.len();
        for i in 0..n {
            let (sink, filter) = &list[(start + i) % n];
            if filter.as_ref().is_none_or(|f| f.accepts(msg)) {
                sink.push_message(self.id, msg.clone(), depth, mode);
                return;
            }
        }
        self.count(DropReason::Filtered);
    }

    /// A message from another node: to the subscribers here only. It runs on the
    /// interconnect's reader thread, which serves the whole session: it never waits (a
    /// full bounded chain applies its overflow reaction at once, and a refusal is counted
    /// by the binding, as any redirection's).
    pub(super) fn deliver_arrived(&self, msg: Message) {
        match &self.local {
            Local::Fanout(inner) => {
                let _ = inner.deliver_with(msg, 0, DeliveryMode::Nonblocking);
            }
            Local::RoundRobin => {
                let start = self.turn.fetch_add(1, Ordering::Relaxed);
                self.deliver_one(&msg, 0, DeliveryMode::Nonblocking, start);
            }
        }
    }
}
