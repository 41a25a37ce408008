//! The events waiting to leave, per channel, and how they are cut into data packets:
//! each packet takes parts from the channels in turn, so that a large event on one channel
//! does not hold back the others; order is kept within a channel.

use std::collections::VecDeque;

use ahash::AHashMap;

use crate::actors::{ActorId, Body, DecodeFn, EventFlags, EventHandle, EventType};
use crate::interconnect::wire::{EventDescriptor, Packet, PacketChecksum};

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

    /// Appends the descriptor part of channel `ch`: its 4-byte head, then the 80-byte
    /// descriptor (`EventDescriptor`'s layout): the flags without
    /// `FORWARD_ON_NONDELIVERY` and `SUBSCRIBE_ON_SESSION`, no trace, body checksum 0 (as
    /// YDB's sender).
    fn write_descriptor_part(&self, ch: u16, out: &mut Vec<u8>) {
        let wire = self
            .flags
            .without(EventFlags::FORWARD_ON_NONDELIVERY | EventFlags::SUBSCRIBE_ON_SESSION);
        // Built on the stack and appended at once (one capacity check, not nine).
        let mut d = [0u8; 4 + EventDescriptor::LEN];
        d[0..2].copy_from_slice(&(ch | 0x8000).to_le_bytes());
        d[2..4].copy_from_slice(&(EventDescriptor::LEN as u16).to_le_bytes());
        d[4..8].copy_from_slice(&self.event_type.to_le_bytes());
        d[8..12].copy_from_slice(&wire.bits().to_le_bytes());
        d[12..28].copy_from_slice(&self.recipient.to_le_bytes());
        d[28..44].copy_from_slice(&self.sender.to_le_bytes());
        d[44..52].copy_from_slice(&self.cookie.to_le_bytes());
        // Trace (28 bytes) and body checksum (4) stay 0.
        out.extend_from_slice(&d);
    }
}

/// An event taken out of the outbox whole (a session's end): its record and its body.
pub(crate) struct OutEvent {
    pub(crate) meta: OutMeta,
    pub(crate) body: Body,
}

impl OutEvent {
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

/// A waiting event's record; its body is the next `len` bytes of its channel's buffer.
struct Queued {
    meta: OutMeta,
    len: usize,
}

/// One channel's waiting events: their records in order, their bodies back to back in one
/// buffer (`bodies[head..]`), the front event's first `front_sent` bytes already in packets.
struct ChannelQueue {
    channel: u16,
    events: VecDeque<Queued>,
    bodies: Vec<u8>,
    head: usize,
    front_sent: usize,
}

/// A channel's body buffer is compacted once this much of it is consumed and that is at
/// least half of it (an amortized copy of each byte at most once).
const COMPACT_AT: usize = 1 << 20;
/// An emptied body buffer keeps at most this capacity, and an emptied record queue at most
/// [`KEEP_EVENTS`] records: a burst does not pin its peak for the session's life, while a
/// stream that empties its queue now and then does not shrink and regrow it each time.
const KEEP_CAPACITY: usize = 8 << 20;
/// See [`KEEP_CAPACITY`].
const KEEP_EVENTS: usize = 128 << 10;

impl ChannelQueue {
    fn new(channel: u16) -> ChannelQueue {
        ChannelQueue {
            channel,
            events: VecDeque::new(),
            bodies: Vec::new(),
            head: 0,
            front_sent: 0,
        }
    }

    /// The front event is gone: its body's bytes are consumed.
    fn pop_front(&mut self) -> Option<(OutMeta, &[u8])> {
        let Queued { meta, len } = self.events.pop_front()?;
        let at = self.head;
        self.head += len;
        self.front_sent = 0;
        // The bytes stay until `compact`.
        Some((meta, &self.bodies[at..at + len]))
    }

    /// The front event, wholly written into packets: popped, its body kept in its meta
    /// only for a forward on non-delivery.
    fn finish_front(&mut self) -> Option<OutMeta> {
        let (mut meta, body) = self.pop_front()?;
        if let Some(f) = meta.forward.as_mut() {
            f.1 = body.to_vec();
        }
        Some(meta)
    }

