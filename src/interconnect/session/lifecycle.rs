//! How a session ends, and what a new one takes from the handshake (YDB_WIRE.md §6).
//!
//! 1. A session ends ([`Session::terminate`]) on a lost-connection timeout, a dead peer (no
//!    traffic, or no confirm, for the dead-peer timeout), a protocol violation, a handshake
//!    refused for good, a clean close with nothing pending, or the node stopping: the
//!    unconfirmed events are "unsure", the queued ones are surely not delivered, the
//!    subscribers get `NodeDisconnected`, and the next send starts a new session.
//! 2. A session whose peer restarted ([`Session::restart`]: a resume answered with all-zero
//!    ids, or a new-session request from the peer while ours was established) ends the
//!    same way, except that the queued events, which never reached the old peer, stay
//!    queued (a partly sent one goes out whole) and a new session starts at once.
//! 3. A new-session request from the peer's program (its PID and start time) with a
//!    serial at or below the last one seen from it is dropped before it touches the session
//!    ([`State::check_serial`]); the last serial is kept across sessions, as YDB's proxy
//!    keeps it. A handshake that must still prove itself (secret or TLS) is checked early
//!    ([`State::stale`]) and recorded only once proven.
//!
//! Races: all of this runs under the session's state lock; the connection's writer and
//! reader see the new generation at their next look and stop.

use std::net::Shutdown;
use std::sync::atomic::Ordering;

use super::{Conn, Fallout, Session, State};
use crate::actors::ActorId;
use crate::interconnect::base::NodeBase;
use crate::interconnect::error::{HandshakeError, SessionError};
use crate::interconnect::wire::{HandshakeRequest, HandshakeSuccess, PacketChecksum};

/// The peer's program as its handshake names it, with the handshake's serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerProgram {
    pub(crate) pid: u64,
    pub(crate) start_time: u64,
    pub(crate) serial: u64,
}

/// What a new session takes from its handshake.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewPeer {
    /// The peer's session virtual id.
    pub(crate) id: ActorId,
    /// The packet checksum the handshake chose (`UseXxhash`).
    pub(crate) checksum: PacketChecksum,
    pub(crate) program: PeerProgram,
}

impl PeerProgram {
    /// The program a new-session request comes from.
    pub(crate) fn of_request(r: &HandshakeRequest) -> PeerProgram {
        PeerProgram {
            pid: r.program_pid,
            start_time: r.program_start_time,
            serial: r.serial,
        }
    }
}

impl NewPeer {
    /// What our new session takes from the peer's success (connecting side).
    pub(crate) fn from_success(id: ActorId, s: &HandshakeSuccess) -> NewPeer {
        NewPeer {
            id,
            checksum: PacketChecksum::negotiated(s.use_xxhash),
            program: PeerProgram {
                pid: s.program_pid,
                start_time: s.program_start_time,
                serial: s.serial,
            },
        }
    }

    /// Grants in `success` what the request asked as YDB's responder does (XXH3 checksums,
    /// and the XDC shuffle flag, inert without XDC); returns what our new session takes
    /// from the handshake (accepting side).
    pub(crate) fn grant(
        id: ActorId,
        request: &HandshakeRequest,
        success: &mut HandshakeSuccess,
    ) -> NewPeer {
        success.use_xxhash = Some(request.request_xxhash == Some(true));
        success.use_xdc_shuffle = Some(request.request_xdc_shuffle == Some(true));
        NewPeer {
            id,
            checksum: PacketChecksum::negotiated(success.use_xxhash),
            program: PeerProgram::of_request(request),
        }
    }
}

impl State {
    /// YDB's stale-handshake rule: a new-session handshake from the peer's program with a
    /// serial at or below the last one seen from that program is refused; otherwise its
    /// serial becomes the last one.
    pub(crate) fn check_serial(&mut self, p: PeerProgram) -> Result<(), HandshakeError> {
        self.stale(p)?;
        self.peer_program = Some(p);
        Ok(())
    }

    /// The check of [`check_serial`](Self::check_serial) alone, which records nothing (for
    /// a handshake that has yet to prove itself).
    pub(crate) fn stale(&self, p: PeerProgram) -> Result<(), HandshakeError> {
        if let Some(last) = self.peer_program {
            let same = last.pid == p.pid && last.start_time == p.start_time;
            if same && p.serial <= last.serial {
                return Err(HandshakeError::StaleSerial {
                    serial: p.serial,
                    last: last.serial,
                });
            }
        }
        Ok(())
    }

