//! The handshake, both sides (`YDB_WIRE.md` §2.2, §1.1–1.4, §3.4, §6), for peers without
//! XDC; packet checksums are CRC32C or XXH3, as the requester asks; TLS (feature `tls`)
//! after it, by YDB's rules (`encryption.rs`, `tls.rs`).
//!
//! Connecting side:
//! 1. TCP connect to the name service's address of the peer; mark "connecting" (token). A
//!    session not yet established takes a fresh session id for every attempt (YDB's
//!    `StartInitialHandshake`): the peer refuses a serial it has seen.
//! 2. Send the initial packet: our session id, the peer's (empty for a new session), the
//!    last serial we processed, version 2; with a secret, the admission frame in the same
//!    write (`challenge.rs`). Read the peer's.
//! 3. Resume (the peer's id was known): the reply must name both sessions as we do, else
//!    `SessionMismatch` (our session ends, a new one starts). Done: no ExBlocks.
//! 4. New session: send a `THandshakeRequest` in an ExBlock (with our nonce and secret
//!    proof in its params), read the `THandshakeReply`, check it (cluster ids, modern
//!    frame, no XDC, the peer's proof, TLS by the modes), take the peer's session id,
//!    program and checksum mode (`UseXxhash`) from it.
//! 5. Install the connection if our token is still the session's (an incoming handshake
//!    may have won meanwhile: `Simultaneous`).
//!
//! Accepting side (one thread per connection the listener admitted, `admission.rs`):
//! 1. Read the initial packet; the claimed node must be in the name service. With a
//!    secret, the admission frame must follow and prove it (else `BadSecret`; a new
//!    session's peer gets the all-zero reply and then the refusal with its reason). Until
//!    then the connection has [`INITIAL_PACKET_DEADLINE`] from its accept, then the rest
//!    of the handshake timeout.
//! 2. Resume: both ids must be the session's, else reply all-zero ids (the peer then
//!    starts a new session). New session: reply all-zero ids, read and check the request
//!    (receiver node, host names, cluster ids, protocol, secret proof, TLS mode);
//!    a refusal is sent as `ErrorExplaination`, logged and kept in the node's refusals.
//! 3. Simultaneous connects: if our own outgoing handshake is under way and the peer's node
//!    id is higher, the lower id's (ours) wins: this connection is closed without a reply
//!    (a transient failure for the peer). Otherwise ours is abandoned. A peer that proved
//!    itself (secret or TLS) is checked again only after it installed its side: then ours
//!    gives way, since refusing would end the session it holds (`handshake/takeover.rs`).
//! 4. A new-session request while we hold an established session with that peer: if it
//!    names the peer session we already know, it is a connect of the peer's that lost a
//!    simultaneous-connect race (refused quietly). A request from the peer's program (PID
//!    and start time) with a serial at or below the last one seen from it is stale: its
//!    connection is closed without a reply, the session untouched (`StaleSerial`).
//!    Otherwise the peer lost our session (it restarted), so ours ends (`PeerRestarted`)
//!    and a new one starts, with the events that never left.
//! 5. Reply (initial packet for a resume, `THandshakeSuccess` for a new session), then
//!    install if no other handshake took over meanwhile.
//!
//! With a shared secret both sides also run the challenge of `challenge.rs`: one more
//! frame after the reply for a new session, a nonce and a challenge around the initial
//! packets of a resume. With TLS (a new session whose modes chose it, or a resume of a
//! session that runs it) both sides then run the TLS handshake on the socket, the lower
//! node id as the server. In either case the accepting side changes nothing of the session
//! (steps 3–4, ending a session included) until the peer has answered its nonce and
//! completed TLS with a certificate for its host; without either, it takes the session
//! before its reply, as YDB does.
//!
//! Races: the token checks in step 5 of both sides (under the session lock) make the last
//! decision; a connection that loses is dropped, which the peer sees as a broken
//! connection and retries.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod conn;
mod hello;
mod takeover;

