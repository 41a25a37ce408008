//! Whether a new session runs TLS: YDB's rules (`interconnect_handshake.cpp`,
//! `EncryptionMode`), over the request's `RequireEncryption` and the success's
//! `StartEncryption`. A node without the `tls` feature, or without a TLS setup, is in the
//! DISABLED mode. A resume keeps what its session's first handshake decided.
//!
//! | mode | request sends | responder, by the request's field | initiator, by `StartEncryption` |
//! |---|---|---|---|
//! | DISABLED | nothing | `true`: refused; else no TLS | `true`: refused (no TLS here) |
//! | OPTIONAL | `false` | present (either value): TLS; absent: none | as the responder says |
//! | REQUIRED | `true` | absent: refused; else TLS | `false` or absent: refused |
//!
//! With TLS both sides run it on the socket right after the handshake's last frame (for a
//! resume, right after the initial packets); the lower node id is the TLS server (YDB
//! keeps the roles fixed so that TLS sessions could be resumed).

use super::error::HandshakeError;

/// When the interconnect runs TLS (YDB's `EncryptionMode`).
///
/// A new session runs TLS if either side requires it and the other allows it, or both
/// allow it; a node that requires TLS refuses a peer without it, and a node with TLS
/// disabled refuses a peer that requires it. A resumed connection keeps what its session
/// decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub enum EncryptionMode {
    /// No TLS: a peer that requires it is refused (the default; YDB's `DISABLED`).
    #[default]
    Disabled,
    /// TLS when the peer can run it (YDB's `OPTIONAL`).
    Optional,
    /// TLS always: a peer without it is refused (YDB's `REQUIRED`).
    Required,
}

/// The request's `RequireEncryption` field in `mode`.
pub(crate) fn request_field(mode: EncryptionMode) -> Option<bool> {
    match mode {
        EncryptionMode::Disabled => None,
        EncryptionMode::Optional => Some(false),
        EncryptionMode::Required => Some(true),
    }
}

/// The responder's decision: TLS or not (the success's `StartEncryption`), or a refusal.
pub(crate) fn responder_decides(
    mode: EncryptionMode,
    require: Option<bool>,
) -> Result<bool, HandshakeError> {
    match (mode, require) {
        (EncryptionMode::Disabled, Some(true)) => Err(HandshakeError::Tls(
            "the peer requires TLS, which is disabled here".into(),
        )),
        (EncryptionMode::Disabled, _) => Ok(false),
        (EncryptionMode::Optional, r) => Ok(r.is_some()),
        (EncryptionMode::Required, None) => Err(HandshakeError::Tls(
            "the peer does not offer TLS, which is required here".into(),
        )),
        (EncryptionMode::Required, Some(_)) => Ok(true),
    }
}

/// The initiator's decision on the success's `StartEncryption`: TLS or not, or a refusal.
pub(crate) fn initiator_decides(
    mode: EncryptionMode,
    start: Option<bool>,
) -> Result<bool, HandshakeError> {
    let start = start == Some(true);
    match mode {
        EncryptionMode::Disabled if start => Err(HandshakeError::Tls(
            "the peer starts TLS, which is disabled here".into(),
        )),
        EncryptionMode::Required if !start => Err(HandshakeError::Tls(
            "the peer does not start TLS, which is required here".into(),
        )),
        _ => Ok(start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EncryptionMode::*;

    /// Both sides' decisions for every pair of modes: `Some(tls)` or `None` (refused).
    fn outcome(initiator: EncryptionMode, responder: EncryptionMode) -> Option<bool> {
        let start = responder_decides(responder, request_field(initiator)).ok()?;
        initiator_decides(initiator, Some(start)).ok()
    }

    #[test]
    fn ydb_s_encryption_rules_for_every_pair_of_modes() {
        let cases = [
            (Disabled, Disabled, Some(false)),
            (Disabled, Optional, Some(false)),
            (Disabled, Required, None),
            (Optional, Disabled, Some(false)),
            (Optional, Optional, Some(true)),
            (Optional, Required, Some(true)),
            (Required, Disabled, None),
            (Required, Optional, Some(true)),
            (Required, Required, Some(true)),
        ];
        for (i, r, want) in cases {
            assert_eq!(outcome(i, r), want, "initiator {i:?}, responder {r:?}");
        }
        // OPTIONAL starts TLS on the field's presence, whatever its value (YDB).
        assert_eq!(responder_decides(Optional, Some(false)), Ok(true));
        assert_eq!(responder_decides(Optional, None), Ok(false));
    }
}
