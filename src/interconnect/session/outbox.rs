//! The events waiting to leave, per channel, and how they are cut into data packets:
//! each packet takes parts from the channels in turn, so that a large event on one channel
//! does not hold back the others; order is kept within a channel.

use std::collections::VecDeque;

use ahash::AHashMap;

use crate::actors::{ActorId, Body, DecodeFn, EventFlags, EventHandle, EventType};
use crate::interconnect::wire::{EventDescriptor, PacketChecksum};

/// What is kept of a sent event until its packet is confirmed: enough to say it was not
/// delivered (and to forward it, for `FORWARD_ON_NONDELIVERY`).
pub(crate) struct OutMeta {
    pub(crate) event_type: EventType,
    /// The handle's flags as the sender gave them (the wire form drops some).
    pub(crate) flags: EventFlags,
    pub(crate) recipient: ActorId,
    pub(crate) sender: ActorId,
    pub(crate) cookie: u64,
    /// With `FORWARD_ON_NONDELIVERY` only: the target and the body.
    pub(crate) forward: Option<Box<(ActorId, Vec<u8>)>>,
    pub(crate) decode: Option<DecodeFn>,
}

impl OutMeta {
    /// The event rebuilt as a serialized handle, to be reported as not delivered.
    pub(crate) fn into_handle(self) -> EventHandle {
        let (target, body) = match self.forward {
            Some(f) => {
                let (t, b) = *f;
                (Some(t), b)
            }
            None => (None, Vec::new()),
        };
        let h = EventHandle::serialized_with(
            self.event_type,
            self.recipient,
            self.sender,
            Body::from_vec(body),
            self.decode,
        )
        .with_flags(self.flags)
        .with_cookie(self.cookie);
        match target {
            Some(t) => h.forward_on_nondelivery(t),
            None => h,
        }
    }

    /// Appends the 80-byte descriptor (`EventDescriptor`'s layout): the flags without
    /// `FORWARD_ON_NONDELIVERY` and `SUBSCRIBE_ON_SESSION`, no trace, body checksum 0 (as
    /// YDB's sender).
    fn write_descriptor(&self, out: &mut Vec<u8>) {
        let wire = self
            .flags
            .without(EventFlags::FORWARD_ON_NONDELIVERY | EventFlags::SUBSCRIBE_ON_SESSION);
        // Built on the stack and appended at once (one capacity check, not seven).
        let mut d = [0u8; EventDescriptor::LEN];
        d[0..4].copy_from_slice(&self.event_type.to_le_bytes());
        d[4..8].copy_from_slice(&wire.bits().to_le_bytes());
        d[8..24].copy_from_slice(&self.recipient.to_le_bytes());
        d[24..40].copy_from_slice(&self.sender.to_le_bytes());
        d[40..48].copy_from_slice(&self.cookie.to_le_bytes());
        // Trace (28 bytes) and body checksum (4) stay 0.
        out.extend_from_slice(&d);
    }
}

/// One event waiting to leave (or partly sent). A small body (up to 128 bytes) lives in
/// the event's own slot of the outbox: queuing it allocates nothing, and nothing is freed
/// on the writer's thread once it is sent.
pub(crate) struct OutEvent {
    pub(crate) meta: OutMeta,
    pub(crate) body: Body,
    /// Bytes of the body already in packets.
    sent: usize,
}

impl OutEvent {
    /// What an event is counted for against the queue's byte limit: its body and a fixed
    /// cost (the event's own record).
    pub(crate) fn cost(&self) -> usize {
        self.body.len() + std::mem::size_of::<OutEvent>()
    }

    pub(crate) fn new(meta: OutMeta, body: Body) -> OutEvent {
        OutEvent {
            meta,
            body,
            sent: 0,
        }
    }

    pub(crate) fn into_handle(mut self) -> EventHandle {
        if let Some(f) = self.meta.forward.as_mut() {
            f.1 = std::mem::take(&mut self.body).into_vec();
        }
        self.meta.into_handle()
    }
}

/// What is kept of `h` (whose body is `body`) while it is on its way.
pub(crate) fn outbox_meta(h: &EventHandle, decode: Option<DecodeFn>) -> OutMeta {
    let flags = h.flags();
    let forward = flags
        .contains(EventFlags::FORWARD_ON_NONDELIVERY)
        .then(|| Box::new((h.forward_target(), Vec::new())));
    OutMeta {
        event_type: h.event_type(),
        flags,
        recipient: h.recipient_rewrite(),
        sender: h.sender(),
        cookie: h.cookie(),
        forward,
        decode,
    }
}

