//! A CC thread's map from a key word to what it knows of the record
//! ([`Latest`]): open addressing with linear probing over a power-of-two
//! table. Unlike a general hash map, the slot a lookup starts at is known
//! from the key alone, so the CC stage can prefetch the slots of the
//! transactions ahead of the one it plans and overlap their cache misses
//! (a CC thread's map holds every record it owns: 1M keys of YCSB make a
//! table far larger than the caches, and each lookup missed once or twice).
//! Entries are never removed.

use super::Latest;

/// The word no key may have in the table (it marks an empty slot); a key
/// equal to it is kept on the side.
const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    val: Latest,
}

pub(super) struct WordMap {
    slots: Box<[Slot]>,
    mask: usize,
    len: usize,
    /// The entry of the key [`EMPTY`].
    max_key: Option<Latest>,
}

impl Default for WordMap {
    fn default() -> Self {
        WordMap::with_capacity_pow2(64)
    }
}

/// MurmurHash3's 64-bit finalizer: every bit of the index depends on every
/// bit of the key (keys are big-endian encodings whose low bytes vary).
#[inline]
pub(super) fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Bring the cache line holding `p` closer: a hint, with no architectural
/// effect (any address may be given, even a dangling one).
#[inline]
pub(super) fn prefetch_line<T>(p: *const T) {
    crate::storage::prefetch_bytes(p.cast(), 1);
}

impl WordMap {
    fn with_capacity_pow2(cap: usize) -> WordMap {
        debug_assert!(cap.is_power_of_two());
        WordMap {
            slots: vec![
                Slot {
                    key: EMPTY,
                    val: Latest::NONE,
                };
                cap
            ]
            .into_boxed_slice(),
            mask: cap - 1,
            len: 0,
            max_key: None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len + usize::from(self.max_key.is_some())
    }

    /// Where `key`'s probe starts.
    #[inline]
    fn home(&self, key: u64) -> usize {
        mix(key) as usize & self.mask
    }

    /// The slot holding `key` (`Ok`), or the empty slot where it would go.
    #[inline]
    fn probe(&self, key: u64) -> Result<usize, usize> {
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                return Ok(i);
            }
            if k == EMPTY {
                return Err(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Bring the cache line where a lookup of `key` starts closer (a hint:
    /// nothing is read or changed).
    #[inline]
    pub(super) fn prefetch(&self, key: u64) {
        prefetch_line(&self.slots[self.home(key)] as *const Slot);
    }

    /// `key`'s entry, if it has one.
    #[inline]
    pub(super) fn get(&self, key: u64) -> Option<&Latest> {
        if key == EMPTY {
            return self.max_key.as_ref();
        }
        self.probe(key).ok().map(|at| &self.slots[at].val)
    }

    #[cfg(test)]
    pub(super) fn get_mut(&mut self, key: u64) -> Option<&mut Latest> {
        let at = self.find(key)?;
        Some(self.at_mut(at))
    }

    /// Where `key`'s entry is, if it has one (for [`WordMap::at_mut`]).
    #[inline]
    pub(super) fn find(&self, key: u64) -> Option<usize> {
        if key == EMPTY {
            return self.max_key.is_some().then_some(usize::MAX);
        }
        self.probe(key).ok()
    }

    /// The entry [`WordMap::find`] found.
    #[inline]
    pub(super) fn at_mut(&mut self, at: usize) -> &mut Latest {
        if at == usize::MAX {
            return self.max_key.as_mut().expect("found");
        }
        &mut self.slots[at].val
    }

    /// Insert `key`, which is absent.
    pub(super) fn insert(&mut self, key: u64, val: Latest) -> &mut Latest {
        if key == EMPTY {
            return self.max_key.insert(val);
        }
        // At most three quarters full, so probes stay short.
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let i = match self.probe(key) {
            Ok(_) => unreachable!("WordMap::insert of a present key"),
            Err(i) => i,
        };
        self.slots[i] = Slot { key, val };
        self.len += 1;
        &mut self.slots[i].val
    }

    fn grow(&mut self) {
        let mut bigger = WordMap::with_capacity_pow2(self.slots.len() * 2);
        for s in self.slots.iter().filter(|s| s.key != EMPTY) {
            let i = match bigger.probe(s.key) {
                Ok(_) => unreachable!("a key twice in a WordMap"),
                Err(i) => i,
            };
            bigger.slots[i] = *s;
        }
        self.slots = bigger.slots;
        self.mask = bigger.mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn latest(n: u64) -> Latest {
        Latest { n, ..Latest::NONE }
    }

    /// Against a `HashMap`: inserts (growing the table many times), hits
    /// and misses, keys with long common prefixes, 0 and `u64::MAX`.
    #[test]
    fn behaves_as_a_hash_map() {
        let mut m = WordMap::default();
        let mut want: HashMap<u64, u64> = HashMap::new();
        let keys = (0u64..20_000)
            .map(|i| i << 48) // differ only in the top bits
            .chain((0u64..20_000).map(|i| 0x0102_0304_0000_0000 | i))
            .chain([0, u64::MAX, u64::MAX - 1]);
        for (n, k) in keys.enumerate() {
            let n = n as u64;
            if want.contains_key(&k) {
                continue;
            }
            assert!(m.get_mut(k).is_none(), "{k:#x} present before its insert");
            m.prefetch(k);
            m.insert(k, latest(n)).w = n;
            want.insert(k, n);
        }
        assert_eq!(m.len(), want.len());
        for (&k, &n) in &want {
            let l = m.get_mut(k).expect("inserted");
            assert_eq!((l.n, l.w), (n, n), "{k:#x}");
            l.w += 1;
        }
        for (&k, &n) in &want {
            assert_eq!(m.get_mut(k).unwrap().w, n + 1, "{k:#x}");
        }
        assert!(m.get_mut(12345).is_none());
    }
}
