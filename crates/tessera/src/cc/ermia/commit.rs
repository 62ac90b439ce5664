//! Pre-commit, post-commit (stamps, the redo entry) and rollback.

use super::*;

/// Pre-commit and post-commit. On failure the transaction is rolled back.
pub(crate) fn commit<M: Mode>(tx: &mut ETx<'_, M>) -> TxResult<()> {
    let db = tx.db;
    let sh = tx.sh;
    let is_ssn = ssn(tx);
    let xid = tx.st.mv.xid;
    if tx.st.mvw.is_empty() {
        // Durable mode: every version this read-only transaction saw was
        // committed, its creator's epoch read done, before now.
        if db.log.is_some() {
            tx.core.log.ack = db.epochs.global();
        }
    } else if let Some(log) = &db.log {
        log.announce(tx.core.slot, &mut tx.core.log);
    }
    if tx.st.mvw.is_empty() && !is_ssn {
        // A read-only SI transaction takes no commit stamp (nor does an
        // MVRCC one: its timestamp is its place in the order).
        sh.xids.finish(xid, XidState::Committed);
        if M::MVTO {
            // Ranges it registered in but wrote nothing to (an update that
            // answered "missing").
            mvrcc::deregister(&mut tx.st.mvr);
        }
        sh.xids.release(tx.st.mv.slot);
        return Ok(());
    }
    // Pre-commit: the commit stamp (ERMIA's commit-LSN fetch-and-add).
    // Read-only SSN transactions take one too: an overwriter that commits
    // later must be able to order itself after this reader (ERMIA's code
    // likewise takes `log->pre_commit()` before `parallel_ssn_commit` for
    // every SSN transaction; the issue's "read-only transactions take no
    // commit stamp" holds for si).
    sh.xids.precommit(xid);
    // MVRCC: the commit stamp is the timestamp taken at begin; commit
    // validates nothing.
    let c = if M::MVTO {
        tx.st.mv.begin
    } else {
        sh.clock.fetch_add(1, Ordering::SeqCst) + 1
    };
    // The log's epoch for this commit: read after the stamp and before the
    // transaction shows itself committed, so anyone who reads or overwrites
    // its versions reads a later (or the same) epoch.
    let epoch = db.epochs.global();
    sh.xids.set_end(xid, c);
    let pi = if is_ssn {
        match ssn_precommit(tx, c) {
            Ok(pi) => pi,
            Err(e) => {
                abort(tx);
                return Err(e);
            }
        }
    } else {
        SSTAMP_INF
    };
    if is_ssn {
        sh.xids.publish_sstamp(xid, pi);
    }
    sh.xids.finish(xid, XidState::Committed);

    // Post-commit: stamps replace the transaction id.
    let st = &mut *tx.st;
    for w in &st.mvw {
        // SAFETY: pinned; our versions.
        let nv = unsafe { &*w.newv };
        if is_ssn {
            // SAFETY: pinned; our version, and the one it overwrote (its
            // record's head is ours until post-commit ends).
            let m = unsafe { ssn_meta(w.newv) }.expect("meta");
            m.pstamp.store(c, Ordering::Relaxed);
            // SAFETY: as above.
            let om = unsafe { ssn_meta(w.oldv) }.expect("meta");
            // Release: a reader that finds our id stale re-reads π after
            // seeing our slot's next id (an acquire load), so it sees this.
            om.sstamp.store(pi, Ordering::Release);
        }
        nv.set_stamp(c);
        // Version GC has work unless we overwrote ⊥ (an insert): ⊥ is
        // always a chain's oldest version and lives inline, so there is
        // nothing behind it to free; skip the entry and the later revisit of
        // the record. (Over the inline first version there is work: cutting
        // it lets a later writer reuse it, and behind a reused one lie
        // out-of-line versions.)
        // SAFETY: pinned; the version we overwrote.
        let ov = unsafe { &*w.oldv };
        if !ov.is_inline() || ov.is_first_inline() {
            // SAFETY: pinned; we wrote it.
            unsafe { &*w.rec }.gc_hold();
            st.mv.gc.push_back(GcEntry {
                rec: w.rec,
                stamp: c,
            });
        }
        if nv.is_tombstone() {
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key: st.sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize].into(),
                rec: w.rec as *const Record,
                tid: c,
            });
        }
    }
    if is_ssn {
        let mybit = 1u64 << (st.mv.slot % 64);
        for &v in &st.vreads {
            if v.addr() & OWN_OVERWRITE != 0 {
                // We overwrote this version: only its overwriter (us, done
                // above) ever consults its η or readers bitmap, so neither
                // needs updating, and our bit may stay set (it is masked
                // out by the overwriter, and nobody else can overwrite it).
                continue;
            }
            // SAFETY: pinned.
            let m = unsafe { ssn_meta(v) }.expect("meta");
            // Raise η(V) unless a later reader already did (ERMIA's
            // `set_tuple_xstamp` CASes only while below): no locked write
            // then. Either way η(V) >= c before our bit goes.
            if m.pstamp.load(Ordering::SeqCst) < c {
                m.pstamp.fetch_max(c, Ordering::SeqCst);
            }
            if !st.mv.shared_bits {
                m.readers.fetch_and(!mybit, Ordering::SeqCst);
            }
        }
    }
    // The redo entry. ERMIA copies a transaction's log records into one
    // central buffer at the offset its commit LSN reserved (section 3.3);
    // here the commit stamp orders the entry but the bytes go to this
    // worker's own buffer, as under Silo, so the log adds no second shared
    // hot spot beside the clock (docs/ARCHITECTURE.md, Durability).
    if let Some(log) = &db.log {
        if !st.mvw.is_empty() {
            let (mvw, wbuf, scratch) = (&st.mvw, &st.sets.wbuf, &mut st.sets.rbuf);
            let mut old = std::mem::take(&mut tx.core.log.scratch);
            log.append(tx.core.slot, &mut tx.core.log, epoch, c, |redo| {
                for w in mvw {
                    let key = &wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
                    // SAFETY: pinned; our version, committed just now, and
                    // the committed version it overwrote (immutable).
                    let (nv, ov) = unsafe { (&*w.newv, &*w.oldv) };
                    if nv.is_tombstone() {
                        redo.delete(w.table, key);
                        continue;
                    }
                    scratch.clear();
                    // SAFETY: as above.
                    unsafe { Version::read_into(w.newv, scratch) };
                    if ov.is_tombstone() {
                        redo.put(w.table, key, scratch);
                    } else {
                        old.clear();
                        // SAFETY: as above.
                        unsafe { Version::read_into(w.oldv, &mut old) };
                        redo.patch(w.table, key, &old, scratch);
                    }
                }
            });
            tx.core.log.scratch = old;
        }
    }
    if M::MVTO {
        // After post-commit: a reader that no longer finds us registered
        // finds our versions stamped.
        mvrcc::deregister(&mut st.mvr);
    }
    sh.xids.release(st.mv.slot);
    Ok(())
}

