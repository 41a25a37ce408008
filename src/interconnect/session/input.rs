//! The reader of a connection: reads packets, checks them, hands the events they complete
//! to the local system in order, and tells the writer what to confirm and answer.
//!
//! Rules (YDB's receiver, `YDB_WIRE.md` §2.4–2.6):
//! 1. A checksum mismatch drops the connection (the session resumes on a new one).
//! 2. Every packet's confirm drops the kept packets up to it.
//! 3. A data packet at or below the last serial processed is a retransmission: skipped.
//!    The first one of a connection must be at most the last processed + 1, each later one
//!    exactly the previous + 1; anything else ends the session.
//! 4. Inline parts add to their channel's event; a descriptor part completes it. An event
//!    over the size limit, a malformed part or an XDC part ends the session.
//! 5. Empty packets: bit 63 ping request (answered at once: the writer is woken), bit 62
//!    ping response (the RTT), bit 61 clock sample, else only a confirm.
//! 6. The checksum is the session's (CRC32C, or XXH3 if the handshake chose it); under TLS
//!    it is not checked (YDB writes 0 then: TLS guards the bytes).
//! 7. An end of stream while nothing of ours is queued or unconfirmed ends the session at
//!    once (`ClosedByPeer`, YDB's clean close); any other end of the connection resumes.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{Host, Input, Session};
use crate::actors::{ActorId, Body, DecodeFn, EventFlags, EventHandle, EventType};
use crate::interconnect::base::NodeBase;
use crate::interconnect::error::SessionError;
use crate::interconnect::stream::IcStream;
use crate::interconnect::wire::{
    parts, EventDescriptor, Packet, PacketChecksum, PacketKind, WireError,
};

const READ_CHUNK: usize = 256 << 10;

/// Starts the reader of connection `gen`, whose packets carry checksums of `mode` (checked
/// only without TLS).
pub(crate) fn spawn_reader<N: Host>(
    node: Arc<N>,
    s: Arc<Session>,
    (gen, mode): (u64, PacketChecksum),
    stream: Arc<IcStream>,
) {
    let name = format!("ic{}<-{}", node.node_id, s.peer);
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || run(&node, &s, (gen, mode), stream));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "interconnect: cannot start a reader thread");
    }
}

/// The flags of a local send only, cleared from a received event: a forward target does
/// not cross the wire (a peer's `FORWARD_ON_NONDELIVERY` would forward to no one), and
/// `SUBSCRIBE_ON_SESSION` subscribes the sender of an event *leaving* a node to its
/// session. YDB's sender clears both from the descriptor; kept from a peer that sets them,
/// an event relayed to a third node would subscribe its sender, any id the peer makes up,
/// to that session, one subscriber per new id (issue 31 §1.2).
const LOCAL_ONLY: EventFlags = EventFlags::from_bits(
    EventFlags::FORWARD_ON_NONDELIVERY.bits() | EventFlags::SUBSCRIBE_ON_SESSION.bits(),
);

/// What a batch of packets asks of the session's state.
#[derive(Default)]
struct Effects {
    confirm: u64,
    ping_requests: Vec<u64>,
    rtt: Option<Duration>,
    processed_data: bool,
    events_in: u64,
    /// Of `events_in`, those whose type has no codec here.
    without_codec: u64,
    /// Of `events_in`, those whose flags named a forward target or a session subscription
    /// (cleared: see [`LOCAL_ONLY`]).
    local_only_flags: u64,
    /// Types seen with no codec for the first time, with a sender: logged once the input
    /// lock is released (the error logger is user code).
    first_without_codec: Vec<(EventType, ActorId)>,
    skipped: u64,
    /// The events completed, in order, handed to the local system in one go per read
    /// (`send_batch`: one message and one wake-up per recipient's run, where one each cost
    /// a message allocation, a queue push and a wake-up per event).
    handles: Vec<EventHandle>,
}

