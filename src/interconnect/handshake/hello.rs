//! What this node says and checks in a handshake: its request, the peer's request, its
//! answer and the peer's answer (`YDB_WIRE.md` §3.4, §6.6), from the node's settings.

use crate::actors::ActorId;
use crate::interconnect::challenge::{self, param, proof, verify_proof, NONCE, NONCE_LEN, PROOF};
use crate::interconnect::encryption;
use crate::interconnect::error::HandshakeError;
use crate::interconnect::shared::NodeShared;
use crate::interconnect::wire::{
    ClusterUuids, HandshakeRequest, HandshakeSuccess, SuccessRdma, HANDSHAKE_PROTOCOL,
};

impl NodeShared {
    fn own_host(&self) -> String {
        self.names
            .get(self.node_id)
            .map(|a| a.host.clone())
            .unwrap_or_default()
    }

    fn cluster(&self) -> Option<ClusterUuids> {
        if self.cluster_uuid.is_none() && self.accept_uuids.is_empty() {
            return None;
        }
        Some(ClusterUuids {
            cluster_uuid: self.cluster_uuid.clone(),
            accept_uuid: self.accept_uuids.clone(),
        })
    }

    /// Our `THandshakeRequest` to `peer` for session `self_id` (`YDB_WIRE.md` §3.4), with
    /// the fields YDB always sets (§6.6): `UUID` when there is a cluster id,
    /// `RequestAuthOnly`, `HandshakeId`, `RequestXxhash` and `RequestXdcShuffle`.
    pub(crate) fn request(&self, peer: u32, self_id: ActorId, nonce: &[u8]) -> HandshakeRequest {
        let sender_actor_id = self_id.to_string();
        let mut params = Vec::new();
        if let Some(secret) = &self.secret {
            let to = peer.to_le_bytes();
            let tag = proof(
                secret,
                &[
                    b"agentbox-ic-request",
                    nonce,
                    sender_actor_id.as_bytes(),
                    &to,
                ],
            );
            params.push(challenge::kv(NONCE, nonce.to_vec()));
            params.push(challenge::kv(PROOF, tag));
        }
        HandshakeRequest {
            protocol: HANDSHAKE_PROTOCOL,
            program_pid: self.pid,
            program_start_time: self.start_time,
            serial: self_id.local_id(),
            receiver_node_id: peer,
            sender_actor_id,
            sender_host_name: Some(self.own_host()),
            receiver_host_name: Some(
                self.names
                    .get(peer)
                    .map(|a| a.host.clone())
                    .unwrap_or_default(),
            ),
            cluster_uuids: self.cluster(),
            request_modern_frame: Some(true),
            request_extended_trace_fmt: Some(true),
            request_external_data_channel: Some(false),
            require_encryption: encryption::request_field(self.encryption_mode()),
            uuid: self.cluster_uuid.clone(),
            request_auth_only: Some(false),
            handshake_id: Some(self.random_bytes().to_vec()),
            request_xxhash: Some(true),
            request_xdc_shuffle: Some(true),
            params,
            ..Default::default()
        }
    }

    /// Checks a request from `peer` (accepting side); returns the peer's session id and
    /// nonce.
    pub(crate) fn check_request(
        &self,
        peer: u32,
        r: &HandshakeRequest,
    ) -> Result<(ActorId, Vec<u8>), HandshakeError> {
        if r.protocol != HANDSHAKE_PROTOCOL {
            return Err(HandshakeError::Incompatible(format!(
                "handshake protocol {}",
                r.protocol
            )));
        }
        if r.receiver_node_id != self.node_id {
            return Err(HandshakeError::WrongReceiverNode {
                wanted: r.receiver_node_id,
                actual: self.node_id,
            });
        }
        let session: ActorId = r.sender_actor_id.parse().map_err(|_| {
            HandshakeError::Incompatible(format!("sender id {:?}", r.sender_actor_id))
        })?;
        if session.node_id() != peer {
            return Err(HandshakeError::Incompatible(format!(
                "sender id {session} is not of node {peer}"
            )));
        }
        let expected = self
            .names
            .get(peer)
            .ok_or(HandshakeError::UnknownNode(peer))?
            .host
            .clone();
        let got = r.sender_host_name.clone().unwrap_or_default();
        if got != expected {
            return Err(HandshakeError::HostNameMismatch {
                field: "SenderHostName",
                got,
                expected,
            });
        }
        let own = self.own_host();
        let got = r.receiver_host_name.clone().unwrap_or_default();
        if got != own {
            return Err(HandshakeError::HostNameMismatch {
                field: "ReceiverHostName",
                got,
                expected: own,
            });
        }
        let legacy = Some(r.uuid.as_deref());
        if !cluster_accepts(
            self.cluster_uuid.as_deref(),
            &self.accept_uuids,
            r.cluster_uuids.as_ref(),
            legacy,
        ) {
            return Err(HandshakeError::ClusterMismatch {
                peer: peer_cluster(r.cluster_uuids.as_ref(), r.uuid.as_deref()),
            });
        }
        if r.request_modern_frame != Some(true) || r.request_extended_trace_fmt != Some(true) {
            return Err(HandshakeError::Incompatible("obsolete peer version".into()));
        }
        if r.do_check_cookie.is_some() {
            return Err(HandshakeError::Incompatible(
                "cookie checks are not supported".into(),
            ));
        }
        let nonce = param(&r.params, NONCE)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if let Some(secret) = &self.secret {
            let tag = param(&r.params, PROOF).ok_or(HandshakeError::BadSecret)?;
            let to = self.node_id.to_le_bytes();
            let parts: [&[u8]; 4] = [
                b"agentbox-ic-request",
                &nonce,
                r.sender_actor_id.as_bytes(),
                &to,
            ];
            // No proof of freshness (a recorded request passes): the challenge is
            // (`challenge.rs`), before anything of the session changes.
            if nonce.len() != NONCE_LEN || !verify_proof(secret, &parts, tag) {
                return Err(HandshakeError::BadSecret);
            }
        }
        Ok((session, nonce))
    }