use conn::{install_accepted, plain, refuse, secure, under_tls, Conn};
use takeover::{accept_resume, accept_verified, claim_new};

use super::admission::INITIAL_PACKET_DEADLINE;
use super::challenge;
use super::encryption;
use super::error::{ConnectFailed, HandshakeError};
use super::session::{Fallout, NewPeer, PeerProgram, Session};
use super::shared::NodeShared;
use super::stats::Refusal;
use super::stream::IcStream;
use super::wire::{ExBlock, HandshakeReply, HandshakeRequest, InitialPacket, PROTOCOL_VERSION};
use crate::actors::ActorId;

/// How long the handshake thread may take to read what the listener saw (`accept`).
const READ_WHAT_CAME: Duration = Duration::from_millis(200);

fn resolve(address: &str, port: u16) -> Result<SocketAddr, HandshakeError> {
    (address, port)
        .to_socket_addrs()
        .map_err(|e| HandshakeError::io(&e))?
        .next()
        .ok_or_else(|| {
            HandshakeError::Io(
                std::io::ErrorKind::NotFound,
                format!("{address} resolves to nothing"),
            )
        })
}

/// The connecting side (see the module docs). On success the connection is installed.
pub(crate) fn connect(node: &Arc<NodeShared>, s: &Arc<Session>) -> Result<Fallout, ConnectFailed> {
    let fresh = |error| ConnectFailed {
        error,
        stale: false,
    };
    let entry = node
        .names
        .get(s.peer)
        .ok_or(HandshakeError::UnknownNode(s.peer))
        .map_err(fresh)?;
    let timeout = node.cfg.handshake_timeout;
    let addr = resolve(&entry.address, entry.port).map_err(fresh)?;
    let stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| fresh(HandshakeError::io(&e)))?;
    let _ = stream.set_nodelay(true);
    let (token, self_id, peer_id) = {
        let mut st = s.state.lock();
        if node.is_stopping() {
            return Err(fresh(HandshakeError::Stopping));
        }
        if matches!(st.conn, super::session::Conn::Connected { .. })
            || st.accepting.is_some()
            || st.proving > 0
        {
            // An incoming handshake won, or is under way (or being proven): give way to it.
            return Err(fresh(HandshakeError::Simultaneous));
        }
        if !st.established {
            // A serial the peer may have seen (an attempt that failed after its request
            // went out) would be refused as stale.
            st.self_id = node.new_session_id();
        }
        st.attempts += 1;
        let token = st.attempts;
        st.connecting = Some(token);
        (token, st.self_id, st.peer_id)
    };
    connect_on(node, s, stream, timeout, token, self_id, peer_id).map_err(|error| {
        let mut st = s.state.lock();
        let stale = st.connecting != Some(token)
            || st.self_id != self_id
            || matches!(st.conn, super::session::Conn::Connected { .. });
        if st.connecting == Some(token) {
            st.connecting = None;
        }
        ConnectFailed { error, stale }
    })
}

