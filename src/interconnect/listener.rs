//! The listener of a node (`ic<N>-listen`): accepts connections, keeps each waiting for
//! its first bytes, asks the admission (`admission.rs`) for a slot by what they prove, and
//! starts a handshake thread (`handshake::accept`) for each one admitted.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::admission::{Admission, INITIAL_PACKET_DEADLINE, WAITING};
use super::challenge;
use super::handshake;
use super::shared::NodeShared;
use super::wire::{ExBlock, InitialPacket, WireError};

/// How long the listener sleeps between two looks at the waiting connections.
const LOOK_PERIOD: Duration = Duration::from_millis(1);
/// What the listener peeks of a waiting connection: the initial packet and an admission
/// frame (about 100 bytes), with room to spare.
const PEEK_LEN: usize = InitialPacket::LEN + 512;

/// An accepted connection waiting for its first bytes (rule 1).
struct Waiting {
    stream: TcpStream,
    addr: SocketAddr,
    since: Instant,
}

/// What a waiting connection's first bytes say.
enum Look {
    /// Not all there yet.
    Wait,
    /// The admission frame proves the secret; the node the initial packet names.
    Proven(u32),
    /// Anything else (bytes that are no handshake, a closed connection, the time is up):
    /// the handshake says why, by its address's slot.
    Unproven,
}

/// The listener (`ic<N>-listen`): accepts connections, keeps them waiting for their first
/// bytes, and starts a handshake thread for each one admitted (see the module docs). Ends
/// once the node stops (the stop connects to wake it).
pub(crate) fn listen(node: &Arc<NodeShared>, listener: TcpListener) {
    let admission = node.admission.clone();
    let wait_for = INITIAL_PACKET_DEADLINE.min(node.cfg.handshake_timeout);
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let mut buf = vec![0u8; PEEK_LEN];
    let mut blocking = true;
    loop {
        if node.is_stopping() {
            return;
        }
        // Nothing waits: block in accept. Else look at the waiting ones between accepts.
        if waiting.is_empty() != blocking && listener.set_nonblocking(!waiting.is_empty()).is_ok() {
            blocking = waiting.is_empty();
        }
        let mut accepted = 0;
        while accepted < 64 {
            match listener.accept() {
                Ok((stream, addr)) => {
                    if node.is_stopping() {
                        return;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    if waiting.len() == WAITING {
                        waiting.pop_front();
                    }
                    waiting.push_back(Waiting {
                        stream,
                        addr,
                        since: Instant::now(),
                    });
                    accepted += 1;
                    if blocking {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, say: do not spin; the backlog waits.
                    tracing::warn!(node = node.node_id, error = %e, "interconnect: accept failed");
                    std::thread::sleep(Duration::from_millis(10));
                    break;
                }
            }
        }
        let now = Instant::now();
        let mut i = 0;
        while i < waiting.len() {
            let look = look(node, &admission, &waiting[i], &mut buf, now, wait_for);
            if matches!(look, Look::Wait) {
                i += 1;
            } else if let Some(w) = waiting.remove(i) {
                start(node, &admission, w, &look);
            }
        }
        if !waiting.is_empty() && accepted == 0 {
            std::thread::sleep(LOOK_PERIOD);
        }
    }
}

/// What `w`'s first bytes say by `now` (its time is up after `wait_for`).
fn look(
    node: &NodeShared,
    admission: &Admission,
    w: &Waiting,
    buf: &mut [u8],
    now: Instant,
    wait_for: Duration,
) -> Look {
    let n = match w.stream.peek(buf) {
        // A closed connection, or one that broke: its handshake says so.
        Ok(0) => return Look::Unproven,
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
        Err(_) => return Look::Unproven,
    };
    let late = now.saturating_duration_since(w.since) >= wait_for;
    let wait = if late { Look::Unproven } else { Look::Wait };
    if n < InitialPacket::LEN {
        return wait;
    }
    let Some(secret) = node.secret() else {
        return Look::Unproven;
    };
    let Ok((hello, _)) = InitialPacket::decode(&buf[..InitialPacket::LEN]) else {
        return Look::Unproven;
    };
    let claimed = hello.self_virtual_id.node_id();
    match ExBlock::decode(&buf[InitialPacket::LEN..n]) {
        Ok((frame, _)) => {
            match challenge::check_admit(secret, &frame.payload, &hello, node.node_id) {
                Ok(ni)
                    if claimed != node.node_id
                        && node.session(claimed).is_some()
                        && admission.fresh_nonce(&ni) =>
                {
                    Look::Proven(claimed)
                }
                _ => Look::Unproven,
            }
        }
        Err(WireError::Truncated { .. }) if n < buf.len() => wait,
        Err(_) => Look::Unproven,
    }
}

/// Starts the handshake of `w` if it gets a slot (a proven one for a proven connection,
/// else by its address); otherwise closes it.
fn start(node: &Arc<NodeShared>, admission: &Arc<Admission>, w: Waiting, look: &Look) {
    let ticket = match look {
        Look::Proven(id) => admission
            .admit_proven(*id)
            .or_else(|| admission.admit(w.addr)),
        _ => admission.admit(w.addr),
    };
    let Some(ticket) = ticket else {
        return;
    };
    if w.stream.set_nonblocking(false).is_err() {
        return;
    }
    let n = node.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("ic{}-accept", node.node_id))
        .spawn(move || {
            handshake::accept(&n, w.stream, w.since);
            drop(ticket);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "interconnect: cannot start a handshake thread");
    }
}
