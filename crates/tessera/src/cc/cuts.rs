//! A table's key space cut into logical ranges: the sorted start keys of
//! the ranges (the first one empty, so every key has a range) and the
//! search from a key to its range. ROCC's range map (`rocc::ranges`) and
//! MVRCC's partition (`ermia::mvrcc`) both cut tables this way and look a
//! range up on every registration and scan; they share this type.

use std::ops::Bound;

/// Prefix words per block of [`Cuts::find`]'s second level: 16 words, two
/// cache lines.
const BLOCK: usize = 16;

/// Sorted range starts, `starts[0]` empty: range `i` holds the keys in
/// `starts[i]..starts[i + 1]` (the last one everything from its start).
pub(crate) struct Cuts {
    starts: Vec<Box<[u8]>>,
    /// The first 8 bytes of each start, big-endian and zero-padded (the
    /// search compares these words and reads a start only on a tie: one
    /// cache line per step instead of three dependent misses).
    prefix: Vec<u64>,
    /// Every [`BLOCK`]th prefix word: the search's first level, small
    /// enough to stay in cache (1,640 ranges: 103 words).
    top: Vec<u64>,
}

/// The first 8 bytes of `k` as a big-endian word (zero-padded).
#[inline]
fn prefix_word(k: &[u8]) -> u64 {
    if let Some(w) = k.first_chunk::<8>() {
        // The common case, without the padding copy (a call to memcpy).
        return u64::from_be_bytes(*w);
    }
    let mut b = [0u8; 8];
    b[..k.len()].copy_from_slice(k);
    u64::from_be_bytes(b)
}

impl Cuts {
    /// Cuts at `starts`: sorted, strictly increasing, the first empty.
    pub(crate) fn new(starts: Vec<Box<[u8]>>) -> Cuts {
        debug_assert!(starts.first().is_some_and(|s| s.is_empty()));
        debug_assert!(starts.windows(2).all(|w| w[0] < w[1]));
        let prefix: Vec<u64> = starts.iter().map(|s| prefix_word(s)).collect();
        let top = prefix.iter().step_by(BLOCK).copied().collect();
        Cuts {
            starts,
            prefix,
            top,
        }
    }

    /// The index of the last word of `p` that is <= `kp` (`p[0]` is, the
    /// first range's start being empty): a branch-free binary search (as a
    /// plain `if`, the compiler made its select a branch, mispredicted at
    /// half the steps, and ROCC's commit spent 9.5% of its samples here).
    #[inline(always)]
    fn last_le(p: &[u64], kp: u64) -> usize {
        let (mut base, mut n) = (0usize, p.len());
        while n > 1 {
            let half = n / 2;
            let mid = base + half;
            base = std::hint::select_unpredictable(p[mid] <= kp, mid, base);
            n -= half;
        }
        base
    }

    /// The range holding `key`: the last whose start is <= `key`. Two
    /// levels of branch-free search on the prefix words: the block through
    /// `top` (which stays in cache), then the word within the block's two
    /// cache lines. (One binary search over all the words missed the cache
    /// at most of its dozen dependent steps once the data crowded the
    /// words out.) Then a walk back over the ranges whose start shares the
    /// key's prefix word and lies above it: the prefix order agrees with
    /// the key order wherever prefixes differ.
    #[inline]
    pub(crate) fn find(&self, key: &[u8]) -> usize {
        let kp = prefix_word(key);
        let b = Self::last_le(&self.top, kp) * BLOCK;
        let block = &self.prefix[b..(b + BLOCK).min(self.prefix.len())];
        let mut base = b + Self::last_le(block, kp);
        while base > 0 && self.prefix[base] == kp && &self.starts[base][..] > key {
            base -= 1;
        }
        base
    }

    /// Number of ranges.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The first key of range `i`.
    #[inline]
    pub(crate) fn start(&self, i: usize) -> &[u8] {
        &self.starts[i]
    }

    /// The first key past range `i`, if any.
    #[inline]
    pub(crate) fn end(&self, i: usize) -> Option<&[u8]> {
        self.starts.get(i + 1).map(|s| &s[..])
    }