    /// Takes the peer's side of a new session from its handshake.
    pub(crate) fn adopt(&mut self, peer: NewPeer) {
        self.peer_id = peer.id;
        self.checksum = peer.checksum;
        // The reply of a handshake we started names the peer's program too (YDB keeps it
        // from both directions); a later request must come with a higher serial.
        match self.peer_program {
            Some(last)
                if last.pid == peer.program.pid
                    && last.start_time == peer.program.start_time
                    && last.serial >= peer.program.serial => {}
            _ => self.peer_program = Some(peer.program),
        }
    }

    /// Whether the peer may close the connection and end the session at once: nothing of
    /// ours is queued or waits for its confirm (YDB's `OnDisconnect` with end of stream).
    pub(crate) fn nothing_pending(&self) -> bool {
        self.out.is_empty() && self.unconfirmed.is_empty()
    }
}

impl Session {
    /// Ends the session (step 1 of the module docs).
    pub(crate) fn terminate(&self, node: &NodeBase, st: &mut State, err: SessionError) -> Fallout {
        self.end(node, st, err, false)
    }

    /// Ends the session of a peer that restarted and keeps its queued events for the next
    /// one, which starts at once (step 2 of the module docs).
    pub(crate) fn restart(&self, node: &NodeBase, st: &mut State, err: SessionError) -> Fallout {
        self.end(node, st, err, true)
    }

