//! When an accepted handshake takes its session over (the accepting side's steps 3–5 of
//! `handshake.rs`): the gates that refuse it quietly (or, for a stale serial, with a
//! record), the claim (the next token; an established session ends for a new one, keeping
//! the events that never left), and the order of the two. Without a secret or TLS the
//! session is claimed before the reply goes out, as YDB does; with either, the peer proves
//! itself first (it answers our nonce, it completes TLS with a certificate for its host)
//! and nothing of the session changes until then, the last serial seen from the peer's
//! program included (a request's serial and program are not covered by its proof).

use std::sync::Arc;
use std::time::Duration;

use super::conn::{install_accepted, plain, secure, Conn};
use crate::actors::ActorId;
use crate::interconnect::challenge;
use crate::interconnect::error::{HandshakeError, SessionError};
use crate::interconnect::session::{Fallout, NewPeer, PeerProgram, Session, State};
use crate::interconnect::shared::NodeShared;
use crate::interconnect::wire::{
    ExBlock, HandshakeReply, HandshakeRequest, InitialPacket, PROTOCOL_VERSION,
};

/// Whether a new session with `peer_session` from `program` may replace what the session
/// has now; the refusals are quiet ones but a stale serial's (`State::check_serial`; this
/// gate only looks, the claim records the serial). A `proven` peer has installed its side
/// already (it sent its proof, `accept_verified`): the simultaneous-connect rule (our
/// outgoing connect wins over a higher node id's) no longer applies, since refusing it now
/// would end the session it holds; our connect gives way instead (the claim clears it).
pub(super) fn new_session_gate(
    node: &NodeShared,
    s: &Session,
    st: &State,
    (peer_session, program): (ActorId, PeerProgram),
    proven: bool,
) -> Result<(), HandshakeError> {
    if node.is_stopping() {
        return Err(HandshakeError::Stopping);
    }
    if !proven && st.connecting.is_some() && s.peer > node.node_id {
        return Err(HandshakeError::Simultaneous);
    }
    if st.established && peer_session == st.peer_id {
        // The peer's own session, asked for again: a connect of its that lost a race
        // with ours (it was under way when the peer accepted our connection), not a
        // restart. Refused quietly; the session goes on.
        return Err(HandshakeError::Simultaneous);
    }
    st.stale(program)
}

/// Takes the session for a new one with `peer_session` from `program` (whose serial
/// becomes the last one seen): an established session ends (the peer restarted; its
/// queued events stay for the new one), and the handshake gets the next token. With
/// `seen` (whether the session was established, its id, and the id already promised to
/// the peer), the session must be as it was seen, or have ended meanwhile with nothing
/// else taking it (the peer closed its old connection as soon as its side of this
/// handshake was done, as YDB's peer may); an ended one gets the promised id.
pub(super) fn claim_new(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    (peer_session, program): (ActorId, PeerProgram),
    seen: Option<(bool, ActorId, ActorId)>,
) -> Result<(u64, ActorId, Fallout), HandshakeError> {
    let mut st = s.state.lock();
    new_session_gate(node, s, &st, (peer_session, program), seen.is_some())?;
    let mut ended_meanwhile = false;
    if let Some((established, self_id, _)) = seen {
        // The session we saw ended meanwhile, and nothing else took it: the peer closed
        // its old connection once its side of this handshake was done (YDB's peer does:
        // its node ended the old session when it accepted the request). The new session
        // takes it, with the id promised (our own connects gave way while it was proven).
        ended_meanwhile = established
            && !st.established
            && st.accepting.is_none()
            && st.connecting.is_none()
            && !matches!(
                st.conn,
                crate::interconnect::session::Conn::Connected { .. }
            );
        if !ended_meanwhile && (st.established != established || st.self_id != self_id) {
            return Err(HandshakeError::Simultaneous);
        }
    }
    st.check_serial(program)?;
    let fallout = if st.established {
        let f = s.restart(node, &mut st, SessionError::PeerRestarted);
        if let Some((_, _, promised)) = seen {
            st.self_id = promised;
        }
        f
    } else {
        if let (true, Some((_, _, promised))) = (ended_meanwhile, seen) {
            st.self_id = promised;
        }
        Fallout::default()
    };
    st.attempts += 1;
    let token = st.attempts;
    st.accepting = Some(token);
    st.connecting = None;
    Ok((token, st.self_id, fallout))
}

