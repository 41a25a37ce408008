//! The hooks run once an environment has finished (feature `tokio`'s awaitable end).

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// A finish hook: short, must not panic (it completes a oneshot channel).
pub(crate) type FinishHook = Box<dyn FnOnce() + Send>;

/// The hooks waiting for an environment's end, each under its key so that a future given
/// up takes its hook back; shared (an `Arc`) with those futures, which thus hold no
/// reference to the environment.
///
/// Races: a hook added while the environment finishes runs either with the others (it
/// came before [`finish`](Self::finish) took them) or at once (after): `finished` and
/// the map change together under one lock.
#[derive(Default)]
pub(crate) struct FinishHooks(Mutex<Table>);

#[derive(Default)]
struct Table {
    finished: bool,
    next_key: u64,
    hooks: BTreeMap<u64, FinishHook>,
}

impl FinishHooks {
    /// Keeps `hook` until the end and returns its key; runs it at once (and returns
    /// `None`) if the end has come.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn add(&self, hook: FinishHook) -> Option<u64> {
        let hook = {
            let mut t = self.0.lock();
            if !t.finished {
                let key = t.next_key;
                t.next_key += 1;
                t.hooks.insert(key, hook);
                return Some(key);
            }
            hook
        };
        hook();
        None
    }

    /// Takes back the hook under `key`, if it has not run; drops it outside the lock.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn cancel(&self, key: u64) {
        let hook = self.0.lock().hooks.remove(&key);
        drop(hook);
    }

    /// The end: runs every hook, in the order they came, with no lock held.
    pub(crate) fn finish(&self) {
        let hooks = {
            let mut t = self.0.lock();
            t.finished = true;
            std::mem::take(&mut t.hooks)
        };
        for hook in hooks.into_values() {
            hook();
        }
    }

    /// How many hooks wait.
    pub(crate) fn len(&self) -> usize {
        self.0.lock().hooks.len()
    }
}
