//! The shared-secret challenge of the handshake: what a side proves, over what, and the
//! frames that carry it. Only a cluster with a secret
//! ([`InterconnectSetup::secret`](super::InterconnectSetup::secret)) runs it; without one a
//! handshake is YDB's, byte for byte, and YDB nodes take part.
//!
//! Each side proves that it holds the secret with an HMAC-SHA256 over a nonce the other
//! side has just drawn, so a recorded handshake is worth nothing later: not after a
//! restart, not after any number of other handshakes. The accepting side (R) changes
//! nothing of a session, and reads none of the data that follows, before the connecting
//! side (I) has answered R's nonce. Tags are over length-prefixed parts, each starting
//! with a label of its own, so that no tag of one step serves at another.
//!
//! Admission (both kinds of handshake): I's initial packet is followed, in the same write,
//! by an admission frame: a nonce `Ni` and `HMAC("agentbox-ic-admit", Ni, the initial
//! packet, R's node id)` ([`admit_frame`]). R's listener checks it before the handshake
//! takes a slot (`admission.rs`): a connection that proves the secret so gets a slot kept
//! for proven peers, whatever strangers hold; one that does not is refused at once. It is
//! no proof of freshness (a recording passes it; R's listener refuses a nonce it has seen
//! lately), so it decides admission only; the steps below still prove each side.
//!
//! New session (YDB's frames, plus two):
//! 1. I → R initial packet and the admission frame, R → I the all-zero reply.
//! 2. I → R `THandshakeRequest` with nonce `Ni` and `HMAC("agentbox-ic-request", Ni, I's
//!    session id, R's node id)`. It lets R refuse a node without the secret with a
//!    reason; a recorded request passes it, so it is no proof of freshness.
//! 3. R → I `THandshakeSuccess` with nonce `Nr` and `HMAC("agentbox-ic-reply", Ni, Nr,
//!    R's session id)`; I checks it.
//! 4. I → R a proof frame, `HMAC("agentbox-ic-confirm", Ni, Nr, I's id, R's id)`
//!    ([`new_session_confirm`]); I installs the connection. R checks it, and only then
//!    ends the session it had with I (a restart) and installs.
//!
//! Resume (YDB's resume has no frame after the initial packets):
//! 1. I → R initial packet (both session ids, I's confirm), then the admission frame (its
//!    nonce is `Ni`).
//! 2. If the ids are R's session, R → I its initial packet, then a challenge frame: `Nr`
//!    and `HMAC("agentbox-ic-resume-reply", Ni, Nr, both initial packets)`. Otherwise the
//!    all-zero reply and nothing more (I's session ends: `SessionMismatch`).
//! 3. I checks it, sends `HMAC("agentbox-ic-resume-confirm", Ni, Nr, both initial
//!    packets)` and installs; R checks it, then takes the session over and installs.
//!
//! A resume whose session ids were read off the wire therefore fails at step 3 of R: the
//! stranger cannot answer `Nr`. What it cannot stop is a reader of the traffic reading
//! it: only TLS hides the data.
//!
//! Frames: agentbox's own frames are ExBlocks holding a `THandshakeReply` with Params only
//! (`agentbox.nonce`, `agentbox.proof`): every field of that message is optional.

use super::error::HandshakeError;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::wire::{ExBlock, HandshakeReply, InitialPacket, KeyValuePair};
use crate::actors::ActorId;

/// The handshake param that carries a side's nonce.
pub(crate) const NONCE: &str = "agentbox.nonce";
/// The handshake param that carries a side's HMAC proof.
pub(crate) const PROOF: &str = "agentbox.proof";

/// How long a nonce is, in bytes.
pub(crate) const NONCE_LEN: usize = 32;

const ADMIT: &[u8] = b"agentbox-ic-admit";
const CONFIRM: &[u8] = b"agentbox-ic-confirm";
const RESUME_REPLY: &[u8] = b"agentbox-ic-resume-reply";
const RESUME_CONFIRM: &[u8] = b"agentbox-ic-resume-confirm";