    /// Drops the consumed bytes when that pays (see [`COMPACT_AT`]).
    fn compact(&mut self) {
        if self.events.is_empty() {
            self.bodies.clear();
            self.head = 0;
            if self.bodies.capacity() > KEEP_CAPACITY {
                self.bodies.shrink_to(KEEP_CAPACITY);
            }
            if self.events.capacity() > KEEP_EVENTS {
                self.events.shrink_to(KEEP_EVENTS);
            }
        } else if self.head >= COMPACT_AT && self.head * 2 >= self.bodies.len() {
            self.bodies.drain(..self.head);
            self.head = 0;
        }
    }
}

/// The events waiting to leave, per channel, with the channels that have some in turn.
///
/// Each channel keeps its events' records (`OutMeta`, 64 bytes) in a queue and their
/// bodies back to back in one byte buffer: queuing an event copies its encoded bytes once,
/// from the sender's scratch buffer, and allocates nothing once the buffers have grown
/// (profile, `ic_small_events`: the previous per-event slot, 208 bytes with its body inline,
/// was moved three times by the sender, and the writer's first read of each slot missed
/// the cache: 40 % of `fill`'s time with 64 Ki events queued).
///
/// The queues sit in a vector, found by a channel's index: a push to the channel of the
/// previous push (the usual stream) and the turns (queue indices) need no map look-up
/// (profile: the map's hash per push was ~30 of the sender's ~400 instructions of its own
/// per event).
#[derive(Default)]
pub(crate) struct Outbox {
    /// Each channel ever used, with its queue (kept when it empties: channels are few).
    queues: Vec<ChannelQueue>,
    /// Channel → its index in `queues`.
    index: AHashMap<u16, usize>,
    /// The index of the last push's queue.
    last: usize,
    /// Indices of the queues with events, in the order they are served.
    turn: VecDeque<usize>,
    len: usize,
    /// The waiting events' [`cost`](Outbox::cost)s.
    bytes: usize,
}

impl Outbox {
    /// What an event with a body of `len` bytes is counted for against the queue's byte
    /// limit: its body and a fixed cost (the event's own record).
    pub(crate) fn cost(len: usize) -> usize {
        len + std::mem::size_of::<Queued>()
    }

