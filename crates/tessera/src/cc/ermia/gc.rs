//! Garbage collection between transactions: the watermark, and unlinking
//! committed tombstones below it.

use super::*;

/// Between transactions: refresh the GC watermark now and then, and unlink
/// committed tombstones at or below it.
pub(crate) fn maintain(
    db: &Engine,
    core: &mut WorkerCore,
    sh: &ErmiaShared,
    st: &mut ErmiaLocal,
    g: &Guard<'_>,
) {
    st.mv.since_watermark += 1;
    let due = st.mv.since_watermark >= WATERMARK_EVERY
        || st
            .pending_unlinks
            .front()
            .is_some_and(|p| p.tid > st.mv.watermark && st.mv.since_watermark >= 4);
    if due {
        st.mv.since_watermark = 0;
        if let Some(w) = sh.xids.watermark(&sh.clock) {
            st.mv.watermark = st.mv.watermark.max(w);
        }
    }
    let wm = st.mv.watermark;
    if st.mv.gc.front().is_some_and(|e| e.stamp <= wm) {
        let inline_free = &mut st.mv.inline_free;
        drain_due(&mut st.mv.gc, |e| e.stamp <= wm, |q, n, e| {
            prefetch_ahead(q, n);
            // SAFETY: held by this entry, so not freed; we are pinned.
            let r = unsafe { &*e.rec };
            // Lock-free (see `prune_mv`): no record lock around it.
            let cut = r.prune_mv(r.newest(), wm, g);
            if cut.first_inline {
                // Reusable once no pinned reader can hold it: two memory
                // epochs. This entry's hold on the record passes to the
                // revisit.
                inline_free.push_back(GcEntry {
                    rec: e.rec,
                    stamp: g.epoch(),
                });
            } else if r.gc_release() {
                // SAFETY: unlinked from its index, and this was the last hold.
                unsafe { g.retire(e.rec as *mut u8, Record::free) };
            }
        });
    }
    // Inline versions cut two memory epochs ago are free for reuse (the
    // shared bound is read only when something waits).
    if !st.mv.inline_free.is_empty() {
        let bound = db.epochs.reclaim_bound();
        drain_due(&mut st.mv.inline_free, |e| e.stamp + 2 <= bound, |q, n, e| {
            // The record was cut two memory epochs ago and is cold by
            // now: fetch the head of the one this far ahead (the entries
            // come due in runs, when the bound moves).
            if let Some(a) = q.get(n + GC_AHEAD) {
                crate::storage::prefetch_write(a.rec as *const u8);
            }
            // SAFETY: held by this entry, so not freed; we are pinned.
            let r = unsafe { &*e.rec };
            // Cut at memory epoch `stamp` by a pinned worker; every worker
            // pinned now pinned after that (the garbage rule of `epoch.rs`).
            if r.mark_inline_free_and_release() {
                // SAFETY: unlinked from its index, and this was the last hold.
                unsafe { g.retire(e.rec as *mut u8, Record::free) };
            }
        });
    }
    // Adopt a dropped worker's entries (the flag is set under the lock, and
    // a stale read only defers the adoption to a later transaction).
    if st.mv.gc.is_empty() && sh.orphan_gc_pending.load(Ordering::Relaxed) {
        if let Some(mut o) = sh.orphan_gc.try_lock() {
            st.mv.gc.extend(o.drain(..));
            sh.orphan_gc_pending.store(false, Ordering::Relaxed);
        }
    }
    crate::cc::drain_unlinks(
        db,
        core,
        &sh.orphans,
        &mut st.pending_unlinks,
        wm,
        |t, p| {
            unlink_tombstone(t, g, &p.key, p.rec as *const MvRecord, p.tid);
            true
        },
    );
}