/// An agentbox frame: an ExBlock holding a `THandshakeReply` with these params only.
fn frame(nonce: Option<&[u8]>, tag: Option<Vec<u8>>) -> Vec<u8> {
    let mut params = Vec::new();
    if let Some(n) = nonce {
        params.push(kv(NONCE, n.to_vec()));
    }
    if let Some(t) = tag {
        params.push(kv(PROOF, t));
    }
    let reply = HandshakeReply {
        params,
        ..Default::default()
    };
    ExBlock::new(reply.encode()).encode()
}

/// A frame's nonce and proof (`None` for a missing one).
pub(crate) type NonceAndProof = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The nonce and proof of an agentbox frame's payload (`None` for a missing one).
///
/// # Errors
///
/// A payload that is not a `THandshakeReply`.
pub(crate) fn parse(payload: &[u8]) -> Result<NonceAndProof, HandshakeError> {
    let (reply, _) = HandshakeReply::decode(payload)?;
    if let Some(why) = reply.error_explanation {
        return Err(HandshakeError::Refused(why));
    }
    let nonce = param(&reply.params, NONCE).map(<[u8]>::to_vec);
    let tag = param(&reply.params, PROOF).map(<[u8]>::to_vec);
    Ok((nonce, tag))
}

/// A nonce of the right length, or `BadSecret`.
pub(crate) fn nonce_of(nonce: Option<Vec<u8>>) -> Result<Vec<u8>, HandshakeError> {
    nonce
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or(HandshakeError::BadSecret)
}

/// Step 4 of a new session: I's answer to R's nonce, over both nonces and both ids.
pub(crate) fn new_session_confirm(
    secret: &[u8],
    ni: &[u8],
    nr: &[u8],
    initiator: ActorId,
    responder: ActorId,
) -> Vec<u8> {
    let (i, r) = (initiator.to_string(), responder.to_string());
    proof(secret, &[CONFIRM, ni, nr, i.as_bytes(), r.as_bytes()])
}

/// Checks I's answer of step 4 (R's side).
pub(crate) fn check_new_session_confirm(
    secret: &[u8],
    ni: &[u8],
    nr: &[u8],
    initiator: ActorId,
    responder: ActorId,
    tag: Option<&[u8]>,
) -> Result<(), HandshakeError> {
    let (i, r) = (initiator.to_string(), responder.to_string());
    let parts: [&[u8]; 5] = [CONFIRM, ni, nr, i.as_bytes(), r.as_bytes()];
    match tag {
        Some(t) if verify_proof(secret, &parts, t) => Ok(()),
        _ => Err(HandshakeError::BadSecret),
    }
}

/// The frame of I's proof (step 4 of a new session, step 3 of a resume).
pub(crate) fn proof_frame(tag: Vec<u8>) -> Vec<u8> {
    frame(None, Some(tag))
}

/// The admission frame that follows I's initial packet (step 0): I's nonce and
/// `HMAC("agentbox-ic-admit", Ni, the initial packet, R's node id)`.
pub(crate) fn admit_frame(secret: &[u8], ni: &[u8], hello: &InitialPacket, to: u32) -> Vec<u8> {
    frame(Some(ni), Some(admit_tag(secret, ni, hello, to)))
}

fn admit_tag(secret: &[u8], ni: &[u8], hello: &InitialPacket, to: u32) -> Vec<u8> {
    proof(secret, &[ADMIT, ni, &hello.encode(), &to.to_le_bytes()])
}

/// R checks the admission frame's `payload` after `hello` (R is node `own`); returns I's
/// nonce.
///
/// # Errors
///
/// `BadSecret` for a missing nonce or a wrong proof, `Wire` for a payload that is no frame.
pub(crate) fn check_admit(
    secret: &[u8],
    payload: &[u8],
    hello: &InitialPacket,
    own: u32,
) -> Result<Vec<u8>, HandshakeError> {
    let (ni, tag) = parse(payload)?;
    let ni = nonce_of(ni)?;
    let parts: [&[u8]; 4] = [ADMIT, &ni, &hello.encode(), &own.to_le_bytes()];
    match tag {
        Some(t) if verify_proof(secret, &parts, &t) => Ok(ni),
        _ => Err(HandshakeError::BadSecret),
    }
}