    /// Queues an event: its record and a copy of its body.
    pub(crate) fn push(&mut self, meta: OutMeta, body: &[u8]) {
        let channel = meta.flags.channel();
        let i = match self.queues.get(self.last) {
            Some(q) if q.channel == channel => self.last,
            _ => {
                let next = self.queues.len();
                let i = *self.index.entry(channel).or_insert(next);
                if i == next {
                    self.queues.push(ChannelQueue::new(channel));
                }
                self.last = i;
                i
            }
        };
        let q = &mut self.queues[i];
        if q.events.is_empty() {
            self.turn.push_back(i);
            q.compact();
        }
        q.bodies.extend_from_slice(body);
        q.events.push_back(Queued {
            meta,
            len: body.len(),
        });
        self.bytes += Self::cost(body.len());
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What the waiting events cost (see [`cost`](Self::cost)).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets how much of each event was sent: for a new session, in which a partly
    /// sent event goes out whole (its first parts went to a peer session that is gone).
    pub(crate) fn restart_partial(&mut self) {
        for q in &mut self.queues {
            q.front_sent = 0;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every waiting event, channel by channel.
    pub(crate) fn drain(&mut self) -> Vec<OutEvent> {
        let mut all = Vec::with_capacity(self.len);
        for i in self.turn.drain(..) {
            if let Some(q) = self.queues.get_mut(i) {
                while let Some((meta, body)) = q.pop_front() {
                    let body = Body::from_slice(body);
                    all.push(OutEvent { meta, body });
                }
                q.compact();
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
            let Some(q) = self.queues.get_mut(i) else {
                self.turn.pop_front();
                continue;
            };
            let ch = q.channel;
            let full = loop {
                let Some(front) = q.events.front() else {
                    break false;
                };
                let len = front.len;
                let room = max.saturating_sub(payload.len());
                let whole = 4 + len + 4 + EventDescriptor::LEN;
                if q.front_sent == 0 && len > 0 && whole <= room {
                    // A small event whole, in one reservation (profile: the part-by-part
                    // path's capacity checks and second turn of the loop were ~50 of this
                    // function's ~220 instructions per 64-byte event).
                    payload.reserve(whole);
                    let at = q.head;
                    payload.extend_from_slice(&[
                        ch as u8,
                        (ch >> 8) as u8,
                        len as u8,
                        (len >> 8) as u8,
                    ]);
                    payload.extend_from_slice(&q.bodies[at..at + len]);
                    front.meta.write_descriptor_part(ch, payload);
                    if let Some(meta) = q.finish_front() {
                        self.len -= 1;
                        self.bytes -= Self::cost(len);
                        done.push(meta);
                    }
                } else if q.front_sent < len {
                    if room <= 4 {
                        break true;
                    }
                    let n = (room - 4).min(len - q.front_sent).min(u16::MAX as usize);
                    // Never past `max`: a packet buffer keeps its capacity (profile:
                    // reserving for a descriptor that did not fit doubled most packet
                    // buffers to 16 KiB, a reallocation and a copy per packet).
                    payload.reserve((4 + n + 4 + EventDescriptor::LEN).min(room));
                    payload.extend_from_slice(&ch.to_le_bytes());
                    payload.extend_from_slice(&(n as u16).to_le_bytes());
                    let at = q.head + q.front_sent;
                    payload.extend_from_slice(&q.bodies[at..at + n]);
                    q.front_sent += n;
                } else {
                    if room < 4 + EventDescriptor::LEN {
                        break true;
                    }
                    front.meta.write_descriptor_part(ch, payload);
                    if let Some(meta) = q.finish_front() {
                        self.len -= 1;
                        self.bytes -= Self::cost(len);
                        done.push(meta);
                    }
                }
                if !alone {
                    break false;
                }
            };
            // Once per turn, not per event (profile: ~20 instructions per small event).
            q.compact();
            if full {
                break;
            }
            if q.events.is_empty() {
                self.turn.pop_front();
            } else {
                // Next part from the next channel with events.
                self.turn.rotate_left(1);
            }
        }
    }
}

/// Appends a packet (header with the checksum of `mode`, then the payload) to `out`.
///
/// The packet is laid out first with a zero checksum and summed where it lies (profile,
/// `ic_small_events`: a full packet's XXH3 went through the streaming hasher, an
/// allocation and a free per packet on each side, ~0.04 per event).
pub(crate) fn write_packet(
    out: &mut Vec<u8>,
    mode: PacketChecksum,
    confirm: u64,
    serial: u64,
    payload: &[u8],
) {
    let start = out.len();
    out.reserve(Packet::HEADER_LEN + payload.len());
    out.extend_from_slice(&confirm.to_le_bytes());
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
    let checksum = mode.compute_in_place(&out[start..]);
    out[start + 16..start + 20].copy_from_slice(&checksum.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interconnect::wire::{parts, EventDescriptor, Packet};

    fn ev(channel: u16, cookie: u64, len: usize) -> (OutMeta, Vec<u8>) {
        (
            OutMeta {
                event_type: 0x1000_0001,
                flags: EventFlags::empty().with_channel(channel),
                recipient: ActorId::new(2, 1, 0),
                sender: ActorId::new(1, 1, 0),
                cookie,
                forward: None,
                decode: None,
            },
            vec![cookie as u8; len],
        )
    }

    fn push(o: &mut Outbox, (meta, body): (OutMeta, Vec<u8>)) {
        o.push(meta, &body);
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
        let (meta, _) = ev(5, 9, 0);
        let mut out = Vec::new();
        meta.write_descriptor_part(5, &mut out);
        assert_eq!(out[..4], [5, 0x80, 80, 0]);
        out.drain(..4);
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
        push(&mut o, ev(1, 1, 100_000));
        push(&mut o, ev(0, 2, 10));
        push(&mut o, ev(0, 3, 10));
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
            push(&mut o, ev((i % 3) as u16, i, (i as usize * 37) % 500));
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

    #[test]
    fn bodies_stay_whole_and_in_order_across_the_buffer_s_compactions() {
        // 3 000 events of 1 000 bytes (3 MB through one channel's buffer, compacted past
        // 1 MiB consumed), pushed while packets are cut; a large one split across packets
        // in between, and a forward target's body kept.
        let mut o = Outbox::default();
        let mut payloads = Vec::new();
        let mut done = Vec::new();
        let mut pushed = 0u64;
        let mut cut = |o: &mut Outbox, n: usize, done: &mut Vec<OutMeta>| {
            for _ in 0..n {
                let mut p = Vec::new();
                o.fill(&mut p, Packet::SENDER_PAYLOAD, done);
                if p.is_empty() {
                    break;
                }
                assert!(p.len() <= Packet::SENDER_PAYLOAD);
                payloads.push(p);
            }
        };
        while pushed < 3_000 {
            for _ in 0..500 {
                let len = if pushed == 1_234 { 50_000 } else { 1_000 };
                let (mut meta, body) = ev(0, pushed, len);
                if pushed == 77 {
                    meta.flags |= EventFlags::FORWARD_ON_NONDELIVERY;
                    meta.forward = Some(Box::new((ActorId::new(1, 9, 0), Vec::new())));
                }
                o.push(meta, &body);
                pushed += 1;
            }
            cut(&mut o, 40, &mut done);
        }
        cut(&mut o, usize::MAX, &mut done);
        assert!(o.is_empty());
        assert_eq!(o.bytes(), 0);
        let got = events(&payloads);
        assert_eq!(got.len(), 3_000);
        for (i, (ch, cookie, len)) in got.into_iter().enumerate() {
            let want = if i == 1_234 { 50_000 } else { 1_000 };
            assert_eq!((ch, cookie, len), (0, i as u64, want));
        }
        let cookies: Vec<u64> = done.iter().map(|m| m.cookie).collect();
        assert_eq!(cookies, (0..3_000).collect::<Vec<u64>>());
        let forward = done[77].forward.as_ref().expect("the forward target");
        assert_eq!(forward.1, vec![77u8; 1_000]);
    }

    #[test]
    fn drain_gives_back_every_waiting_event_whole_and_the_costs_add_up() {
        let mut o = Outbox::default();
        for i in 0..10 {
            push(&mut o, ev((i % 2) as u16, i, 300));
        }
        assert_eq!(o.bytes(), 10 * Outbox::cost(300));
        // The first event goes out in part only.
        let mut p = Vec::new();
        o.fill(&mut p, 100, &mut Vec::new());
        assert!(!p.is_empty());
        o.restart_partial();
        let all = o.drain();
        assert!(o.is_empty() && o.bytes() == 0);
        let mut got: Vec<(u16, u64, usize)> = all
            .iter()
            .map(|e| (e.meta.flags.channel(), e.meta.cookie, e.body.len()))
            .collect();
        got.sort_by_key(|e| e.1);
        let want: Vec<(u16, u64, usize)> = (0..10).map(|i| ((i % 2) as u16, i, 300)).collect();
        assert_eq!(got, want);
        assert!(all
            .iter()
            .all(|e| e.body.iter().all(|b| *b == e.meta.cookie as u8)));
    }

    #[test]
    fn a_packet_summed_in_place_is_the_wire_codec_s_in_both_modes() {
        for mode in [PacketChecksum::Crc32c, PacketChecksum::Xxh3] {
            for len in [
                0usize, 1, 17, 128, 129, 234, 235, 240, 241, 1024, 1025, 4000, 8074,
            ] {
                let payload: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut out = vec![0xAA; 3];
                write_packet(&mut out, mode, 77, 5, &payload);
                let want = Packet::data(77, 5, payload.clone())
                    .encode_with(mode)
                    .unwrap();
                assert_eq!(&out[3..], &want[..], "{mode:?} {len}");
                assert_eq!(
                    u32::from_le_bytes(out[19..23].try_into().unwrap()),
                    mode.compute(77, 5, &payload)
                );
            }
        }
    }
}
