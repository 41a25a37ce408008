//! What every thread of a node shares ([`NodeShared`]): the session table, the
//! cluster's identity and secret, the admission of incoming connections, the refusals
//! kept, over the [`NodeBase`] that the sessions read; and the closing of a connection
//! when the node stops. The handshakes (`handshake.rs`), the listener (`listener.rs`) and
//! the node's face (`node.rs`) build on it.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::admission::Admission;
use super::base::NodeBase;
use super::encryption::EncryptionMode;
use super::names::NameService;
use super::session::Session;
use super::stats::Refusal;
use super::stream::IcStream;
use crate::stats::StatsSource;

/// How many refusals `Interconnect::refusals` keeps.
const REFUSALS_KEPT: usize = 64;

/// What every thread of a node shares.
pub(crate) struct NodeShared {
    /// What the sessions read too (`base.rs`); the node derefs to it.
    pub(crate) base: NodeBase,
    pub(crate) names: NameService,
    pub(super) cluster_uuid: Option<String>,
    pub(super) accept_uuids: Vec<String>,
    pub(super) secret: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::TlsSetup>,
    pub(super) sessions: BTreeMap<u32, Arc<Session>>,
    pub(super) local_addr: SocketAddr,
    pub(super) pid: u64,
    pub(super) start_time: u64,
    /// Which incoming connections may run a handshake now (`admission.rs`).
    pub(crate) admission: Arc<Admission>,
    pub(super) refusals: Mutex<VecDeque<Refusal>>,
    /// The sessions' figures for the environment's stats controller (held weakly there).
    pub(super) stats_source: Arc<dyn StatsSource>,
}

impl std::ops::Deref for NodeShared {
    type Target = NodeBase;

    #[inline(always)]
    fn deref(&self) -> &NodeBase {
        &self.base
    }
}

impl NodeShared {
    /// When this node runs TLS (DISABLED without a TLS setup).
    pub(crate) fn encryption_mode(&self) -> EncryptionMode {
        #[cfg(feature = "tls")]
        if let Some(t) = &self.tls {
            return t.mode;
        }
        EncryptionMode::Disabled
    }

    /// The cluster's shared secret, if it has one (the handshake then runs the challenge
    /// of `challenge.rs`).
    pub(crate) fn secret(&self) -> Option<&[u8]> {
        self.secret.as_deref()
    }

    pub(crate) fn session(&self, peer: u32) -> Option<Arc<Session>> {
        self.sessions.get(&peer).cloned()
    }

    pub(crate) fn refused(&self, r: Refusal) {
        let mut q = self.refusals.lock();
        if q.len() == REFUSALS_KEPT {
            q.pop_front();
        }
        q.push_back(r);
    }
}

/// Closes a connection that a handshake holds when the node stops (it lost its session
/// to the stop, or failed because of it) as the sessions' connections are closed: an end
/// of stream now, the socket kept open for reading for the close linger. The peer may have
/// installed its side already (it did once it read our answer) and sent on it: dropped at
/// once, with those bytes unread, the socket was reset, which the peer takes for a lost
/// connection and resumes for its whole lost-connection timeout, where an end of stream
/// with nothing of its pending ends its session at once. A handshake that fails while the
/// node runs drops its connection as before.
pub(crate) fn close_if_stopping(node: &NodeShared, stream: IcStream) {
    if !node.is_stopping() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    close_after_linger(vec![Arc::new(stream)], node.cfg.close_linger);
}

/// Shuts the reading half of `streams` (their sending half is shut: `Session::terminate`
/// with `Stopping`) after `linger` (`InterconnectSetup::close_linger`), on a thread of its own: meanwhile what the
/// peer sends is accepted (and dropped by our ended reader), so our close is not a reset
/// that the peer could see before our end of stream. The shutdown wakes a reader still
/// waiting, which lets the socket go; a peer that closes first ends it sooner.
pub(crate) fn close_after_linger(streams: Vec<Arc<IcStream>>, linger: Duration) {
    if streams.is_empty() {
        return;
    }
    let shut = |streams: Vec<Arc<IcStream>>| {
        for s in streams {
            let _ = s.shutdown(std::net::Shutdown::Read);
        }
    };
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Arc<IcStream>>>();
    let spawned = std::thread::Builder::new()
        .name("ic-close".into())
        .spawn(move || {
            if let Ok(streams) = rx.recv() {
                std::thread::sleep(linger);
                shut(streams);
            }
        });
    match spawned {
        Ok(_) => {
            let _ = tx.send(streams);
        }
        // No thread: closed at once, as before.
        Err(_) => shut(streams),
    }
}