/// A data packet sent and kept until the peer confirms it.
pub(crate) struct SentPacket {
    pub(crate) serial: u64,
    pub(crate) payload: Vec<u8>,
    /// The events whose descriptor is in this packet.
    pub(crate) events: Vec<OutMeta>,
}

/// The events waiting to leave, per channel, with the channels that have some in turn.
///
/// The queues sit in a vector, found by a channel's index: a push to the channel of the
/// previous push (the usual stream) and the turns (queue indices) need no map look-up
/// (profile, `ic_small_events`: the map's hash per push was ~30 of the sender's ~400
/// instructions of its own per event).
#[derive(Default)]
pub(crate) struct Outbox {
    /// Each channel ever used, with its queue (kept when it empties: channels are few).
    queues: Vec<(u16, VecDeque<OutEvent>)>,
    /// Channel → its index in `queues`.
    index: AHashMap<u16, usize>,
    /// The index of the last push's queue.
    last: usize,
    /// Indices of the queues with events, in the order they are served.
    turn: VecDeque<usize>,
    len: usize,
    /// The waiting events' [`OutEvent::cost`]s.
    bytes: usize,
}

impl Outbox {
    pub(crate) fn push(&mut self, ev: OutEvent) {
        let channel = ev.meta.flags.channel();
        let i = match self.queues.get(self.last) {
            Some((ch, _)) if *ch == channel => self.last,
            _ => {
                let next = self.queues.len();
                let i = *self.index.entry(channel).or_insert(next);
                if i == next {
                    self.queues.push((channel, VecDeque::new()));
                }
                self.last = i;
                i
            }
        };
        let q = &mut self.queues[i].1;
        if q.is_empty() {
            self.turn.push_back(i);
        }
        self.bytes += ev.cost();
        q.push_back(ev);
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What the waiting events cost (see [`OutEvent::cost`]).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets how much of each event was sent: for a new session, in which a partly
    /// sent event goes out whole (its first parts went to a peer session that is gone).
    pub(crate) fn restart_partial(&mut self) {
        for (_, q) in &mut self.queues {
            for ev in q.iter_mut() {
                ev.sent = 0;
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every waiting event, channel by channel.
    pub(crate) fn drain(&mut self) -> Vec<OutEvent> {
        let mut all = Vec::with_capacity(self.len);
        for i in self.turn.drain(..) {
            if let Some((_, q)) = self.queues.get_mut(i) {
                all.extend(q.drain(..));
            }
        }
        self.len = 0;
        self.bytes = 0;
        all
    }

    /// Fills one packet payload of at most `max` bytes with parts of the waiting events;
    /// appends the events it completes to `done`. Empty payload: nothing waits.
    pub(crate) fn fill(&mut self, payload: &mut Vec<u8>, max: usize, done: &mut Vec<OutMeta>) {
        while let Some(&i) = self.turn.front() {
            // The only channel with events takes its parts in one go (profile: a map
            // look-up and a rotation of the turns per part were a third of this
            // function's ~400 instructions per small event); with several, one part each
            // in turn.
            let alone = self.turn.len() == 1;
            let Some((ch, q)) = self.queues.get_mut(i) else {
                self.turn.pop_front();
                continue;
            };
            let ch = *ch;
            let full = loop {
                let Some(ev) = q.front_mut() else {
                    break false;
                };
                let room = max.saturating_sub(payload.len());
                if ev.sent < ev.body.len() {
                    if room <= 4 {
                        break true;
                    }
                    let n = (room - 4)
                        .min(ev.body.len() - ev.sent)
                        .min(u16::MAX as usize);
                    // Never past `max`: a packet buffer keeps its capacity (profile:
                    // reserving for a descriptor that did not fit doubled most packet
                    // buffers to 16 KiB, a reallocation and a copy per packet).
                    payload.reserve((4 + n + 4 + EventDescriptor::LEN).min(room));
                    payload.extend_from_slice(&ch.to_le_bytes());
                    payload.extend_from_slice(&(n as u16).to_le_bytes());
                    payload.extend_from_slice(&ev.body[ev.sent..ev.sent + n]);
                    ev.sent += n;
                } else {
                    if room < 4 + EventDescriptor::LEN {
                        break true;
                    }
                    payload.extend_from_slice(&(ch | 0x8000).to_le_bytes());
                    payload.extend_from_slice(&(EventDescriptor::LEN as u16).to_le_bytes());
                    ev.meta.write_descriptor(payload);
                    if let Some(mut ev) = q.pop_front() {
                        self.len -= 1;
                        self.bytes -= ev.cost();
                        // Keep the body for a forward on non-delivery.
                        if let Some(f) = ev.meta.forward.as_mut() {
                            f.1 = std::mem::take(&mut ev.body).into_vec();
                        }
                        done.push(ev.meta);
                    }
                }
                if !alone {
                    break false;
                }
            };
            if full {
                break;
            }
            if q.is_empty() {
                self.turn.pop_front();
            } else {
                // Next part from the next channel with events.
                self.turn.rotate_left(1);
            }
        }
    }
}

/// Appends a packet (header with the checksum of `mode`, then the payload) to `out`.
pub(crate) fn write_packet(
    out: &mut Vec<u8>,
    mode: PacketChecksum,
    confirm: u64,
    serial: u64,
    payload: &[u8],
) {
    let checksum = mode.compute(confirm, serial, payload);
    out.extend_from_slice(&confirm.to_le_bytes());
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interconnect::wire::{parts, EventDescriptor, Packet};

    fn ev(channel: u16, cookie: u64, len: usize) -> OutEvent {
        OutEvent::new(
            OutMeta {
                event_type: 0x1000_0001,
                flags: EventFlags::empty().with_channel(channel),
                recipient: ActorId::new(2, 1, 0),
                sender: ActorId::new(1, 1, 0),
                cookie,
                forward: None,
                decode: None,
            },
            Body::from_vec(vec![cookie as u8; len]),
        )
    }

    /// Reassembles the events of a run of payloads: (channel, cookie, body length).
    fn events(payloads: &[Vec<u8>]) -> Vec<(u16, u64, usize)> {
        let mut bodies: AHashMap<u16, Vec<u8>> = AHashMap::new();
        let mut out = Vec::new();
        for p in payloads {
            for part in parts(p) {
                let part = part.unwrap();
                if part.is_descriptor() {
                    let (d, _) = EventDescriptor::decode(part.bytes).unwrap();
                    let body = bodies.remove(&part.channel).unwrap_or_default();
                    assert!(body.iter().all(|b| *b == d.cookie as u8));
                    out.push((part.channel, d.cookie, body.len()));
                } else {
                    bodies.entry(part.channel).or_default().extend(part.bytes);
                }
            }
        }
        out
    }

    #[test]
    fn the_descriptor_written_in_place_is_the_wire_codec_s() {
        let e = ev(5, 9, 0);
        let mut out = Vec::new();
        e.meta.write_descriptor(&mut out);
        let want = EventDescriptor {
            event_type: 0x1000_0001,
            flags: EventFlags::empty().with_channel(5).bits(),
            recipient: ActorId::new(2, 1, 0),
            sender: ActorId::new(1, 1, 0),
            cookie: 9,
            ..Default::default()
        };
        assert_eq!(out, want.encode());
    }

    #[test]
    fn a_large_event_is_cut_into_parts_and_interleaved_with_other_channels() {
        let mut o = Outbox::default();
        o.push(ev(1, 1, 100_000));
        o.push(ev(0, 2, 10));
        o.push(ev(0, 3, 10));
        let mut payloads = Vec::new();
        let mut done = 0;
        loop {
            let mut p = Vec::new();
            let mut completed = Vec::new();
            o.fill(&mut p, Packet::SENDER_PAYLOAD, &mut completed);
            done += completed.len();
            if p.is_empty() {
                break;
            }
            assert!(p.len() <= Packet::SENDER_PAYLOAD);
            payloads.push(p);
        }
        assert_eq!(done, 3);
        assert!(o.is_empty());
        let got = events(&payloads);
        // The small events of channel 0 do not wait for the 100 kB one of channel 1.
        assert_eq!(got, vec![(0, 2, 10), (0, 3, 10), (1, 1, 100_000)]);
        assert!(payloads.len() >= 100_000 / Packet::SENDER_PAYLOAD);
    }

    #[test]
    fn order_within_a_channel_is_kept_and_empty_bodies_are_a_descriptor_alone() {
        let mut o = Outbox::default();
        for i in 0..50 {
            o.push(ev((i % 3) as u16, i, (i as usize * 37) % 500));
        }
        let mut payloads = Vec::new();
        loop {
            let mut p = Vec::new();
            o.fill(&mut p, 1000, &mut Vec::new());
            if p.is_empty() {
                break;
            }
            payloads.push(p);
        }
        let got = events(&payloads);
        assert_eq!(got.len(), 50);
        for ch in 0..3u16 {
            let cookies: Vec<u64> = got.iter().filter(|e| e.0 == ch).map(|e| e.1).collect();
            let want: Vec<u64> = (0..50).filter(|i| (i % 3) as u16 == ch).collect();
            assert_eq!(cookies, want);
        }
        assert!(got.iter().any(|e| e.2 == 0));
    }
}