    /// The first range a scan from `lo` touches.
    pub(crate) fn first_for(&self, lo: Bound<&[u8]>) -> usize {
        match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self.find(k),
        }
    }

    /// The last range a scan up to `hi` touches.
    pub(crate) fn last_for(&self, hi: Bound<&[u8]>) -> usize {
        match hi {
            Bound::Unbounded => self.len() - 1,
            Bound::Included(k) => self.find(k),
            Bound::Excluded(k) => {
                let i = self.find(k);
                // `[start, k)` with k == start holds nothing of range i.
                if i > 0 && self.start(i) == k {
                    i - 1
                } else {
                    i
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn cuts(starts: &[&[u8]]) -> Cuts {
        Cuts::new(starts.iter().map(|s| Box::from(*s)).collect())
    }

    #[test]
    fn ranges_cover_their_bounds() {
        let c = cuts(&[b"", b"d", b"m"]);
        assert_eq!(c.len(), 3);
        assert_eq!(c.find(b""), 0);
        assert_eq!(c.find(b"c"), 0);
        assert_eq!(c.find(b"d"), 1);
        assert_eq!(c.find(b"z"), 2);
        assert_eq!(c.first_for(Bound::Unbounded), 0);
        assert_eq!(c.first_for(Bound::Excluded(b"d")), 1);
        assert_eq!(c.last_for(Bound::Excluded(b"d")), 0);
        assert_eq!(c.last_for(Bound::Included(b"d")), 1);
        assert_eq!(c.last_for(Bound::Excluded(b"e")), 1);
        assert_eq!(c.last_for(Bound::Unbounded), 2);
        assert_eq!(c.start(1), b"d");
        assert_eq!(c.end(1), Some(&b"m"[..]));
        assert_eq!(c.end(2), None);
    }

    /// Starts sharing 8-byte prefixes, of different lengths, with zero
    /// bytes (where padding and a real zero meet).
    #[test]
    fn find_agrees_with_a_linear_search_where_padding_meets_zeros() {
        let mut starts: Vec<Vec<u8>> = vec![vec![]];
        for s in [
            &b"\0"[..],
            b"\0\0\0\0\0\0\0\0\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghij",
            b"abcdefgz",
            b"b",
            b"b\0\0",
            b"zzzzzzzzzzzz",
        ] {
            starts.push(s.to_vec());
        }
        let refs: Vec<&[u8]> = starts.iter().map(|s| &s[..]).collect();
        let c = cuts(&refs);
        let mut probes = starts.clone();
        for s in &starts {
            let mut t = s.clone();
            t.push(0);
            probes.push(t);
            let mut t = s.clone();
            t.push(0xff);
            probes.push(t);
            if let Some(last) = s.len().checked_sub(1) {
                probes.push(s[..last].to_vec());
            }
        }
        probes.push(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec());
        for k in &probes {
            let want = starts.iter().rposition(|s| s <= k).unwrap();
            assert_eq!(c.find(k), want, "{k:?}");
        }
    }

    /// `find` is the last range whose start is <= the key, also among
    /// starts that share their first 8 bytes (the tie walk), keys shorter
    /// than a word, and cuts spanning several blocks of the first level.
    #[test]
    fn find_agrees_with_a_linear_search_on_random_cuts() {
        let mut rng = SmallRng::seed_from_u64(7);
        for round in 0..200 {
            // Up to 300 ranges: several blocks of the two-level search.
            let mut starts: Vec<Vec<u8>> = (0..rng.gen_range(1..300))
                .map(|_| {
                    // Mostly one shared 8-byte prefix, so ties are common.
                    let mut k = if round % 2 == 0 {
                        b"prefix00".to_vec()
                    } else {
                        vec![]
                    };
                    for _ in 0..rng.gen_range(0..4) {
                        k.push(rng.gen_range(0..4));
                    }
                    k
                })
                .collect();
            starts.push(Vec::new());
            starts.sort();
            starts.dedup();
            let c = Cuts::new(
                starts
                    .iter()
                    .map(|s| s.clone().into_boxed_slice())
                    .collect(),
            );
            for _ in 0..200 {
                let mut key = if rng.gen_bool(0.7) {
                    b"prefix00".to_vec()
                } else {
                    vec![]
                };
                for _ in 0..rng.gen_range(0..5) {
                    key.push(rng.gen_range(0..5));
                }
                let want = starts.iter().rposition(|s| s[..] <= key[..]).unwrap();
                assert_eq!(c.find(&key), want, "{starts:?} {key:?}");
            }
        }
    }
}