    /// Our `THandshakeSuccess` for session `self_id` (accepting side), with our `nonce`
    /// (the challenge the peer answers, if the cluster has a secret) and the fields YDB
    /// always sets (`AuthOnly`, `RdmaErr`); the caller sets `UseXxhash` and
    /// `UseXdcShuffle` from the request (`NewPeer::grant`), and `StartEncryption` when
    /// the modes chose TLS.
    pub(crate) fn success(
        &self,
        self_id: ActorId,
        peer_nonce: &[u8],
        nonce: &[u8],
    ) -> HandshakeSuccess {
        let sender_actor_id = self_id.to_string();
        let mut params = Vec::new();
        if let Some(secret) = &self.secret {
            let tag = proof(
                secret,
                &[
                    b"agentbox-ic-reply",
                    peer_nonce,
                    nonce,
                    sender_actor_id.as_bytes(),
                ],
            );
            params.push(challenge::kv(NONCE, nonce.to_vec()));
            params.push(challenge::kv(PROOF, tag));
        }
        HandshakeSuccess {
            protocol: HANDSHAKE_PROTOCOL,
            program_pid: self.pid,
            program_start_time: self.start_time,
            serial: self_id.local_id(),
            sender_actor_id,
            cluster_uuids: self.cluster(),
            start_encryption: Some(false),
            use_modern_frame: Some(true),
            use_extended_trace_fmt: Some(true),
            use_external_data_channel: Some(false),
            auth_only: Some(false),
            use_xxhash: Some(false),
            rdma: Some(SuccessRdma::RdmaErr("no RDMA on this node".into())),
            params,
            ..Default::default()
        }
    }

    /// Checks a success from `peer` (connecting side); returns the peer's session id and
    /// its nonce (empty without a secret).
    pub(crate) fn check_success(
        &self,
        peer: u32,
        s: &HandshakeSuccess,
        our_nonce: &[u8],
    ) -> Result<(ActorId, Vec<u8>), HandshakeError> {
        check_success_flags(s)?;
        if !cluster_accepts(
            self.cluster_uuid.as_deref(),
            &self.accept_uuids,
            s.cluster_uuids.as_ref(),
            None,
        ) {
            return Err(HandshakeError::ClusterMismatch {
                peer: peer_cluster(s.cluster_uuids.as_ref(), None),
            });
        }
        let session: ActorId = s.sender_actor_id.parse().map_err(|_| {
            HandshakeError::Incompatible(format!("sender id {:?}", s.sender_actor_id))
        })?;
        if session.node_id() != peer {
            return Err(HandshakeError::Incompatible(format!(
                "sender id {session} is not of node {peer}"
            )));
        }
        if let Some(secret) = &self.secret {
            let nonce = param(&s.params, NONCE).ok_or(HandshakeError::BadSecret)?;
            let tag = param(&s.params, PROOF).ok_or(HandshakeError::BadSecret)?;
            let parts: [&[u8]; 4] = [
                b"agentbox-ic-reply",
                our_nonce,
                nonce,
                s.sender_actor_id.as_bytes(),
            ];
            if nonce.len() != NONCE_LEN || !verify_proof(secret, &parts, tag) {
                return Err(HandshakeError::BadSecret);
            }
            return Ok((session, nonce.to_vec()));
        }
        Ok((session, Vec::new()))
    }
}

fn peer_cluster(c: Option<&ClusterUuids>, legacy: Option<&str>) -> String {
    c.and_then(|c| c.cluster_uuid.clone())
        .or_else(|| legacy.map(str::to_owned))
        .unwrap_or_default()
}

/// YDB's cluster-id rule (`ValidateClusterUUID`): with an empty accept list anyone is
/// accepted; otherwise our id must be in the peer's accept list or the peer's id in ours.
/// A message without `ClusterUUIDs` is checked by `legacy` (a request's `UUID`), or passes
/// (a reply: `legacy` is `None`).
pub(crate) fn cluster_accepts(
    own: Option<&str>,
    accept: &[String],
    peer: Option<&ClusterUuids>,
    legacy: Option<Option<&str>>,
) -> bool {
    if accept.is_empty() {
        return true;
    }
    match peer {
        Some(p) => {
            let own = own.unwrap_or("");
            p.accept_uuid.iter().any(|u| u == own)
                || accept
                    .iter()
                    .any(|u| u == p.cluster_uuid.as_deref().unwrap_or(""))
        }
        None => match legacy {
            Some(uuid) => accept.iter().any(|u| u == uuid.unwrap_or("")),
            None => true,
        },
    }
}

/// Checks that a success is one we can work with (YDB's requester checks).
pub(crate) fn check_success_flags(success: &HandshakeSuccess) -> Result<(), HandshakeError> {
    if success.use_modern_frame != Some(true) || success.use_extended_trace_fmt != Some(true) {
        return Err(HandshakeError::Incompatible(
            "the peer does not use the modern frame and extended trace format".into(),
        ));
    }
    if success.use_external_data_channel == Some(true) {
        return Err(HandshakeError::Incompatible("the peer uses XDC".into()));
    }
    Ok(())
}