/// Roll back: restore each record's head, retire our versions, forget our
/// marks and reader bits. Records we created (now back to ⊥) and tombstones
/// we had covered go back to the unlink queue.
pub(crate) fn abort<M: Mode>(tx: &mut ETx<'_, M>) {
    let sh = tx.sh;
    let is_ssn = ssn(tx);
    let g = tx.g;
    let st = &mut *tx.st;
    sh.xids.finish(st.mv.xid, XidState::Aborted);
    let my = my_flagged(st);
    for w in st.mvw.iter().rev() {
        // SAFETY: pinned; our write set.
        let rec = unsafe { &*w.rec };
        if is_ssn {
            // SAFETY: pinned; the version we overwrote is still in the
            // chain (we restore the head below).
            let om = unsafe { ssn_meta(w.oldv) }.expect("meta");
            let _ = om
                .sstamp
                .compare_exchange(my, SSTAMP_INF, Ordering::SeqCst, Ordering::Relaxed);
        }
        rec.set_head(w.oldv);
        // SAFETY: pinned.
        if !unsafe { &*w.newv }.is_inline() {
            // SAFETY: unlinked just now; readers still holding it are pinned.
            unsafe { g.retire(w.newv as *mut u8, free_mv_version) };
        }
        // SAFETY: pinned.
        let old = unsafe { &*w.oldv };
        if old.is_tombstone() {
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key: st.sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize].into(),
                rec: w.rec as *const Record,
                tid: old.stamp(),
            });
        }
    }
    if is_ssn {
        let mybit = 1u64 << (st.mv.slot % 64);
        for &v in &st.vreads {
            // Aborting after pre-commit tagged some: our mark on them is gone
            // now, so others may overwrite them and must not see our bit.
            let v = v.map_addr(|a| a & !OWN_OVERWRITE);
            // SAFETY: pinned.
            let m = unsafe { ssn_meta(v) }.expect("meta");
            if !st.mv.shared_bits {
                m.readers.fetch_and(!mybit, Ordering::SeqCst);
            }
        }
    }
    if M::MVTO {
        // After the rollback: our versions are unlinked.
        mvrcc::deregister(&mut st.mvr);
    }
    sh.xids.release(st.mv.slot);
}