    fn end(&self, node: &NodeBase, st: &mut State, err: SessionError, keep: bool) -> Fallout {
        let mut fallout = Fallout::default();
        if let Conn::Connected { stream, .. } = &st.conn {
            if err == SessionError::Stopping {
                // Our node stops: a clean close. Only our sending half closes (the peer
                // reads an end of stream, and with nothing of its pending ends the session
                // at once, YDB's clean-close rule); the socket stays open for reading until
                // the node's closer shuts it (`close_after_linger`). Shut both ways at once,
                // a packet of the peer's that arrived unread made the close a reset, and
                // the peer, whose writer could see that reset before its reader saw the end
                // of stream, took the clean close for a lost connection and tried to resume
                // for the whole lost-connection timeout (`interconnect_lifecycle`'s
                // clean-close test, which failed so under load).
                let _ = stream.shutdown(Shutdown::Write);
            } else {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        st.conn = Conn::None;
        st.gen += 1;
        self.reader_gen.store(st.gen, Ordering::Release);
        // Sent but never confirmed: the peer may have processed them.
        for p in st.unconfirmed.drain(..) {
            for meta in p.events {
                fallout.failed.push((meta.into_handle(), true));
            }
        }
        st.unconfirmed_bytes = 0;
        if keep {
            // Never delivered to the old peer (a partly sent one lacks its descriptor
            // there): they go whole in the new session.
            st.out.restart_partial();
        } else {
            // Still queued (a partly sent one too: without its descriptor the peer cannot
            // have delivered it): surely not delivered.
            for ev in st.out.drain() {
                fallout.failed.push((ev.into_handle(), false));
            }
        }
        for s in st.subscribers.drain(..) {
            st.notices.push_back((s.actor, s.cookie, false));
            fallout.notify = true;
        }
        st.self_id = node.new_session_id();
        st.peer_id = ActorId::EMPTY;
        st.checksum = PacketChecksum::Crc32c;
        st.established = false;
        st.next_serial = 0;
        st.confirm_sent = 0;
        st.connecting = None;
        st.accepting = None;
        st.disconnected_since = None;
        st.ping_responses.clear();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        st.stats.sessions_ended += 1;
        let lost = fallout.failed.len();
        st.stats.events_not_delivered += lost as u64;
        fallout.ended = Some(err.clone());
        st.stats.record_error(err);
        // The writer of the ended connection stops at its next look; the driver starts the
        // next session now if events wait.
        if st.driver_waiting {
            st.driver_waiting = false;
            self.cond.notify_one();
        }
        fallout
    }
}

/// Logs a session's end once: a warning with the number of events it did not deliver
/// (`unsure`: of them, those sent and never confirmed), or, with none, a warning unless
/// the end is an ordinary one (a clean close by the peer, our node stopping, a restarted
/// peer), which is only a debug line.
pub(super) fn log_end(
    node: &NodeBase,
    peer: u32,
    err: &SessionError,
    failed: &[(crate::actors::EventHandle, bool)],
) {
    let node = node.node_id;
    if !failed.is_empty() {
        let unsure = failed.iter().filter(|(_, unsure)| *unsure).count();
        tracing::warn!(
            node,
            peer,
            error = %err,
            not_delivered = failed.len(),
            unsure,
            "interconnect session ended: {} events not delivered to node {peer}",
            failed.len()
        );
        return;
    }
    match err {
        SessionError::ClosedByPeer | SessionError::Stopping | SessionError::PeerRestarted => {
            tracing::debug!(node, peer, error = %err, "interconnect session ended");
        }
        _ => tracing::warn!(node, peer, error = %err, "interconnect session ended"),
    }
}

#[cfg(test)]
mod tests {
    //! The stale-serial rule (step 3 of the module docs) as a new session's handshakes in
    //! both directions feed it: a new-session request from the peer's program must carry
    //! a serial above every one seen from that program, in its requests and in its
    //! answers to our connects alike; a restarted peer (another program) starts over.

    use super::{NewPeer, PeerProgram};
    use crate::actors::ActorId;
    use crate::interconnect::error::HandshakeError;
    use crate::interconnect::session::{Session, State};
    use crate::interconnect::wire::PacketChecksum;

    const A: (u64, u64) = (4242, 1);

    fn program((pid, start_time): (u64, u64), serial: u64) -> PeerProgram {
        PeerProgram {
            pid,
            start_time,
            serial,
        }
    }

    /// The peer's answer to a connect of ours, from `prog` with `serial`.
    fn answer(prog: (u64, u64), serial: u64) -> NewPeer {
        NewPeer {
            id: ActorId::new(2, serial, 0),
            checksum: PacketChecksum::Crc32c,
            program: program(prog, serial),
        }
    }

    /// Whether a new-session request from `prog` with `serial` is taken (it is then
    /// recorded, as the handshake records it).
    fn request(st: &mut State, prog: (u64, u64), serial: u64) -> Result<(), HandshakeError> {
        st.check_serial(program(prog, serial))
    }

    fn with_state(f: impl FnOnce(&mut State)) {
        let s = Session::new(2, ActorId::new(1, 1, 0));
        f(&mut s.state.lock());
    }

    #[test]
    fn a_request_at_or_below_the_serial_of_the_answer_to_our_connect_is_stale() {
        with_state(|st| {
            st.adopt(answer(A, 1000));
            for serial in [500, 1000] {
                assert_eq!(
                    request(st, A, serial),
                    Err(HandshakeError::StaleSerial { serial, last: 1000 })
                );
            }
            assert_eq!(request(st, A, 1001), Ok(()));
        });
    }

    #[test]
    fn an_answer_to_our_connect_raises_the_mark_of_the_peer_s_requests_and_never_lowers_it() {
        with_state(|st| {
            assert_eq!(request(st, A, 300), Ok(()));
            // A higher serial in an answer raises the mark.
            st.adopt(answer(A, 700));
            assert_eq!(
                request(st, A, 500),
                Err(HandshakeError::StaleSerial {
                    serial: 500,
                    last: 700
                })
            );
            // A lower one (an answer to an older connect of ours) leaves it where it is.
            st.adopt(answer(A, 400));
            assert_eq!(
                request(st, A, 600),
                Err(HandshakeError::StaleSerial {
                    serial: 600,
                    last: 700
                })
            );
            assert_eq!(request(st, A, 701), Ok(()));
        });
    }

    #[test]
    fn a_restarted_peer_s_answer_with_a_lower_serial_starts_the_mark_over() {
        // Another PID, or the same PID reused by a program started later.
        for restarted in [(A.0 + 1, A.1), (A.0, A.1 + 1)] {
            with_state(|st| {
                assert_eq!(request(st, A, 1000), Ok(()));
                st.adopt(answer(restarted, 5));
                assert_eq!(
                    request(st, restarted, 5),
                    Err(HandshakeError::StaleSerial { serial: 5, last: 5 }),
                    "{restarted:?}"
                );
                assert_eq!(request(st, restarted, 6), Ok(()), "{restarted:?}");
            });
        }
    }
}