fn run<N: Host>(
    node: &Arc<N>,
    s: &Arc<Session>,
    (gen, mode): (u64, PacketChecksum),
    stream: Arc<IcStream>,
) {
    let _ = stream.set_read_timeout(None);
    // With TLS, YDB writes no packet checksum and checks none (TLS guards the bytes).
    let check = (!stream.is_tls()).then_some(mode);
    let mut stream: &IcStream = &stream;
    // Bytes [start, end) of `buf` are read and not yet processed (a packet cut short).
    let mut buf = vec![0u8; READ_CHUNK * 2];
    let (mut start, mut end) = (0, 0);
    // The serial of the last data packet on this connection.
    let mut prev_data: Option<u64> = None;
    let mut handles = Vec::new();
    let err = loop {
        if buf.len() - end < READ_CHUNK / 2 {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let n = match stream.read(&mut buf[end..]) {
            Ok(0) => {
                break SessionError::Io(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed by the peer".into(),
                );
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break SessionError::io(&e),
        };
        end += n;
        s.last_rx.store(node.now_nanos(), Ordering::Relaxed);
        let mut fx = Effects {
            handles: std::mem::take(&mut handles),
            ..Effects::default()
        };
        let result = {
            let mut input = s.input.lock();
            // The epoch is read before the generation is checked. `lose` stores the new
            // generation and then bumps the epoch: read the other way round, a reader of
            // the ended connection preempted between the two reads passed the generation
            // check, saw the next session's epoch, reset the input to it and processed its
            // old session's packets as the new session's, whose writer then confirmed
            // serials the peer never sent in it (`interconnect_bad_input`'s restarted-peer
            // test, which failed once under load). Now a new epoch seen here means the new
            // generation is seen too, and the reader stops.
            let epoch = s.epoch.load(Ordering::Acquire);
            if s.reader_gen.load(Ordering::Acquire) != gen {
                return;
            }
            if input.epoch != epoch {
                input.epoch = epoch;
                input.last_processed = 0;
                input.assembly.clear();
                input.assembly_bytes = 0;
            }
            let r = process(
                node,
                &mut input,
                &mut buf[start..end],
                (check, &mut prev_data),
                &mut fx,
            );
            // Delivered before the input lock is released (a resumed connection's reader
            // waits for it: order is kept) and before the confirm is published.
            node.system.0.send_batch(&mut fx.handles);
            s.publish_processed(input.epoch, input.last_processed);
            r
        };
        handles = std::mem::take(&mut fx.handles);
        for (event_type, sender) in fx.first_without_codec.drain(..) {
            node.log_missing_codec(event_type, sender);
        }
        let (used, error) = match result {
            Ok(used) => (used, None),
            Err((used, e)) => (used, Some(e)),
        };
        start += used;
        let fallout = {
            let mut st = s.state.lock();
            // Counted whatever became of the connection meanwhile: these bytes were read
            // and these events handed to the local system already (a resume between the
            // two locks used to lose them from the counts).
            st.stats.bytes_in += n as u64;
            st.stats.events_in += fx.events_in;
            st.stats.events_without_codec += fx.without_codec;
            st.stats.local_only_flags_cleared += fx.local_only_flags;
            st.stats.packets_skipped += fx.skipped;
            if st.gen != gen {
                return;
            }
            if let Some(rtt) = fx.rtt {
                st.stats.rtt = Some(rtt);
            }
            st.confirm(fx.confirm);
            // The writer is woken for a ping answer, for a confirm only if it sleeps longer
            // than the confirm delay (it wakes up by itself in time while traffic comes
            // in), and for the confirm of ours only if events wait (the in-flight window
            // may have opened).
            let confirm_wake = fx.processed_data
                && st.driver_waiting
                && st
                    .driver_wake_at
                    .is_none_or(|t| t > std::time::Instant::now() + node.cfg.confirm_delay);
            let wake = !fx.ping_requests.is_empty()
                || confirm_wake
                || (fx.confirm > 0 && !st.out.is_empty());
            // Only the latest request is answered: a flood of pings cannot pile up.
            if let Some(last) = fx.ping_requests.last() {
                st.ping_responses.clear();
                st.ping_responses.push(*last);
            }
            if let Some(e) = error {
                Some(s.lose(node, &mut st, gen, e))
            } else {
                if wake && st.driver_waiting {
                    st.driver_waiting = false;
                    s.cond.notify_one();
                }
                None
            }
        };
        if let Some(f) = fallout {
            f.deliver(node, s.peer);
            return;
        }
    };
    let f = {
        let mut st = s.state.lock();
        // A clean end of stream with nothing of ours pending ends the session at once (YDB's
        // rule): the peer stopped or ended it, and a resume would only wait out the
        // lost-connection timeout.
        let eof = matches!(err, SessionError::Io(std::io::ErrorKind::UnexpectedEof, _));
        let err = if eof && st.nothing_pending() {
            SessionError::ClosedByPeer
        } else {
            err
        };
        s.lose(node, &mut st, gen, err)
    };
    f.deliver(node, s.peer);
}

/// Processes the whole packets at the start of `bytes`; returns how many bytes they took,
/// or the error that stops the connection (with the bytes taken before it).
fn process(
    node: &NodeBase,
    input: &mut Input,
    bytes: &mut [u8],
    (check, prev_data): (Option<PacketChecksum>, &mut Option<u64>),
    fx: &mut Effects,
) -> Result<usize, (usize, SessionError)> {
    let mut at = 0;
    while bytes.len() - at >= Packet::HEADER_LEN {
        let b = &mut bytes[at..];
        let confirm = u64::from_le_bytes(b[0..8].try_into().unwrap_or_default());
        let serial = u64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
        let checksum = u32::from_le_bytes(b[16..20].try_into().unwrap_or_default());
        let len = u16::from_le_bytes(b[20..22].try_into().unwrap_or_default()) as usize;
        let total = Packet::HEADER_LEN + len;
        if b.len() < total {
            break;
        }
        if let Some(mode) = check {
            // Summed where it lies, its checksum field zeroed (the packet's bytes are
            // consumed here): no copy, and no streaming hasher for a large packet.
            b[16..20].fill(0);
            let actual = mode.compute_in_place(&b[..total]);
            if actual != checksum {
                let e = WireError::BadChecksum {
                    expected: checksum,
                    actual,
                };
                return Err((at, SessionError::Checksum(e)));
            }
        }
        let payload = &b[Packet::HEADER_LEN..total];
        fx.confirm = fx.confirm.max(confirm);
        let kind = if payload.is_empty() {
            Packet::data(confirm, serial, Vec::new()).kind()
        } else {
            PacketKind::Data { serial }
        };
        match kind {
            PacketKind::Data { serial } => {
                let last = input.last_processed;
                // After the first data packet of a connection, each is the previous + 1
                // (YDB's rule): resends come first and in order.
                if let Some(prev) = *prev_data {
                    if serial != prev.wrapping_add(1) {
                        let why = format!("data packet {serial} after {prev} on this connection");
                        return Err((at, SessionError::Protocol(why)));
                    }
                }
                if serial <= last {
                    fx.skipped += 1;
                } else if serial == last + 1 {
                    if let Err(e) = deliver_parts(node, input, payload, fx) {
                        return Err((at, e));
                    }
                    input.last_processed = serial;
                    fx.processed_data = true;
                } else {
                    let why = format!("first data packet {serial} after {last} processed");
                    return Err((at, SessionError::Protocol(why)));
                }
                *prev_data = Some(serial);
            }
            PacketKind::PingRequest { stamp } => fx.ping_requests.push(stamp),
            PacketKind::PingResponse { stamp } => {
                let now = node.now_nanos();
                if stamp <= now {
                    fx.rtt = Some(Duration::from_nanos(now - stamp));
                }
            }
            PacketKind::Clock { .. } | PacketKind::Confirm => {}
        }
        at += total;
    }
    Ok(at)
}

/// The parts of one data packet: events completed are handed to the system in order.
///
/// An event whose body is one inline part right before its descriptor (the usual small
/// event) skips the channel's assembly buffer: its body is copied once, from the packet.
fn deliver_parts(
    node: &NodeBase,
    input: &mut Input,
    payload: &[u8],
    fx: &mut Effects,
) -> Result<(), SessionError> {
    let max = node.cfg.max_event_size;
    // An inline part not yet added to its channel's buffer (that buffer was empty).
    let mut held: Option<(u16, &[u8])> = None;
    // The decode hook of the last event type seen: a packet's events are mostly of one
    // type (profile, `ic_small_events`: the codec map's look-up per event was ~30 of the
    // reader's ~300 instructions of its own per event).
    let mut last_type: Option<(EventType, Option<DecodeFn>)> = None;
    for part in parts(payload) {
        let part = part.map_err(|e| SessionError::Protocol(format!("bad part: {e}")))?;
        if part.is_xdc() {
            return Err(SessionError::Protocol(
                "an XDC part, which was not negotiated".into(),
            ));
        }
        if !part.is_descriptor() {
            if let Some((ch, bytes)) = held.take() {
                stash(input, ch, bytes, max)?;
            }
            // No partial event at all (the usual case) needs no look-up of the channel.
            let empty = input.assembly_bytes == 0
                || input.assembly.get(&part.channel).is_none_or(Vec::is_empty);
            if empty && part.bytes.len() <= max {
                held = Some((part.channel, part.bytes));
            } else {
                stash(input, part.channel, part.bytes, max)?;
            }
            continue;
        }
        let (d, _) = EventDescriptor::decode(part.bytes)
            .map_err(|e| SessionError::Protocol(format!("bad descriptor: {e}")))?;
        let body = match held.take() {
            Some((ch, bytes)) if ch == part.channel => Body::from_slice(bytes),
            other => {
                if let Some((ch, bytes)) = other {
                    stash(input, ch, bytes, max)?;
                }
                assembled(input, part.channel)
            }
        };
        if d.verify_body(&body).is_err() {
            return Err(SessionError::Protocol(format!(
                "event {:#x}: body checksum mismatch",
                d.event_type
            )));
        }
        let mut flags = EventFlags::from_bits(d.flags).without(EventFlags::EXTENDED_FORMAT);
        if d.flags & LOCAL_ONLY.bits() != 0 {
            flags = flags.without(LOCAL_ONLY);
            fx.local_only_flags += 1;
        }
        let decode = match last_type {
            Some((t, decode)) if t == d.event_type => decode,
            _ => {
                let decode = node.codecs.decoder(d.event_type);
                last_type = Some((d.event_type, decode));
                decode
            }
        };
        if decode.is_none() {
            fx.without_codec += 1;
            if node.first_missing_codec(d.event_type) {
                fx.first_without_codec.push((d.event_type, d.sender));
            }
        }
        let h = EventHandle::serialized_with(d.event_type, d.recipient, d.sender, body, decode)
            .with_flags(flags)
            .with_cookie(d.cookie);
        fx.events_in += 1;
        fx.handles.push(h);
    }
    if let Some((ch, bytes)) = held {
        stash(input, ch, bytes, max)?;
    }
    Ok(())
}

/// The body assembled on `channel` (empty if none). A small one is copied into the
/// event's payload and the channel keeps its buffer for the next: DHAT
/// (`bench --only ic_small_events`): a small event cut across two packets cost a buffer
/// of its own, 0.029 allocations per event (freed on the worker).
fn assembled(input: &mut Input, channel: u16) -> Body {
    let Some(buf) = input.assembly.get_mut(&channel) else {
        return Body::new();
    };
    input.assembly_bytes -= buf.len();
    if buf.len() <= Body::new().inline_size() && buf.capacity() <= KEPT_ASSEMBLY {
        let body = Body::from_slice(buf);
        buf.clear();
        body
    } else {
        Body::from_vec(input.assembly.remove(&channel).unwrap_or_default())
    }
}

/// The largest assembly buffer a channel keeps once its event is complete.
const KEPT_ASSEMBLY: usize = 4 << 10;

/// Adds an inline part to its channel's partial event, within the size limits: `max` for
/// one event, four times that for all channels together.
fn stash(input: &mut Input, channel: u16, bytes: &[u8], max: usize) -> Result<(), SessionError> {
    let body = input.assembly.entry(channel).or_default();
    let size = body.len() + bytes.len();
    if size > max {
        return Err(SessionError::OversizedEvent { size, max });
    }
    let total = input.assembly_bytes + bytes.len();
    if total > max.saturating_mul(4) {
        return Err(SessionError::OversizedEvent {
            size: total,
            max: max.saturating_mul(4),
        });
    }
    body.extend_from_slice(bytes);
    input.assembly_bytes = total;
    Ok(())
}