fn connect_on(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    stream: TcpStream,
    timeout: Duration,
    token: u64,
    self_id: ActorId,
    peer_id: ActorId,
) -> Result<Fallout, HandshakeError> {
    let mut c = Conn {
        stream,
        deadline: Instant::now() + timeout,
    };
    let next = s.confirm();
    let hello = if peer_id.is_empty() {
        InitialPacket::new_session(self_id)
    } else {
        InitialPacket {
            self_virtual_id: self_id,
            peer_virtual_id: peer_id,
            next_packet: next,
            version: PROTOCOL_VERSION,
        }
    };
    let secret = node.secret();
    let ni = node.random_bytes();
    let mut first = hello.encode();
    if let Some(secret) = secret {
        // In the same write: the peer's listener looks for it with the initial packet.
        first.extend(challenge::admit_frame(secret, &ni, &hello, s.peer));
    }
    c.send(&first)?;
    let reply = c.read_initial()?;
    if reply.version != PROTOCOL_VERSION {
        return Err(HandshakeError::Incompatible(format!(
            "initial packet version {}",
            reply.version
        )));
    }
    if !peer_id.is_empty() {
        if reply.self_virtual_id != peer_id || reply.peer_virtual_id != self_id {
            return Err(HandshakeError::SessionMismatch(self_id));
        }
        if let Some(secret) = secret {
            let payload = c.read_exblock()?;
            let nr = challenge::check_resume_challenge(secret, &ni, &payload, &hello, &reply)?;
            let tag = challenge::resume_confirm(secret, &ni, &nr, &hello, &reply);
            c.send(&challenge::proof_frame(tag))?;
        }
        // A resumed connection runs TLS if its session does (YDB keeps the session's
        // params).
        let encrypted = s.state.lock().encrypted;
        let stream = secure(node, s.peer, c.stream, encrypted, c.deadline)?;
        return finish(node, s, stream, token, self_id, None, reply.next_packet);
    }
    let request = node.request(s.peer, self_id, &ni);
    c.send(&ExBlock::new(request.encode()).encode())?;
    let bytes = c.read_exblock()?;
    let (reply, _) = HandshakeReply::decode(&bytes)?;
    if let Some(why) = reply.error_explanation {
        return Err(HandshakeError::Refused(why));
    }
    let success = reply
        .success
        .ok_or_else(|| HandshakeError::Incompatible("empty reply".into()))?;
    let (peer, nr) = node.check_success(s.peer, &success, &ni)?;
    let encrypted =
        encryption::initiator_decides(node.encryption_mode(), success.start_encryption)?;
    if let Some(secret) = secret {
        let tag = challenge::new_session_confirm(secret, &ni, &nr, self_id, peer);
        c.send(&challenge::proof_frame(tag))?;
    }
    let stream = secure(node, s.peer, c.stream, encrypted, c.deadline)?;
    let peer = NewPeer::from_success(peer, &success);
    finish(node, s, stream, token, self_id, Some(peer), 0)
}

fn finish(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    stream: IcStream,
    token: u64,
    self_id: ActorId,
    new_peer: Option<NewPeer>,
    peer_next: u64,
) -> Result<Fallout, HandshakeError> {
    let mut st = s.state.lock();
    if st.connecting != Some(token) || st.self_id != self_id {
        drop(st);
        // The peer installed its side once it sent its answer (see `close_if_stopping`).
        super::shared::close_if_stopping(node, stream);
        return Err(HandshakeError::Simultaneous);
    }
    if let Some(peer) = new_peer {
        st.adopt(peer);
    }
    under_tls(&mut st, &stream);
    let fallout = s.install(node, &mut st, stream, peer_next);
    st.outgoing_since = Some(Instant::now());
    Ok(fallout)
}

/// The accepting side of one incoming connection, accepted at `accepted` (see the module
/// docs); runs on a thread of its own.
pub(crate) fn accept(node: &Arc<NodeShared>, stream: TcpStream, accepted: Instant) {
    let peer_addr = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let deadline = accepted + node.cfg.handshake_timeout.mul_f32(0.9);
    // The initial packet (and the admission frame) come at once from a node that connects
    // (`admission.rs`); what the listener saw already is read in a moment (bytes followed
    // by the end of the stream, say, which it cannot tell from bytes alone).
    let prompt = deadline.min(accepted + INITIAL_PACKET_DEADLINE);
    let mut c = Conn {
        stream,
        deadline: prompt.max(Instant::now() + READ_WHAT_CAME),
    };
    let mut claimed = 0;
    if let Err(reason) = accept_on(node, &mut c, deadline, &mut claimed) {
        // The peer may have installed its side (see `close_if_stopping`).
        super::shared::close_if_stopping(node, IcStream::Plain(c.stream));
        let quiet = matches!(
            reason,
            HandshakeError::Simultaneous
                | HandshakeError::Stopping
                | HandshakeError::SessionMismatch(_)
        );
        if !quiet {
            tracing::warn!(node = node.node_id, peer = claimed, addr = ?peer_addr, reason = %reason, "interconnect: handshake refused");
            node.refused(Refusal {
                peer_addr,
                claimed_node: claimed,
                reason,
            });
        }
    }
}