/// A new session that the peer must prove before it changes anything: in a cluster with a
/// secret (the success carries our nonce, `challenge.rs`) or with TLS (its certificate,
/// `tls.rs`). Nothing of the session changes until then.
pub(super) fn accept_verified(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    c: &mut Conn,
    (peer_session, request): (ActorId, &HandshakeRequest),
    ni: &[u8],
    encrypted: bool,
) -> Result<(), HandshakeError> {
    let program = PeerProgram::of_request(request);
    let (established, self_id) = {
        let mut st = s.state.lock();
        new_session_gate(node, s, &st, (peer_session, program), false)?;
        st.proving += 1;
        (st.established, st.self_id)
    };
    let _proving = Proving(s);
    // An established session ends if the peer proves itself: the new one's id is promised
    // now.
    let promised = if established {
        node.new_session_id()
    } else {
        self_id
    };
    let nr = node.random_bytes();
    let mut success = node.success(promised, ni, &nr);
    success.start_encryption = Some(encrypted);
    let peer = NewPeer::grant(peer_session, request, &mut success);
    let reply = HandshakeReply {
        success: Some(success),
        ..Default::default()
    };
    c.send(&ExBlock::new(reply.encode()).encode())?;
    if let Some(secret) = node.secret() {
        let (_, tag) = challenge::parse(&c.read_exblock()?)?;
        let tag = tag.as_deref();
        challenge::check_new_session_confirm(secret, ni, &nr, peer_session, promised, tag)?;
    }
    let sock = c.stream.try_clone().map_err(|e| HandshakeError::io(&e))?;
    let stream = secure(node, s.peer, sock, encrypted, c.deadline)?;
    let seen = Some((established, self_id, promised));
    let (token, self_id, fallout) = claim_new(node, s, (peer_session, program), seen)?;
    fallout.deliver(node, s.peer);
    install_accepted(node, s, Ok(stream), (token, self_id), Some(peer), 0)
}

/// A new session being proven (`State::proving`) until this drops: meanwhile our own
/// connect to the peer gives way, so that it takes no new session id and the peer, which
/// installs its side once it sent its proof, finds the session it was promised. It gives
/// the peer no hold on the session: a handshake that never proves itself only delays our
/// connects until it fails (its deadline).
struct Proving<'a>(&'a Session);

impl Drop for Proving<'_> {
    fn drop(&mut self) {
        self.0.state.lock().proving -= 1;
    }
}

