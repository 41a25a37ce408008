//! Named MPMC mboxes: the same name gives the same mbox while any handle to it lives.

use std::sync::{Arc, Weak};

use ahash::AHashMap;
use parking_lot::Mutex;

use super::mpmc::MpmcMbox;
use crate::environment::WeakEnv;
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
    ) -> Arc<MpmcMbox> {
        let mut map = self.map.lock();
        if let Some(existing) = map.get(name).and_then(Weak::upgrade) {
            return existing;
        }
        let mbox = Arc::new(MpmcMbox::new(
            env,
            trace,
            Some((name.to_owned(), Arc::downgrade(self))),
        ));
        map.insert(name.to_owned(), Arc::downgrade(&mbox));
        mbox
    }

    /// Called by a named mbox as it dies. Another mbox of the same name may already have
    /// replaced the entry (created between the last handle's drop and this call): only a
    /// dead entry is removed.
    pub(crate) fn forget(&self, name: &str) {
        let mut map = self.map.lock();
        if map.get(name).is_some_and(|w| w.strong_count() == 0) {
            map.remove(name);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}