/// The tag of a resume's step: `reply` (R's) or I's confirm, over both nonces and both
/// initial packets (which hold both session ids and both confirms).
fn resume_tag(
    secret: &[u8],
    reply: bool,
    ni: &[u8],
    nr: &[u8],
    hello: &InitialPacket,
    answer: &InitialPacket,
) -> Vec<u8> {
    let label = if reply { RESUME_REPLY } else { RESUME_CONFIRM };
    let (h, a) = (hello.encode(), answer.encode());
    proof(secret, &[label, ni, nr, &h, &a])
}

fn check_resume_tag(
    secret: &[u8],
    reply: bool,
    (ni, nr): (&[u8], &[u8]),
    hello: &InitialPacket,
    answer: &InitialPacket,
    tag: Option<&[u8]>,
) -> Result<(), HandshakeError> {
    let label = if reply { RESUME_REPLY } else { RESUME_CONFIRM };
    let (h, a) = (hello.encode(), answer.encode());
    match tag {
        Some(t) if verify_proof(secret, &[label, ni, nr, &h, &a], t) => Ok(()),
        _ => Err(HandshakeError::BadSecret),
    }
}

/// R's challenge frame of a resume: its nonce and its proof.
pub(crate) fn resume_challenge(
    secret: &[u8],
    ni: &[u8],
    nr: &[u8],
    hello: &InitialPacket,
    answer: &InitialPacket,
) -> Vec<u8> {
    frame(
        Some(nr),
        Some(resume_tag(secret, true, ni, nr, hello, answer)),
    )
}

/// I checks R's challenge frame of a resume; returns R's nonce.
pub(crate) fn check_resume_challenge(
    secret: &[u8],
    ni: &[u8],
    payload: &[u8],
    hello: &InitialPacket,
    answer: &InitialPacket,
) -> Result<Vec<u8>, HandshakeError> {
    let (nr, tag) = parse(payload)?;
    let nr = nonce_of(nr)?;
    check_resume_tag(secret, true, (ni, &nr), hello, answer, tag.as_deref())?;
    Ok(nr)
}

/// I's answer to a resume's challenge.
pub(crate) fn resume_confirm(
    secret: &[u8],
    ni: &[u8],
    nr: &[u8],
    hello: &InitialPacket,
    answer: &InitialPacket,
) -> Vec<u8> {
    resume_tag(secret, false, ni, nr, hello, answer)
}

/// R checks I's answer to a resume's challenge.
pub(crate) fn check_resume_confirm(
    secret: &[u8],
    (ni, nr): (&[u8], &[u8]),
    hello: &InitialPacket,
    answer: &InitialPacket,
    payload: &[u8],
) -> Result<(), HandshakeError> {
    let (_, tag) = parse(payload)?;
    check_resume_tag(secret, false, (ni, nr), hello, answer, tag.as_deref())
}

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 of `parts` (each length-prefixed, so that no two inputs collide).
pub(crate) fn proof(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return Vec::new();
    };
    for p in parts {
        mac.update(&(p.len() as u64).to_le_bytes());
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Checks a proof in constant time.
pub(crate) fn verify_proof(secret: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return false;
    };
    for p in parts {
        mac.update(&(p.len() as u64).to_le_bytes());
        mac.update(p);
    }
    mac.verify_slice(tag).is_ok()
}

/// A param's value by key.
pub(crate) fn param<'a>(params: &'a [KeyValuePair], key: &str) -> Option<&'a [u8]> {
    params
        .iter()
        .find(|p| p.key.as_deref() == Some(key))
        .and_then(|p| p.value.as_deref())
}