/// Call `f(entries, i, entry)` for each entry `i` of `q` that is `due`, from the
/// front up to the first that is not, then drain them at once. The queue
/// is walked as one straight slice (`make_contiguous` moves entries only
/// after the ring wrapped): per-entry pops and wrapped look-ups ahead were
/// a fifth of GC's instructions.
#[inline(always)]
fn drain_due(
    q: &mut VecDeque<GcEntry>,
    due: impl Fn(&GcEntry) -> bool,
    mut f: impl FnMut(&[GcEntry], usize, &GcEntry),
) {
    let s = q.make_contiguous();
    let mut n = s.len();
    for (i, e) in s.iter().enumerate() {
        if !due(e) {
            n = i;
            break;
        }
        f(s, i, e);
    }
    q.drain(..n);
}

/// How far ahead of the entry it prunes the GC looks: it fetches the record
/// head of the entry this far ahead, the newest version of the entry half
/// as far ahead, and the version below it (the one a prune cuts) of the
/// entry a quarter as far ahead. A prune touches three dependent lines
/// (head, newest version, cut version), written some transactions ago and
/// cold by now; and the watermark advances every [`WATERMARK_EVERY`]
/// transactions, so entries come due in runs long enough for the pipeline
/// to fill. The queue of inline versions waiting to be marked free fetches
/// its record heads this far ahead too (they come due in runs when the
/// memory epoch moves). 16 rather than 4: with 4, GC was 568 ns of an ssn
/// TPC-C transaction at 2 threads, its samples on the cut version's and the
/// record's lines; with 16 (and the lines fetched for writing), 425 ns.
const GC_AHEAD: usize = 16;

/// The prefetches of [`GC_AHEAD`] for the entries after entry `at` of `q`.
/// Each line is fetched for writing: the prune swaps the newest version's
/// and the cut version's links, and the release of the entry's hold
/// subtracts from the record's head word.
#[inline]
fn prefetch_ahead(q: &[GcEntry], at: usize) {
    if let Some(e) = q.get(at + GC_AHEAD) {
        crate::storage::prefetch_write(e.rec as *const u8);
    }
    if let Some(e) = q.get(at + GC_AHEAD / 2) {
        // SAFETY: a queued entry holds its record (`gc_hold`), and the
        // caller is pinned, so the record and its newest version are live.
        let newest = unsafe { &*e.rec }.newest();
        crate::storage::prefetch_write(newest as *const u8);
    }
    if let Some(e) = q.get(at + GC_AHEAD / 4) {
        // SAFETY: as above; the version below the newest is reachable from
        // the record, so it is live while we are pinned. A prefetch of it
        // dereferences nothing.
        let newest = unsafe { &*e.rec }.newest();
        // SAFETY: as above: reachable from a held record while we are pinned.
        let cut = unsafe { &*newest }.prev();
        crate::storage::prefetch_write(cut as *const u8);
    }
}

/// Unlink a record whose head is still the committed tombstone with stamp
/// `stamp` (at or below the watermark: every snapshot sees the key absent),
/// and retire it with its chain.
pub(super) fn unlink_tombstone(
    t: &Table,
    g: &Guard<'_>,
    key: &[u8],
    rec: *const MvRecord,
    stamp: u64,
) {
    // The record may have been unlinked and freed since it was queued (a
    // record can be queued more than once): only touch it if the index
    // still maps the key to it. (Its address may have been reused by a new
    // record for the same key; the stamp check below then fails, or the new
    // record is a rolled-back insert whose ⊥ is due for unlinking anyway.)
    match t.index.get(key, g) {
        Lookup::Found(v) if v == rec as u64 => {}
        _ => return,
    }
    // SAFETY: reachable from the index, and we are pinned.
    let r = unsafe { &*rec };
    let cur = r.mv_lock();
    if cur & LATEST == 0 {
        r.mv_unlock();
        return;
    }
    // SAFETY: pinned.
    let h = unsafe { &*r.newest() };
    if h.is_tombstone() && h.stamp() == stamp && t.index.remove(key, rec as u64, g) {
        // Writers over a tombstone check LATEST under the lock, so nobody
        // installs into it any more.
        if r.mv_mark_unlinked() {
            // SAFETY: unlinked from the index and no GC entry holds it.
            unsafe { g.retire(rec as *mut u8, Record::free) };
        }
    } else {
        r.mv_unlock();
    }
}
