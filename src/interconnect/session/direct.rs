//! The sender's own write: an event queued into an idle session goes out on the sender's
//! thread at once, instead of waking the driver to write it.
//!
//! Profile (`ic_ping_pong_rtt`): every one-way trip crossed three threads, the sender's
//! worker, the session's driver (woken through its condition variable to write one
//! packet) and the peer's reader, then the recipient's worker; on a shared machine each
//! wake-up is several microseconds of the round trip. Writing on the sender's thread cuts
//! the driver out of that chain (YDB's session also writes from the actor that got the
//! event when its socket is writable).
//!
//! Rules (the wire order depends on them):
//! 1. One writer at a time: `State::writing` is set, under the state lock, by whoever
//!    writes packets outside the lock (the driver for its batches, a sender here), so the
//!    packets reach the socket in the order of their serials.
//! 2. Only when the driver has written the connection's resends (`State::ready_gen` is the
//!    connection's generation), nothing else waits (the event is the only one queued, no
//!    ping answer is due), the unconfirmed bytes and packets are few (the socket's send
//!    buffer cannot be full: the write does not block in practice; it is bounded by the
//!    write timeout anyway; and a stream's events go in the driver's batches), and the
//!    connection is plain TCP (a TLS stream is the driver's alone).
//! 3. A failed write loses the connection as the driver's would; the packet is kept
//!    unconfirmed and goes out again on the next connection.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use super::driver::add_pings;
use super::outbox::write_packet;
use super::{Conn, Host, SentPacket, Session, State};
use crate::interconnect::base::NodeBase;
use crate::interconnect::error::SessionError;
use crate::interconnect::stream::IcStream;
use crate::interconnect::wire::Packet;

/// The most bytes kept unconfirmed for a sender to write itself (well under any socket's
/// send buffer).
const DIRECT_MAX_UNCONFIRMED: usize = 16 << 10;

/// The most packets kept unconfirmed for a sender to write itself: a conversation has one
/// or two in flight; a stream has more, and its events wait for the driver's batch.
///
/// Profile (`ic_small_events`, `perf trace`): with the byte bound alone, after each
/// confirm the sending thread wrote up to ~100 one-event packets itself (735 `sendto`
/// calls on the sender's thread against 383 by the driver for 400 k events; 1 583 of the
/// 3 468 packet buffers were such packets), a system call per event where the driver
/// writes ~300 events in one.
const DIRECT_MAX_PACKETS: usize = 4;

/// A packet cut by a sender, to write once the state lock is released.
pub(crate) struct DirectWrite {
    gen: u64,
    stream: Arc<IcStream>,
    bytes: Vec<u8>,
}

impl Session {
    /// Under the state lock, right after an event was queued: cuts the packet and takes
    /// the writer's turn if the rules above allow it; `None` leaves the event to the
    /// driver.
    pub(crate) fn take_direct_write(&self, node: &NodeBase, st: &mut State) -> Option<DirectWrite> {
        let Conn::Connected { gen, stream } = &st.conn else {
            return None;
        };
        if st.writing
            || st.ready_gen != *gen
            || st.out.len() != 1
            || !st.ping_responses.is_empty()
            || st.unconfirmed_bytes > DIRECT_MAX_UNCONFIRMED
            || st.unconfirmed.len() >= DIRECT_MAX_PACKETS
            || stream.is_tls()
            || node.is_stopping()
        {
            return None;
        }
        let (gen, stream) = (*gen, stream.clone());
        let mut payload = st.payload_buffer();
        let mut events = st.events_buffer();
        st.out
            .fill(&mut payload, Packet::SENDER_PAYLOAD, &mut events);
        if payload.is_empty() {
            st.spare.push(payload);
            st.spare_events.push(events);
            return None;
        }
        // A large event may be cut only in part: the driver, woken after the write,
        // sends the rest.
        let now = Instant::now();
        let confirm = self.confirm();
        st.next_serial += 1;
        let serial = st.next_serial;
        let mut bytes = std::mem::take(&mut st.direct_buf);
        bytes.clear();
        write_packet(&mut bytes, st.checksum, confirm, serial, &payload);
        add_pings(node, st, &mut bytes, confirm, now, true);
        if st.unconfirmed.is_empty() {
            st.confirm_progress_at = now;
        }
        st.stats.events_out += events.len() as u64;
        st.unconfirmed_bytes += payload.len();
        st.unconfirmed.push_back(SentPacket {
            serial,
            payload,
            events,
        });
        st.confirm_sent = confirm;
        st.last_confirm_at = now;
        st.writing = true;
        Some(DirectWrite { gen, stream, bytes })
    }

    /// Writes a packet cut by [`take_direct_write`](Self::take_direct_write), outside the
    /// lock, then gives the writer's turn back (waking the driver if something waits).
    pub(crate) fn direct_write<N: Host>(self: &Arc<Self>, node: &Arc<N>, w: DirectWrite) {
        let DirectWrite { gen, stream, bytes } = w;
        let result = (&*stream).write_all(&bytes);
        let fallout = {
            let mut st = self.state.lock();
            st.writing = false;
            let fallout = match result {
                Ok(()) => {
                    st.stats.bytes_out += bytes.len() as u64;
                    None
                }
                Err(e) => Some(self.lose(node, &mut st, gen, SessionError::io(&e))),
            };
            st.direct_buf = bytes;
            if st.driver_waiting
                && (!st.out.is_empty() || !st.ping_responses.is_empty() || st.driver_held)
            {
                st.driver_waiting = false;
                self.cond.notify_one();
            }
            fallout
        };
        if let Some(f) = fallout {
            f.deliver(node, self.peer);
        }
    }
}
