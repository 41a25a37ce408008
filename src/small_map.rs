//! A map that scans a vector while small and hashes once it grows.
//!
//! Mbox tables and subscription indexes usually hold one to four keys, where a linear scan
//! of a vector beats hashing a `TypeId`. Past [`SPILL`] entries the map moves into an
//! `ahash` map so that agents with hundreds of subscriptions stay O(1).

use std::hash::Hash;

use ahash::AHashMap;
use smallvec::SmallVec;

/// Entries kept in the vector before spilling into the hash map.
const SPILL: usize = 8;

/// `N` entries live inline: a map that nearly always holds one entry (an agent's
/// subscription index, its direct-mbox table) then costs no allocation at all.
pub(crate) enum SmallMap<K, V, const N: usize = 0> {
    Small(SmallVec<[(K, V); N]>),
    /// Boxed: an agent holds several of these maps, nearly all small.
    Large(Box<AHashMap<K, V>>),
}

impl<K: Eq + Hash + Copy, V, const N: usize> Default for SmallMap<K, V, N> {
    fn default() -> Self {
        SmallMap::Small(SmallVec::new())
    }
}

impl<K: Eq + Hash + Copy, V, const N: usize> SmallMap<K, V, N> {
    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        match self {
            SmallMap::Small(v) => v.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            SmallMap::Large(m) => m.get(key),
        }
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match self {
            SmallMap::Small(v) => v.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            SmallMap::Large(m) => m.get_mut(key),
        }
    }

    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the old value.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            SmallMap::Small(v) => {
                if let Some(slot) = v.iter_mut().find(|(k, _)| *k == key) {
                    return Some(std::mem::replace(&mut slot.1, value));
                }
                if v.len() < SPILL {
                    if v.len() == v.capacity() {
                        // Exactly sized: most maps hold one or two keys, and an agent holds
                        // several maps (a million agents felt the default growth).
                        v.reserve_exact(1);
                    }
                    v.push((key, value));
                    return None;
                }
                let mut m: AHashMap<K, V> = v.drain(..).collect();
                m.insert(key, value);
                *self = SmallMap::Large(Box::new(m));
                None
            }
            SmallMap::Large(m) => m.insert(key, value),
        }
    }

    pub(crate) fn entry_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        if !self.contains_key(&key) {
            self.insert(key, make());
        }
        self.get_mut(&key).expect("inserted above")
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        match self {
            // Order of a small map is irrelevant to its users: swap_remove is fine.
            SmallMap::Small(v) => {
                let i = v.iter().position(|(k, _)| k == key)?;
                Some(v.swap_remove(i).1)
            }
            SmallMap::Large(m) => m.remove(key),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> usize {
        match self {
            SmallMap::Small(v) => v.len(),
            SmallMap::Large(m) => m.len(),
        }
    }

    pub(crate) fn keys(&self) -> Vec<K> {
        match self {
            SmallMap::Small(v) => v.iter().map(|(k, _)| *k).collect(),
            SmallMap::Large(m) => m.keys().copied().collect(),
        }
    }

    /// The entries, borrowed (no intermediate allocation).
    pub(crate) fn iter(&self) -> Iter<'_, K, V> {
        match self {
            SmallMap::Small(v) => Iter::Small(v.iter()),
            SmallMap::Large(m) => Iter::Large(m.iter()),
        }
    }

    /// The values, consuming the map (no intermediate allocation).
    pub(crate) fn into_values(self) -> IntoValues<K, V, N> {
        match self {
            SmallMap::Small(v) => IntoValues::Small(v.into_iter()),
            SmallMap::Large(m) => IntoValues::Large(m.into_values()),
        }
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        match self {
            SmallMap::Small(v) => v.retain(|(k, v)| keep(k, v)),
            SmallMap::Large(m) => m.retain(|k, v| keep(k, v)),
        }
    }
}

pub(crate) enum Iter<'a, K, V> {
    Small(std::slice::Iter<'a, (K, V)>),
    Large(std::collections::hash_map::Iter<'a, K, V>),
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next(),
        }
    }
}

pub(crate) enum IntoValues<K, V, const N: usize> {
    Small(smallvec::IntoIter<[(K, V); N]>),
    Large(std::collections::hash_map::IntoValues<K, V>),
}

impl<K, V, const N: usize> Iterator for IntoValues<K, V, N> {
    type Item = V;

    fn next(&mut self) -> Option<V> {
        match self {
            IntoValues::Small(it) => it.next().map(|(_, v)| v),
            IntoValues::Large(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SmallMap;

    #[test]
    fn spills_and_keeps_every_key() {
        let mut m: SmallMap<u32, u32, 1> = SmallMap::default();
        for i in 0..100u32 {
            assert_eq!(m.insert(i, i * 2), None);
        }
        assert!(matches!(m, SmallMap::Large(_)));
        assert_eq!(m.len(), 100);
        for i in 0..100u32 {
            assert_eq!(m.get(&i), Some(&(i * 2)));
        }
        assert_eq!(m.insert(5, 0), Some(10));
        assert_eq!(m.remove(&5), Some(0));
        assert_eq!(m.get(&5), None);
        m.retain(|k, _| k % 2 == 0);
        assert_eq!(m.len(), 50);
        let mut values: Vec<u32> = m.into_values().collect();
        values.sort();
        assert_eq!(values.len(), 50);
        assert_eq!(values[..3], [0, 4, 8]);
    }
}
