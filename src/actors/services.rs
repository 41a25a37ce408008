//! Local services: service ids mapped to the actors that serve them on this node.
//!
//! Keys are whole 16-byte ids, node included: `(0, "namesvc")` and `(5, "namesvc")` are two
//! services. A service resolves to a plain actor id, never to another service id (YDB
//! resolves once; no chains).

use ahash::AHashMap;
use parking_lot::RwLock;
use thiserror::Error;

use super::id::ActorId;

/// Why a local service could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The key is not a service id ([`ActorId::service`]).
    #[error("{0} is not a service id")]
    NotAService(ActorId),
    /// The target is a service id or empty: a service resolves to one actor, once.
    #[error("a service cannot resolve to {0} (a service id or the empty id)")]
    BadTarget(ActorId),
}

/// The table of one system.
#[derive(Default)]
pub(crate) struct LocalServices {
    map: RwLock<AHashMap<ActorId, ActorId>>,
}

impl LocalServices {
    /// Registers or replaces; returns the actor that served it before.
    pub(crate) fn register(
        &self,
        service: ActorId,
        actor: ActorId,
    ) -> Result<Option<ActorId>, ServiceError> {
        if !service.is_service() {
            return Err(ServiceError::NotAService(service));
        }
        if actor.is_service() || actor.is_empty() {
            return Err(ServiceError::BadTarget(actor));
        }
        Ok(self.map.write().insert(service, actor))
    }

    #[inline]
    pub(crate) fn lookup(&self, service: ActorId) -> Option<ActorId> {
        self.map.read_recursive().get(&service).copied()
    }

    /// Every `(service, actor)` pair now, sorted by service id (read-only).
    pub(crate) fn snapshot(&self) -> Vec<(ActorId, ActorId)> {
        let mut v: Vec<_> = self
            .map
            .read_recursive()
            .iter()
            .map(|(s, a)| (*s, *a))
            .collect();
        v.sort_unstable_by_key(|(s, _)| (s.raw().0, s.raw().1));
        v
    }

    pub(crate) fn clear(&self, service: ActorId) -> Option<ActorId> {
        self.map.write().remove(&service)
    }

    /// Removes `service` only if `actor` still serves it.
    pub(crate) fn clear_if(&self, service: ActorId, actor: ActorId) -> bool {
        let mut m = self.map.write();
        if m.get(&service) == Some(&actor) {
            m.remove(&service);
            true
        } else {
            false
        }
    }
}