pub(crate) fn kv(key: &str, value: Vec<u8>) -> KeyValuePair {
    KeyValuePair {
        key: Some(key.to_owned()),
        value: Some(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packets() -> (InitialPacket, InitialPacket) {
        let i = ActorId::new(1, 10, 0);
        let r = ActorId::new(2, 20, 0);
        let hello = InitialPacket {
            self_virtual_id: i,
            peer_virtual_id: r,
            next_packet: 5,
            version: 2,
        };
        let answer = InitialPacket {
            self_virtual_id: r,
            peer_virtual_id: i,
            next_packet: 7,
            version: 2,
        };
        (hello, answer)
    }

    fn payload(frame: &[u8]) -> Vec<u8> {
        ExBlock::decode(frame).unwrap().0.payload
    }

    #[test]
    fn a_resume_s_proofs_hold_only_for_the_nonces_and_packets_they_were_made_for() {
        let (hello, answer) = packets();
        let (ni, nr) = ([1u8; 32], [2u8; 32]);
        let challenge = payload(&resume_challenge(b"s", &ni, &nr, &hello, &answer));
        assert_eq!(
            check_resume_challenge(b"s", &ni, &challenge, &hello, &answer).unwrap(),
            nr
        );
        // Another nonce of I's (a replayed challenge), another secret, another packet.
        assert!(check_resume_challenge(b"s", &[3u8; 32], &challenge, &hello, &answer).is_err());
        assert!(check_resume_challenge(b"t", &ni, &challenge, &hello, &answer).is_err());
        let mut other = answer;
        other.next_packet = 8;
        assert!(check_resume_challenge(b"s", &ni, &challenge, &hello, &other).is_err());

        let confirm = payload(&proof_frame(resume_confirm(
            b"s", &ni, &nr, &hello, &answer,
        )));
        check_resume_confirm(b"s", (&ni, &nr), &hello, &answer, &confirm).unwrap();
        assert_eq!(
            check_resume_confirm(b"s", (&ni, &[9u8; 32]), &hello, &answer, &confirm),
            Err(HandshakeError::BadSecret)
        );
        // R's own tag is no answer to its challenge (labels differ).
        let reflected = payload(&proof_frame(resume_tag(
            b"s", true, &ni, &nr, &hello, &answer,
        )));
        assert_eq!(
            check_resume_confirm(b"s", (&ni, &nr), &hello, &answer, &reflected),
            Err(HandshakeError::BadSecret)
        );
    }

    #[test]
    fn a_new_session_s_confirm_binds_both_nonces_and_ids() {
        let (i, r) = (ActorId::new(1, 10, 0), ActorId::new(2, 20, 0));
        let (ni, nr) = ([1u8; 32], [2u8; 32]);
        let tag = new_session_confirm(b"s", &ni, &nr, i, r);
        assert!(check_new_session_confirm(b"s", &ni, &nr, i, r, Some(&tag)).is_ok());
        for (ni2, nr2, i2) in [(&[0u8; 32], &nr, i), (&ni, &[0u8; 32], i), (&ni, &nr, r)] {
            assert_eq!(
                check_new_session_confirm(b"s", ni2, nr2, i2, r, Some(&tag)),
                Err(HandshakeError::BadSecret)
            );
        }
        assert_eq!(
            check_new_session_confirm(b"s", &ni, &nr, i, r, None),
            Err(HandshakeError::BadSecret)
        );
        let (hello, _) = packets();
        let admit = payload(&admit_frame(b"s", &ni, &hello, 2));
        assert_eq!(check_admit(b"s", &admit, &hello, 2).unwrap(), ni);
        // For another receiver, with another secret, after another initial packet.
        assert!(check_admit(b"s", &admit, &hello, 3).is_err());
        assert!(check_admit(b"t", &admit, &hello, 2).is_err());
        let mut other = hello;
        other.next_packet += 1;
        assert!(check_admit(b"s", &admit, &other, 2).is_err());
    }
}
