//! TPC-C random-number rules (clauses 2.1.6 and 4.3.2): uniform integers,
//! NURand with its run-time constants, customer last names, a-strings and
//! n-strings, zip codes and the "ORIGINAL" data fields.

use rand::Rng;

/// The syllables of customer last names (clause 4.3.2.3), indexed by digit.
pub const SYLLABLES: [&[u8]; 10] = [
    b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING",
];

/// Longest last name: three five-letter syllables.
pub const MAX_LAST_NAME: usize = 15;

/// A for NURand of C_LAST.
pub const A_C_LAST: u32 = 255;
/// A for NURand of C_ID.
pub const A_C_ID: u32 = 1023;
/// A for NURand of OL_I_ID.
pub const A_OL_I_ID: u32 = 8191;

/// `random(x, y)` of the spec: uniform in `x..=y` (`x <= y`).
///
/// Lemire's multiply-and-reject ("Fast random integer generation in an
/// interval", 2019): the high half of a 32x32-bit product, rejecting the few
/// low halves that would bias it. The division that finds the rejection
/// threshold runs only when the low half falls below the range (with
/// probability range / 2^32), where `rand`'s `gen_range` divides on every
/// call; a transaction draws about 17 numbers.
#[inline]
pub fn uniform<R: Rng>(rng: &mut R, x: u32, y: u32) -> u32 {
    debug_assert!(x <= y);
    let range = (y - x).wrapping_add(1);
    if range == 0 {
        return rng.next_u32();
    }
    let mut m = rng.next_u32() as u64 * range as u64;
    if (m as u32) < range {
        let threshold = range.wrapping_neg() % range;
        while (m as u32) < threshold {
            m = rng.next_u32() as u64 * range as u64;
        }
    }
    x + (m >> 32) as u32
}

/// `NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x`
/// (clause 2.1.6).
#[inline]
pub fn nurand<R: Rng>(rng: &mut R, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((uniform(rng, 0, a) | uniform(rng, x, y)) + c) % (y - x + 1)) + x
}

/// The NURand constants C of one phase (load or run): one per field, shared
/// by every terminal (clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRandC {
    /// C for C_LAST, in `0..=255`.
    pub c_last: u32,
    /// C for C_ID, in `0..=1023`.
    pub c_id: u32,
    /// C for OL_I_ID, in `0..=8191`.
    pub ol_i_id: u32,
}

impl NuRandC {
    /// Constants for the load.
    pub fn for_load<R: Rng>(rng: &mut R) -> NuRandC {
        NuRandC {
            c_last: uniform(rng, 0, A_C_LAST),
            c_id: uniform(rng, 0, A_C_ID),
            ol_i_id: uniform(rng, 0, A_OL_I_ID),
        }
    }

    /// Constants for the run, given the load's: C_LAST's must differ from the
    /// load's by a delta the spec allows ([`c_last_delta_ok`]); C_ID's and
    /// OL_I_ID's may be anything (they are not used by the load).
    pub fn for_run<R: Rng>(load: &NuRandC, rng: &mut R) -> NuRandC {
        let c_last = loop {
            let c = uniform(rng, 0, A_C_LAST);
            if c_last_delta_ok(load.c_last, c) {
                break c;
            }
        };
        NuRandC {
            c_last,
            c_id: uniform(rng, 0, A_C_ID),
            ol_i_id: uniform(rng, 0, A_OL_I_ID),
        }
    }
}

