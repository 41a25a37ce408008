//! The handshake's connection ([`Conn`]: a deadline on every read and write), its
//! refusal, and how a finished handshake's stream is made (TLS or not) and installed in
//! its session; both sides (`handshake.rs`, `takeover.rs`) use them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actors::ActorId;
use crate::interconnect::error::HandshakeError;
use crate::interconnect::session::{NewPeer, Session, State};
use crate::interconnect::shared::NodeShared;
use crate::interconnect::stream::IcStream;
use crate::interconnect::wire::{ExBlock, HandshakeReply, InitialPacket, PacketChecksum};

/// A connection with a deadline on every read and write.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) deadline: Instant,
}

impl Conn {
    pub(super) fn remaining(&self) -> Result<Duration, HandshakeError> {
        remaining(self.deadline)
    }

    pub(super) fn send(&mut self, bytes: &[u8]) -> Result<(), HandshakeError> {
        let left = self.remaining()?;
        self.stream
            .set_write_timeout(Some(left))
            .map_err(|e| HandshakeError::io(&e))?;
        self.stream
            .write_all(bytes)
            .map_err(|e| HandshakeError::io(&e))
    }

    pub(super) fn read_exact(&mut self, n: usize) -> Result<Vec<u8>, HandshakeError> {
        let mut buf = vec![0u8; n];
        let deadline = self.deadline;
        let stream = &self.stream;
        read_full(&mut &self.stream, &mut buf, || {
            let left = remaining(deadline)?;
            stream
                .set_read_timeout(Some(left))
                .map_err(|e| HandshakeError::io(&e))
        })?;
        Ok(buf)
    }

    pub(super) fn read_initial(&mut self) -> Result<InitialPacket, HandshakeError> {
        let bytes = self.read_exact(InitialPacket::LEN)?;
        Ok(InitialPacket::decode(&bytes)?.0)
    }

    pub(super) fn read_exblock(&mut self) -> Result<Vec<u8>, HandshakeError> {
        let head = self.read_exact(8)?;
        let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        if size > ExBlock::MAX_SIZE {
            return Err(HandshakeError::Wire(
                crate::interconnect::wire::WireError::TooLarge {
                    size,
                    max: ExBlock::MAX_SIZE,
                },
            ));
        }
        let mut bytes = head;
        bytes.extend(self.read_exact(size)?);
        Ok(ExBlock::decode(&bytes)?.0.payload)
    }
}

/// The time left until `deadline`, or `Timeout`.
fn remaining(deadline: Instant) -> Result<Duration, HandshakeError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(HandshakeError::Timeout)
    } else {
        Ok(left)
    }
}

/// Fills `buf` from `r`, calling `before` ahead of every read (the deadline's timeout). A
/// read interrupted by a signal (`EINTR`) is retried: it is no failure of the peer.
pub(super) fn read_full(
    r: &mut impl Read,
    buf: &mut [u8],
    mut before: impl FnMut() -> Result<(), HandshakeError>,
) -> Result<(), HandshakeError> {
    let mut at = 0;
    while at < buf.len() {
        before()?;
        match r.read(&mut buf[at..]) {
            Ok(0) => {
                return Err(HandshakeError::Io(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed during the handshake".into(),
                ))
            }
            Ok(k) => at += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HandshakeError::io(&e)),
        }
    }
    Ok(())
}

/// A second handle on the handshake's socket, for the session.
pub(super) fn plain(c: &Conn) -> Result<IcStream, HandshakeError> {
    c.stream
        .try_clone()
        .map(IcStream::Plain)
        .map_err(|e| HandshakeError::io(&e))
}

/// The session's stream on `sock`: TLS with `peer` if `encrypted` (the lower node id is
/// the TLS server), else the socket itself.
pub(super) fn secure(
    node: &NodeShared,
    peer: u32,
    sock: TcpStream,
    encrypted: bool,
    deadline: Instant,
) -> Result<IcStream, HandshakeError> {
    if !encrypted {
        return Ok(IcStream::Plain(sock));
    }
    #[cfg(feature = "tls")]
    if let Some(t) = &node.tls {
        let host = node.names.get(peer).map_or("", |a| a.host.as_str());
        let server = node.node_id < peer;
        let tls = crate::interconnect::tls::establish(&t.context, server, host, sock, deadline)?;
        return Ok(IcStream::Tls(Box::new(tls)));
    }
    let _ = (node, peer, sock, deadline);
    Err(HandshakeError::Tls("this node has no TLS setup".into()))
}

/// Step 5 of the accepting side: the reply went out (`stream` is the connection, or why
/// the handshake failed on its last steps); the connection is installed if the handshake
/// `(token, self_id)` still owns the session (with the peer's session id for a new
/// session, and the peer's confirm `peer_next`).
pub(super) fn install_accepted(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    stream: Result<IcStream, HandshakeError>,
    (token, self_id): (u64, ActorId),
    peer_session: Option<NewPeer>,
    peer_next: u64,
) -> Result<(), HandshakeError> {
    let mut st = s.state.lock();
    if st.accepting != Some(token) || st.self_id != self_id {
        return Err(HandshakeError::Simultaneous);
    }
    let stream = match stream {
        Ok(stream) => stream,
        Err(e) => {
            st.accepting = None;
            return Err(e);
        }
    };
    if let Some(peer) = peer_session {
        st.adopt(peer);
    }
    under_tls(&mut st, &stream);
    let fallout = s.install(node, &mut st, stream, peer_next);
    drop(st);
    fallout.deliver(node, s.peer);
    Ok(())
}

/// A session's packets on a TLS connection carry 0 in their checksum field and are not
/// checked (YDB's rule: TLS guards the bytes), whatever checksum the handshake chose.
pub(super) fn under_tls(st: &mut State, stream: &IcStream) {
    if stream.is_tls() {
        st.checksum = PacketChecksum::Tls;
    }
}

/// Sends a refusal with its reason (`ErrorExplaination`); best effort.
pub(super) fn refuse(c: &mut Conn, reason: &HandshakeError) {
    let reply = HandshakeReply {
        error_explanation: Some(reason.to_string()),
        ..Default::default()
    };
    let _ = c.send(&ExBlock::new(reply.encode()).encode());
}
