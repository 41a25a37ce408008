//! Named mboxes: the default namespace's MPMC mboxes (the same name gives the same mbox
//! while any handle to it lives), and mboxes introduced in namespaces of their own.

use std::sync::{Arc, Weak};

use ahash::AHashMap;
use parking_lot::Mutex;
use thiserror::Error;

use super::mpmc::{MpmcMbox, NameRegistry};
use super::Mbox;
use crate::environment::handle::WeakEnv;
use crate::trace::Trace;

#[derive(Default)]
pub(crate) struct NamedRegistry {
    map: Mutex<AHashMap<String, Weak<MpmcMbox>>>,
}

impl NamedRegistry {
    pub(crate) fn get_or_create(
        self: &Arc<Self>,
        name: &str,
        env: WeakEnv,
        trace: Trace,
        drops: Arc<crate::drops::DropCounters>,
    ) -> Arc<MpmcMbox> {
        let mut map = self.map.lock();
        if let Some(existing) = map.get(name).and_then(Weak::upgrade) {
            return existing;
        }
        let mbox = Arc::new(MpmcMbox::new(
            env,
            trace,
            drops,
            Some((
                name.to_owned(),
                Arc::downgrade(self) as Weak<dyn NameRegistry>,
            )),
        ));
        map.insert(name.to_owned(), Arc::downgrade(&mbox));
        mbox
    }

    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// The named mboxes alive, by name (their handles taken under the lock, which the
    /// caller no longer holds when it drops them: a last handle's drop calls `forget`).
    #[cfg(feature = "monitor")]
    pub(crate) fn alive(&self) -> Vec<(String, Arc<MpmcMbox>)> {
        self.map
            .lock()
            .iter()
            .filter_map(|(n, w)| Some((n.clone(), w.upgrade()?)))
            .collect()
    }
}

/// Why a named mbox could not be introduced.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NamedMboxError {
    /// The namespace is empty: the empty namespace is
    /// [`Environment::named_mbox`](crate::Environment::named_mbox)'s own.
    #[error("a named mbox namespace must not be empty (mbox {name})")]
    EmptyNamespace {
        /// The name asked for.
        name: String,
    },
}

impl NameRegistry for NamedRegistry {
    /// Called by a named mbox as it dies. Another mbox of the same name may already have
    /// replaced the entry (created between the last handle's drop and this call): only a
    /// dead entry is removed.
    fn forget(&self, name: &str) {
        let mut map = self.map.lock();
        if map.get(name).is_some_and(|w| w.strong_count() == 0) {
            map.remove(name);
        }
    }
}

/// Mboxes introduced by `(namespace, name)`; they live as long as the environment.
#[derive(Default)]
pub(crate) struct Introduced {
    map: Mutex<AHashMap<(String, String), Mbox>>,
}

impl Introduced {
    /// The mbox of `(namespace, name)`, made by `factory` the first time. The factory runs
    /// without the registry's lock (it may introduce mboxes itself); if two threads race,
    /// the first to finish wins and the other's mbox is dropped.
    pub(crate) fn introduce(
        &self,
        namespace: &str,
        name: &str,
        factory: impl FnOnce() -> Mbox,
    ) -> Result<Mbox, NamedMboxError> {
        if namespace.is_empty() {
            return Err(NamedMboxError::EmptyNamespace {
                name: name.to_owned(),
            });
        }
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(m) = self.map.lock().get(&key) {
            return Ok(m.clone());
        }
        let made = factory();
        let mut map = self.map.lock();
        if let Some(winner) = map.get(&key) {
            // Another thread introduced it meanwhile: ours is dropped, outside the lock
            // (its `Drop` may introduce mboxes too).
            let winner = winner.clone();
            drop(map);
            drop(made);
            return Ok(winner);
        }
        map.insert(key, made.clone());
        Ok(made)
    }

    /// Drops every introduced mbox (the environment is finishing).
    /// Every introduced mbox with its namespace and name.
    #[cfg(feature = "monitor")]
    pub(crate) fn all(&self) -> Vec<(String, String, Mbox)> {
        self.map
            .lock()
            .iter()
            .map(|((ns, n), m)| (ns.clone(), n.clone(), m.clone()))
            .collect()
    }

    pub(crate) fn clear(&self) -> Vec<Mbox> {
        self.map.lock().drain().map(|(_, m)| m).collect()
    }
}