fn accept_on(
    node: &Arc<NodeShared>,
    c: &mut Conn,
    deadline: Instant,
    claimed: &mut u32,
) -> Result<(), HandshakeError> {
    let hello = c.read_initial()?;
    if hello.version != PROTOCOL_VERSION {
        return Err(HandshakeError::Incompatible(format!(
            "initial packet version {} (no XDC here)",
            hello.version
        )));
    }
    let peer_node = hello.self_virtual_id.node_id();
    *claimed = peer_node;
    if peer_node == 0 || peer_node == node.node_id {
        return Err(HandshakeError::UnknownNode(peer_node));
    }
    let ni = match node.secret() {
        Some(secret) => Some(admitted(c, secret, node.node_id, &hello)?),
        None => None,
    };
    c.deadline = deadline;
    let Some(s) = node.session(peer_node) else {
        // Answer a new session so that the request can be refused with a reason.
        if hello.peer_virtual_id.is_empty() {
            c.send(&InitialPacket::empty_reply().encode())?;
            let _ = c.read_exblock();
            refuse(c, &HandshakeError::UnknownNode(peer_node));
        }
        return Err(HandshakeError::UnknownNode(peer_node));
    };
    if !hello.peer_virtual_id.is_empty() {
        return accept_resume(node, &s, c, &hello, ni);
    }
    c.send(&InitialPacket::empty_reply().encode())?;
    let bytes = c.read_exblock()?;
    let (request, _) = HandshakeRequest::decode(&bytes)?;
    let (peer_session, ni) = match node.check_request(peer_node, &request) {
        Ok(v) => v,
        Err(e) => {
            refuse(c, &e);
            return Err(e);
        }
    };
    let encrypted =
        match encryption::responder_decides(node.encryption_mode(), request.require_encryption) {
            Ok(tls) => tls,
            Err(e) => {
                refuse(c, &e);
                return Err(e);
            }
        };
    if node.secret().is_some() || encrypted {
        return accept_verified(node, &s, c, (peer_session, &request), &ni, encrypted);
    }
    let program = PeerProgram::of_request(&request);
    let (token, self_id, fallout) = claim_new(node, &s, (peer_session, program), None)?;
    fallout.deliver(node, peer_node);
    let mut success = node.success(self_id, &ni, &[]);
    let peer = NewPeer::grant(peer_session, &request, &mut success);
    let reply = HandshakeReply {
        success: Some(success),
        ..Default::default()
    };
    let sent = c.send(&ExBlock::new(reply.encode()).encode());
    let stream = sent.and_then(|()| plain(c));
    install_accepted(node, &s, stream, (token, self_id), Some(peer), 0)
}

/// With a secret: reads and checks the admission frame after `hello` (we are node `own`);
/// returns the peer's nonce. A peer that does not prove the secret so is refused
/// (`BadSecret`), with the reason if it asked for a new session (a node without the
/// secret sends no frame: it gets the reply it waits for, then the refusal).
fn admitted(
    c: &mut Conn,
    secret: &[u8],
    own: u32,
    hello: &InitialPacket,
) -> Result<Vec<u8>, HandshakeError> {
    let checked = c
        .read_exblock()
        .and_then(|frame| challenge::check_admit(secret, &frame, hello, own));
    match checked {
        Ok(ni) => Ok(ni),
        Err(HandshakeError::Io(kind, why)) => Err(HandshakeError::Io(kind, why)),
        Err(_) => {
            if hello.peer_virtual_id.is_empty() {
                c.deadline = Instant::now() + INITIAL_PACKET_DEADLINE;
                if c.send(&InitialPacket::empty_reply().encode()).is_ok() {
                    let _ = c.read_exblock();
                    refuse(c, &HandshakeError::BadSecret);
                }
            }
            Err(HandshakeError::BadSecret)
        }
    }
}

#[cfg(test)]
mod tests;