/// A resume of the session named by `hello` (with a secret, `ni` is the nonce of the
/// peer's admission frame, which starts the challenge).
pub(super) fn accept_resume(
    node: &Arc<NodeShared>,
    s: &Arc<Session>,
    c: &mut Conn,
    hello: &InitialPacket,
    ni: Option<Vec<u8>>,
) -> Result<(), HandshakeError> {
    let secret = node.secret();
    if secret.is_some() && ni.is_none() {
        // With a secret the admission frame's nonce starts the challenge: none, no resume.
        return Err(HandshakeError::BadSecret);
    }
    // YDB's order (the session is taken, then the reply goes out) unless the peer must
    // prove itself first: with a secret (our nonce) or TLS (its certificate), the session
    // is only looked at until then.
    let claim = if secret.is_none() {
        Claim::UnlessEncrypted
    } else {
        Claim::No
    };
    let Some(seen) = resume_gate(node, s, hello, claim)? else {
        c.send(&InitialPacket::empty_reply().encode())?;
        return Err(HandshakeError::SessionMismatch(hello.peer_virtual_id));
    };
    let answer = InitialPacket {
        self_virtual_id: seen.self_id,
        peer_virtual_id: seen.peer_id,
        next_packet: s.confirm(),
        version: PROTOCOL_VERSION,
    };
    if seen.token != 0 {
        let sent = c.send(&answer.encode());
        let stream = sent.and_then(|()| plain(c));
        let owner = (seen.token, seen.self_id);
        return install_accepted(node, s, stream, owner, None, hello.next_packet);
    }
    let nr = node.random_bytes();
    let mut bytes = answer.encode();
    if let (Some(secret), Some(ni)) = (secret, &ni) {
        bytes.extend(challenge::resume_challenge(secret, ni, &nr, hello, &answer));
    }
    c.send(&bytes)?;
    if let (Some(secret), Some(ni)) = (secret, &ni) {
        let payload = c.read_exblock()?;
        challenge::check_resume_confirm(secret, (ni, &nr), hello, &answer, &payload)?;
    }
    let sock = c.stream.try_clone().map_err(|e| HandshakeError::io(&e))?;
    let stream = secure(node, s.peer, sock, seen.encrypted, c.deadline)?;
    let Some(now) = resume_gate(node, s, hello, Claim::Yes)? else {
        // The session ended meanwhile.
        return Err(HandshakeError::SessionMismatch(hello.peer_virtual_id));
    };
    install_accepted(
        node,
        s,
        Ok(stream),
        (now.token, now.self_id),
        None,
        hello.next_packet,
    )
}

/// Whether [`resume_gate`] takes the session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    No,
    /// Unless the session runs TLS (the peer then proves itself first).
    UnlessEncrypted,
    Yes,
}

/// The session as a resume found it.
struct Seen {
    /// The handshake's token if it took the session, else 0.
    token: u64,
    self_id: ActorId,
    peer_id: ActorId,
    encrypted: bool,
}

/// Whether `hello` resumes the session: `None` if it names another session. A claim takes
/// the session (the next token, which a handshake in progress sees when it comes to
/// install); otherwise nothing changes.
fn resume_gate(
    node: &NodeShared,
    s: &Session,
    hello: &InitialPacket,
    claim: Claim,
) -> Result<Option<Seen>, HandshakeError> {
    let mut st = s.state.lock();
    if node.is_stopping() {
        return Err(HandshakeError::Stopping);
    }
    let ours = st.established
        && hello.peer_virtual_id == st.self_id
        && hello.self_virtual_id == st.peer_id;
    if !ours {
        return Ok(None);
    }
    if s.peer > node.node_id
        && (st.connecting.is_some() || fresh_outgoing(&st, node.cfg.handshake_timeout))
    {
        // The lower id's connection wins, also when ours completed first: the peer
        // accepted it, and this resume of the peer's was started before that. Taking it
        // would close the connection the peer now uses (and an idle session would end on
        // that clean close).
        return Err(HandshakeError::Simultaneous);
    }
    let mut token = 0;
    if claim == Claim::Yes || (claim == Claim::UnlessEncrypted && !st.encrypted) {
        st.attempts += 1;
        token = st.attempts;
        st.accepting = Some(token);
        st.connecting = None;
    }
    Ok(Some(Seen {
        token,
        self_id: st.self_id,
        peer_id: st.peer_id,
        encrypted: st.encrypted,
    }))
}

/// Whether the connection of the moment is ours (our connect installed it) and younger than
/// a handshake may take: a resume from the peer now raced with it.
fn fresh_outgoing(st: &State, within: Duration) -> bool {
    matches!(
        st.conn,
        crate::interconnect::session::Conn::Connected { .. }
    ) && st.outgoing_since.is_some_and(|t| t.elapsed() < within)
}