/// Clause 2.1.6.1: with `delta = |C_run - C_load|` for C_LAST, `delta` must
/// be in `65..=119` and neither 96 nor 112 (so that the run's last names do
/// not follow the load's distribution exactly).
pub fn c_last_delta_ok(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// Write the last name for `num` in `0..=999` (three syllables, one per
/// decimal digit) into `out`; returns its length.
pub fn last_name(num: u32, out: &mut [u8; 16]) -> usize {
    debug_assert!(num <= 999);
    let mut len = 0;
    for digit in [num / 100, (num / 10) % 10, num % 10] {
        let s = SYLLABLES[digit as usize];
        out[len..len + s.len()].copy_from_slice(s);
        len += s.len();
    }
    out[len..].fill(0);
    len
}

/// The last name for `num` as a `String` (tests and tools).
pub fn last_name_string(num: u32) -> String {
    let mut b = [0u8; 16];
    let n = last_name(num, &mut b);
    String::from_utf8_lossy(&b[..n]).into_owned()
}

const ALNUM: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Clause 4.3.2.2 "random a-string [x .. y]": a random length in `x..=y`,
/// then random alphanumeric characters, appended to `out`. (The spec asks
/// for a character set of at least 128 characters; we keep to 62 printable
/// ones so that every field is valid UTF-8 and readable. Nothing in the
/// transactions depends on the characters.)
pub fn a_string<R: Rng>(rng: &mut R, x: usize, y: usize, out: &mut Vec<u8>) {
    let len = rng.gen_range(x..=y);
    out.extend((0..len).map(|_| ALNUM[rng.gen_range(0..ALNUM.len())]));
}

/// Clause 4.3.2.2 "random n-string [x .. y]": random decimal digits.
pub fn n_string<R: Rng>(rng: &mut R, x: usize, y: usize, out: &mut Vec<u8>) {
    let len = rng.gen_range(x..=y);
    out.extend((0..len).map(|_| b'0' + rng.gen_range(0..10u8)));
}

/// Clause 4.3.2.7: a zip code is a random n-string of 4 digits followed by
/// "11111".
pub fn zip<R: Rng>(rng: &mut R, out: &mut Vec<u8>) {
    n_string(rng, 4, 4, out);
    out.extend_from_slice(b"11111");
}

/// Clause 4.3.3.1 (I_DATA, S_DATA): a random a-string `[x .. y]`; for 10% of
/// the rows "ORIGINAL" replaces eight characters at a random position.
pub fn data_field<R: Rng>(rng: &mut R, x: usize, y: usize, out: &mut Vec<u8>) {
    let start = out.len();
    a_string(rng, x, y, out);
    if rng.gen_range(0..10) == 0 {
        let len = out.len() - start;
        let at = start + rng.gen_range(0..=len - 8);
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
}

/// Whether `data` contains "ORIGINAL" (the brand-generic test of NewOrder).
///
/// Eight start positions at a time (SWAR on two words): the bytes of the
/// word at `i` that are 'O' and the bytes of the word at `i + 7` that are
/// 'L' mark, where both are set, the positions that may start the word;
/// each such position is then compared as one 8-byte word. Random data
/// nearly never has both, so the loop's one branch is nearly never taken.
/// (Before: a load and a compare per position, about 180 instructions
/// over a 50-byte I_DATA, ten times a NewOrder. `memchr` for the 'O's
/// spent fewer instructions but ran slower: its exits at random 'O's
/// mispredict, docs/BENCHMARKS.md.)
#[inline]
pub fn has_original(data: &[u8]) -> bool {
    const WORD: u64 = u64::from_le_bytes(*b"ORIGINAL");
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let n = data.len();
    if n < 8 {
        return false;
    }
    let word = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().expect("8 bytes"));
    // The high bit of every byte of `w` equal to `b`. A borrow can also
    // mark a byte right above a match (a false candidate, which the word
    // compare rejects); a byte equal to `b` is never missed.
    let bytes_eq = |w: u64, b: u8| {
        let x = w ^ (ONES * u64::from(b));
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    let mut i = 0;
    while i + 15 <= n {
        let mut m = bytes_eq(word(i), b'O') & bytes_eq(word(i + 7), b'L');
        while m != 0 {
            if word(i + m.trailing_zeros() as usize / 8) == WORD {
                return true;
            }
            m &= m - 1;
        }
        i += 8;
    }
    // The last few start positions, one by one.
    (i..=n - 8).any(|j| word(j) == WORD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// The word-compare search finds "ORIGINAL" at every position, and
    /// nothing in near misses or data shorter than 8 bytes.
    #[test]
    fn has_original_finds_the_word_anywhere() {
        for at in 0..=42 {
            let mut d = vec![b'x'; 50];
            d[at..at + 8].copy_from_slice(b"ORIGINAL");
            assert!(has_original(&d), "at {at}");
            d[at + 7] = b'l';
            assert!(!has_original(&d), "near miss at {at}");
        }
        assert!(has_original(b"ORIGINAL"));
        assert!(!has_original(b"ORIGINA"));
        assert!(!has_original(b""));
        assert!(!has_original(b"ORIGINOriginal"));
    }

    /// The search agrees with a plain scan of every window on random data
    /// of every length up to 64 over a small alphabet (so that 'O's and
    /// 'L's, near misses and false candidates are frequent), with the word
    /// planted at random positions in half of the cases.
    #[test]
    fn has_original_agrees_with_a_plain_scan() {
        let mut rng = SmallRng::seed_from_u64(11);
        let alphabet = b"ORIGNAL";
        let mut found = 0;
        for round in 0..20_000 {
            let n = round % 65;
            let mut d: Vec<u8> = (0..n)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            if n >= 8 && rng.gen_bool(0.5) {
                let at = rng.gen_range(0..=n - 8);
                d[at..at + 8].copy_from_slice(b"ORIGINAL");
            }
            let want = d.windows(8).any(|w| w == b"ORIGINAL");
            found += want as u32;
            assert_eq!(has_original(&d), want, "{:?}", String::from_utf8_lossy(&d));
        }
        assert!(found > 5_000, "planted words found: {found}");
    }

    /// `uniform` hits both ends, never leaves the range, covers the whole
    /// u32 range without overflow, and is flat: over a range of 7 (which
    /// does not divide 2^32, so a plain multiply would be biased), each
    /// value's count is within 4% of the mean.
    #[test]
    fn uniform_is_bounded_and_flat() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut hits = [0u32; 7];
        for _ in 0..700_000 {
            let v = uniform(&mut rng, 10, 16);
            assert!((10..=16).contains(&v), "{v}");
            hits[(v - 10) as usize] += 1;
        }
        for h in hits {
            assert!(h.abs_diff(100_000) < 4_000, "{hits:?}");
        }
        assert_eq!(uniform(&mut rng, 5, 5), 5);
        let mut seen = (false, false);
        for _ in 0..10_000 {
            let v = uniform(&mut rng, 0, 1);
            seen = (seen.0 || v == 0, seen.1 || v == 1);
        }
        assert!(seen.0 && seen.1);
        // The full range (its size, 2^32, does not fit in a u32).
        let mut high = false;
        for _ in 0..100 {
            high |= uniform(&mut rng, 0, u32::MAX) > u32::MAX / 2;
        }
        assert!(high);
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (a, x, y) in [(255, 0, 999), (1023, 1, 3000), (8191, 1, 100_000)] {
            let c = uniform(&mut rng, 0, a);
            let mut hits = vec![0u32; (y + 1) as usize];
            let n = 200_000;
            for _ in 0..n {
                let v = nurand(&mut rng, a, c, x, y);
                assert!((x..=y).contains(&v), "NURand({a}, {x}, {y}) gave {v}");
                hits[v as usize] += 1;
            }
            // Non-uniform: the most popular value is drawn far more often
            // than the uniform expectation.
            let max = *hits.iter().max().unwrap() as f64;
            let uniform_expect = n as f64 / (y - x + 1) as f64;
            assert!(max > 3.0 * uniform_expect, "A={a}: max {max}");
        }
    }

    #[test]
    fn run_constants_obey_the_delta_rule() {
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..1000 {
            let load = NuRandC::for_load(&mut rng);
            let run = NuRandC::for_run(&load, &mut rng);
            let d = load.c_last.abs_diff(run.c_last);
            assert!((65..=119).contains(&d) && d != 96 && d != 112, "delta {d}");
            assert!(run.c_last <= 255 && run.c_id <= 1023 && run.ol_i_id <= 8191);
        }
        assert!(c_last_delta_ok(0, 65) && c_last_delta_ok(200, 81));
        assert!(!c_last_delta_ok(0, 64) && !c_last_delta_ok(0, 120));
        assert!(!c_last_delta_ok(10, 106) && !c_last_delta_ok(150, 38));
    }

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name_string(0), "BARBARBAR");
        assert_eq!(last_name_string(371), "PRICALLYOUGHT");
        assert_eq!(last_name_string(999), "EINGEINGEING");
        assert_eq!(last_name_string(40), "BARPRESBAR");
        let longest = (0..1000).map(|n| last_name_string(n).len()).max().unwrap();
        assert_eq!(longest, MAX_LAST_NAME);
        // Every number gives a distinct name.
        let names: std::collections::HashSet<String> = (0..1000).map(last_name_string).collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn strings_have_the_requested_lengths_and_alphabets() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut originals = 0;
        for _ in 0..10_000 {
            let mut v = Vec::new();
            a_string(&mut rng, 8, 16, &mut v);
            assert!((8..=16).contains(&v.len()) && v.iter().all(u8::is_ascii_alphanumeric));
            v.clear();
            n_string(&mut rng, 16, 16, &mut v);
            assert!(v.len() == 16 && v.iter().all(u8::is_ascii_digit));
            v.clear();
            zip(&mut rng, &mut v);
            assert_eq!(v.len(), 9);
            assert!(v[..4].iter().all(u8::is_ascii_digit) && &v[4..] == b"11111");
            v.clear();
            data_field(&mut rng, 26, 50, &mut v);
            assert!((26..=50).contains(&v.len()));
            originals += has_original(&v) as u32;
        }
        // 10% carry "ORIGINAL" (a random a-string practically never does).
        assert!((800..1200).contains(&originals), "{originals}");
    }
}
