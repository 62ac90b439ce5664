//! The operations: reads through [`super::visibility`], first-updater-wins
//! writes (section 3.6.1), inserts of new records, scans with the node set.

use super::*;
use crate::txn::patch_row;

/// Read bytes `cols.0..cols.1` of `rec`'s value for the running
/// transaction: the visible version (with the SSN read hook), only the
/// words holding those bytes copied into `rbuf` (a column read, as Silo's
/// `Record::read_slice`); `Ok(Some(skip))` with the bytes at `rbuf[skip..]`,
/// `Ok(None)` if the key is absent to us.
pub(super) fn read_record<M: Mode>(
    tx: &mut ETx<'_, M>,
    rec: &MvRecord,
    cols: (usize, usize),
) -> TxResult<Option<usize>> {
    read_if_present(tx, rec, false, cols)
}

/// [`read_record`]; with `only_present`, a record whose visible version is
/// a tombstone is left unread (`None`, and nothing recorded for SSN), so
/// that the caller can answer "absent" through the index.
#[inline(always)]
fn read_if_present<M: Mode>(
    tx: &mut ETx<'_, M>,
    rec: &MvRecord,
    only_present: bool,
    cols: (usize, usize),
) -> TxResult<Option<usize>> {
    let st = &mut *tx.st;
    let seen = if M::MVTO {
        mvto_visible(tx.sh, st, rec)?
    } else {
        visible(tx.sh, my_flagged(st), st.mv.begin, rec)
    };
    let Some(seen) = seen else {
        return Ok(None);
    };
    // SAFETY: pinned.
    if only_present && unsafe { &*seen.v }.is_tombstone() {
        return Ok(None);
    }
    if !seen.own && M::SSN {
        on_read(st, seen.v, seen.cstamp)?;
    }
    // SAFETY: pinned.
    if unsafe { &*seen.v }.is_tombstone() {
        return Ok(None);
    }
    st.sets.rbuf.clear();
    // SAFETY: a visible version's data never changes (committed), or it is ours.
    let skip = unsafe { Version::read_slice_into(seen.v, cols.0, cols.1, &mut st.sets.rbuf) };
    Ok(Some(skip))
}

/// MVRCC's read of `rec` at the transaction's timestamp `t`: the visible
/// version (an older active writer's aborts the reader), its read timestamp
/// raised to `t`, and the chain walked again until the same version comes
/// back (see [`MvrccMode`]).
pub(super) fn mvto_visible(
    sh: &ErmiaShared,
    st: &ErmiaLocal,
    rec: &MvRecord,
) -> TxResult<Option<Seen>> {
    let (my, t) = (my_flagged(st), st.mv.begin);
    loop {
        // A writer that slips in must CAS the head: an unchanged head after
        // the raise means none did (a rolled-back one restores the head it
        // found, and a version cannot be freed and reused while we are
        // pinned), so the walk need not be repeated.
        let head = rec.newest();
        let Some(seen) = visible_to(sh, my, t, rec, true)? else {
            return Ok(None);
        };
        if seen.own {
            return Ok(Some(seen));
        }
        raise_rts(seen.v, t);
        if rec.newest() == head {
            return Ok(Some(seen));
        }
    }
}

/// MVRCC: raise the read timestamp of version `v` to `t`, then fence: the
/// caller re-reads the head next, while a writer CASes the head and then
/// loads this read timestamp, so one of them sees the other. `v` is live
/// (the caller is pinned).
#[inline]
fn raise_rts(v: *const Version, t: u64) {
    // SAFETY: per the contract; MVRCC's versions all carry metadata.
    let m = unsafe { ssn_meta(v) }.expect("MVRCC version metadata");
    if m.pstamp.load(Ordering::SeqCst) < t {
        m.pstamp.fetch_max(t, Ordering::SeqCst);
    }
    fence(Ordering::SeqCst);
}

/// MVRCC: protect the range of `key` in `table` before reading the key's
/// absence (see [`mvrcc`]); returns the table's state and the partition to
/// re-check once the answer is known.
fn mvto_protect_key<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<(*const mvrcc::MvTable, *const mvrcc::Partition)> {
    let g = tx.g;
    let mt = mvrcc::table_state(&tx.sh.mvrcc, &mut tx.st.mvr, table, g);
    // SAFETY: the worker's table cache keeps it alive.
    let p = unsafe { &*mt }.current(g);
    mvrcc::protect(p, p.cuts.find(key), tx.st.mv.begin)?;
    Ok((mt, p))
}

/// MVRCC: the answer "absent" stands if the partition protected is still
/// the table's (see [`mvrcc`]).
fn mvto_recheck(prot: (*const mvrcc::MvTable, *const mvrcc::Partition)) -> TxResult<()> {
    // SAFETY: the worker's table cache keeps the table's state alive; the
    // partition is only compared.
    if unsafe { &*prot.0 }.is_current(unsafe { &*prot.1 }) {
        Ok(())
    } else {
        conflict(ConflictReason::RangeSplit)
    }
}

/// `Txn::get` under MVRCC: a record found is read at the timestamp; an
/// absent key (no record, or a tombstone or ⊥ visible) is an absence of the
/// range, which is protected and looked up again.
fn get_mvto<'t, M: Mode>(
    tx: &'t mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    cols: (usize, usize),
) -> TxResult<Option<&'t [u8]>> {
    let mut prot = None;
    loop {
        let found = match prot {
            None => match tx.st.sets.prefetched.find(table.id, key) {
                // SAFETY: found by this attempt's prefetch while pinned, so
                // not freed; records of this database are multi-version.
                Some(r) => Some(unsafe { MvRecord::from_record(&*r) }),
                None => tx.records().lookup(table, key),
            },
            Some(_) => tx.records().lookup(table, key),
        };
        if let Some(rec) = found {
            if let Some(skip) = read_if_present(tx, rec, true, cols)? {
                tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
                return Ok(Some(&tx.st.sets.rbuf[skip..]));
            }
        }
        if let Some(p) = prot {
            mvto_recheck(p)?;
            return Ok(None);
        }
        prot = Some(mvto_protect_key(tx, table, key)?);
    }
}

/// `Txn::get` under ERMIA.
pub(crate) fn get<'t, M: Mode>(
    tx: &'t mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
    get_slice(tx, table, key, 0, usize::MAX)
}

/// `Txn::get_slice` under ERMIA: [`get`], copying only the words that hold
/// bytes `start..end` of the visible version.
pub(crate) fn get_slice<'t, M: Mode>(
    tx: &'t mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    start: usize,
    end: usize,
) -> TxResult<Option<&'t [u8]>> {
    let cols = (start, end);
    if M::MVTO {
        return get_mvto(tx, table, key, cols);
    }
    if !ssn(tx) {
        // A record a prefetch found (linked then, after this snapshot
        // began): if it has been unlinked since, its newest version was a
        // tombstone every snapshot sees, and any record inserted for the key
        // after the unlink commits after this snapshot began, so reading
        // the old record answers as the index would have.
        let found = match tx.st.sets.prefetched.find(table.id, key) {
            // SAFETY: found by this attempt's prefetch while pinned, so not
            // freed; records of this database are multi-version.
            Some(r) => Some(unsafe { MvRecord::from_record(&*r) }),
            None => tx.records().lookup(table, key),
        };
        return match found {
            None => Ok(None),
            Some(rec) => {
                let found = read_record(tx, rec, cols)?;
                tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
                Ok(found.map(|skip| &tx.st.sets.rbuf[skip..]))
            }
        };
    }
    // SSN: an answer "absent" goes into the node set whether the key has no
    // record or its visible version is a tombstone (or ⊥): the record may be
    // unlinked and the key inserted into a fresh one, which only the leaf
    // sees (its version, and its absence stamp once we commit). A record a
    // prefetch found answers only "present" (a present version was never
    // unlinked: only tombstones below the watermark are); an absent one is
    // left unread and looked up again with its leaf.
    if let Some(r) = tx.st.sets.prefetched.find(table.id, key) {
        // SAFETY: found by this attempt's prefetch while pinned, so not
        // freed; records of this database are multi-version.
        let rec = unsafe { MvRecord::from_record(&*r) };
        if let Some(skip) = read_if_present(tx, rec, true, cols)? {
            tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
            return Ok(Some(&tx.st.sets.rbuf[skip..]));
        }
    }
    let (found, leaf, version) = tx.records().lookup_with_leaf(table, key);
    let Some(rec) = found else {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    };
    let present = read_record(tx, rec, cols)?;
    tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
    let Some(skip) = present else {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    };
    Ok(Some(&tx.st.sets.rbuf[skip..]))
}

pub(super) use crate::cc::PointWrite as Op;

/// Create a record for `key` (⊥ plus our version) and link it into the
/// index; `Err(rec)` with the existing record if the key has one.
pub(super) fn create<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> Result<(), u64> {
    let meta = ssn(tx);
    let st = &mut *tx.st;
    let r = MvRecord::new_mv(val, my_flagged(st), M::META.then_some(SSN_META));
    // SAFETY: fresh, unpublished.
    let rec = unsafe { &*r };
    let newv = rec.newest();
    // SAFETY: as above.
    let bot = unsafe { &*newv }.prev();
    if meta {
        // SAFETY: ⊥ of an SSN record has metadata. Nobody else sees it yet.
        let m = unsafe { ssn_meta(bot) }.expect("meta");
        m.sstamp.store(my_flagged(st), Ordering::Relaxed);
    }
    // Hinted, as Silo's inserts are: NewOrder's order lines go into one
    // leaf one after another.
    let ins = table
        .index
        .insert_hinted(key, r as u64, tx.g, &mut st.sets.hint);
    match ins {
        Insert::Exists(v) => {
            // SAFETY: never published.
            unsafe { MvRecord::free(r) };
            Err(v)
        }
        Insert::Inserted { leaf, .. } => {
            if meta {
                super::super::own_insert_fixup(&mut st.sets, &ins);
                // Transactions that saw this key's range empty and committed
                // precede us (they did not see our key). Scanners raise the
                // stamp before validating their node set; the fences pair
                // those two steps with our insert and this read.
                fence(Ordering::SeqCst);
                let a = leaf.stamp().max(table.index.stamp_floor());
                st.mv.pstamp = st.mv.pstamp.max(a);
            }
            let k = st.sets.stash(key);
            st.mvw.push(MvWrite {
                rec: r,
                newv,
                oldv: bot,
                table: table.id,
                key: k,
            });
            Ok(())
        }
    }
}

/// Write `val` (`None`: delete) into `rec` under the rules of `op`.
/// `Ok(Some(done))`, or `Ok(None)` if the record was unlinked under us
/// (retry through the index).
pub(super) fn write_record<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    rec: &MvRecord,
    val: Option<&[u8]>,
    op: Op,
    mut patch: Option<Patch<'_>>,
) -> TxResult<Option<bool>> {
    let meta = ssn(tx);
    let db = tx.db;
    let sh = tx.sh;
    // The log names every written record by its key.
    let logging = db.log.is_some();
    let g = tx.g;
    let st = &mut *tx.st;
    let my = my_flagged(st);
    let begin = st.mv.begin;
    let mut spins = 0;
    loop {
        let head = rec.newest();
        // SAFETY: pinned.
        let h = unsafe { &*head };
        let s = h.stamp();
        if s == my {
            // Our own version: rewrite it.
            let tomb = h.is_tombstone();
            match op {
                Op::Insert if !tomb => return Ok(Some(false)),
                Op::Update | Op::Delete if tomb => return Ok(Some(false)),
                _ => {}
            }
            let val = match patch.as_mut() {
                // SAFETY: our own version, which only we write; pinned.
                Some(p) => Some(p.apply_to(head)?),
                None => val,
            };
            let wi = st
                .mvw
                .iter()
                .rposition(|w| w.newv == head)
                .expect("own version in the write set");
            if h.fits(val.map_or(0, |v| v.len())) {
                // SAFETY: our uncommitted version, large enough.
                unsafe { Version::rewrite(head, val) };
            } else {
                let nv = new_mv_version(val, my, h.prev(), M::META.then_some(SSN_META));
                rec.set_head(nv);
                st.mvw[wi].newv = nv;
                if !h.is_inline() {
                    // SAFETY: unlinked; readers that hold it are pinned.
                    unsafe { g.retire(head as *mut u8, free_mv_version) };
                }
            }
            if val.is_none() && st.mvw[wi].key.1 == 0 {
                st.mvw[wi].key = st.sets.stash(key);
            }
            return Ok(Some(true));
        }
        // Someone else's version: is it committed and in our snapshot?
        let cstamp = if s & XID_FLAG == 0 {
            s
        } else {
            match sh.xids.lookup(s) {
                XLookup::Stale => continue,
                XLookup::Current { state, end, .. } => match state {
                    XidState::Committed => end,
                    XidState::Committing if end == 0 || end <= begin => {
                        backoff_spin(&mut spins);
                        continue;
                    }
                    XidState::Committing => end,
                    // Uncommitted head: another writer holds the record.
                    XidState::Active | XidState::Aborted => {
                        return conflict(ConflictReason::WriteConflict)
                    }
                },
            }
        };
        if cstamp > begin {
            // Committed after we began: SI forbids the update.
            return conflict(ConflictReason::WriteConflict);
        }
        let tomb = h.is_tombstone();
        let answer_only = match op {
            Op::Insert => !tomb,
            Op::Update | Op::Delete => tomb,
            Op::Put => false,
        };
        if answer_only {
            // "Exists" / "missing" is a read of the head.
            if meta {
                on_read(st, head, cstamp)?;
            }
            if M::MVTO {
                raise_rts(head, begin);
                if rec.newest() != head {
                    // A writer slipped in: look again (see `mvto_visible`).
                    continue;
                }
            }
            return Ok(Some(false));
        }
        // A column write: the new version is the head's value (committed,
        // in our snapshot, so immutable) with the bytes written over it,
        // copied from the head straight into the new version.
        let fill = match patch.as_ref() {
            Some(p) => {
                crate::txn::check_patch(h.value_len(), p.at, p.bytes.len())?;
                Fill::Patched {
                    base: head,
                    at: p.at,
                    bytes: p.bytes,
                }
            }
            None => Fill::Value(val),
        };
        // SAFETY: pinned; a patched base is the committed head.
        let len = unsafe { fill.value_len() };
        // The record's inline first version if GC freed it, else a new one.
        // SAFETY: pinned; `rec` came from the index as a raw address.
        let nv = match unsafe { MvRecord::take_inline(rec, len) } {
            Some(a) => {
                // SAFETY: claimed just now, unpublished; the value fits; a
                // patched base is the committed head, the patch checked.
                unsafe { reinit_inline(a, fill, my, head, SSN_META) };
                a
            }
            // SAFETY: as above.
            None => unsafe { new_mv_version_fill(fill, my, head, M::META.then_some(SSN_META)) },
        };
        let deletes = matches!(fill, Fill::Value(None));
        // Undo the allocation or the claim of a version never published.
        let discard = |nv: *mut Version| {
            // SAFETY: pinned; never published.
            if unsafe { &*nv }.is_inline() {
                rec.give_back_inline();
            } else {
                // SAFETY: never published.
                unsafe { free_mv_version(nv as *mut u8) };
            }
        };
        let installed = if tomb {
            // Over a tombstone: exclude the GC's unlink of this record.
            rec.mv_lock();
            if !rec.mv_linked() {
                rec.mv_unlock();
                discard(nv);
                return Ok(None);
            }
            let ok = rec.cas_head(head, nv);
            rec.mv_unlock();
            ok
        } else {
            rec.cas_head(head, nv)
        };
        if !installed {
            discard(nv);
            return conflict(ConflictReason::WriteConflict);
        }
        let k = if deletes || tomb || logging {
            st.sets.stash(key)
        } else {
            (0, 0)
        };
        st.mvw.push(MvWrite {
            rec,
            newv: nv,
            oldv: head,
            table: table.id,
            key: k,
        });
        if M::MVTO {
            // The timestamp rule, after the CAS (see `mvto_visible`): a
            // reader ordered after us has read the version we overwrite.
            // Our version is in the write set, so the abort removes it.
            fence(Ordering::SeqCst);
            // SAFETY: pinned; MVRCC's versions all carry metadata.
            let m = unsafe { ssn_meta(head) }.expect("MVRCC version metadata");
            if m.pstamp.load(Ordering::SeqCst) > begin {
                return conflict(ConflictReason::TimestampOrder);
            }
        }
        if meta {
            // The creator of the version we overwrite precedes us (its
            // post-commit may not have set the version's pstamp yet).
            st.mv.pstamp = st.mv.pstamp.max(cstamp);
            on_overwrite(st, head)?;
        }
        return Ok(Some(true));
    }
}

/// The bytes of a column write (`Txn::update_slice`) and a buffer to build
/// the new row in.
pub(super) struct Patch<'a> {
    at: usize,
    bytes: &'a [u8],
    buf: &'a mut Vec<u8>,
}

impl Patch<'_> {
    /// The value of version `v` with the bytes written over it, in `buf`.
    ///
    /// The caller makes sure that `v` does not change meanwhile (a
    /// committed version, or our own) and that it is not reclaimed (pinned).
    fn apply_to(&mut self, v: *const Version) -> TxResult<&[u8]> {
        self.buf.clear();
        // SAFETY: per the contract, a stable, live version.
        unsafe { Version::read_into(v, self.buf) };
        patch_row(self.buf, self.at, self.bytes)?;
        Ok(&self.buf[..])
    }
}

pub(super) fn write<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: Option<&[u8]>,
    op: Op,
) -> TxResult<bool> {
    write_with(tx, table, key, val, op, None)
}

/// `write`, or with `patch` a column write (`op` is then `Update`).
fn write_with<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: Option<&[u8]>,
    op: Op,
    mut patch: Option<Patch<'_>>,
) -> TxResult<bool> {
    // MVRCC: the writer registers in the key's range before it writes (or
    // answers), and an absence it answers is protected like a reader's.
    let reg = if M::MVTO {
        Some(mvto_register(tx, table, key)?)
    } else {
        None
    };
    let created = |reg: Option<(*const mvrcc::MvTable, *const mvrcc::Partition, usize)>| {
        if let Some((mt, p, i)) = reg {
            // SAFETY: the worker's table cache keeps the state alive; the
            // partition was current in this attempt, which is pinned.
            unsafe { (*mt).created(&*p, i) };
        }
    };
    let mut prot = None;
    // Whether an attempt may take the record from the prefetch memo.
    let mut memo = true;
    for attempt in 0..STALE_RETRIES {
        let mut node = None;
        let mut memoized = false;
        let found = if op == Op::Insert {
            // Inserts usually find no key: try the index insert first.
            match create(tx, table, key, val.expect("insert value")) {
                Ok(()) => {
                    created(reg);
                    return Ok(true);
                }
                Err(v) => v,
            }
        } else {
            let mut last = if attempt == 0 {
                tx.st.sets.last.matches(table.id, key).map(|(rec, _)| rec)
            } else {
                None
            };
            // A record a prefetch found; one unlinked since refuses the
            // write under its lock (`LATEST`), and the next attempt goes
            // through the index. SSN needs the leaf for its node set only
            // when the write answers "missing": then it looks again through
            // the index (below), which reads the leaf's version before the
            // record's.
            if last.is_none() && attempt == 0 && memo && prot.is_none() {
                last = tx.st.sets.prefetched.find(table.id, key);
                memoized = last.is_some();
            }
            match last {
                Some(rec) => rec as u64,
                None => match table.index.get_with_leaf(key, tx.g) {
                    (Some(v), leaf, version) => {
                        node = Some(NodeEntry { leaf, version });
                        v
                    }
                    (None, leaf, version) => {
                        if op != Op::Put {
                            if ssn(tx) {
                                tx.st.sets.nodes.push(NodeEntry { leaf, version });
                            }
                            if M::MVTO {
                                match prot {
                                    Some(p) => mvto_recheck(p)?,
                                    None => {
                                        prot = Some(mvto_protect_key(tx, table, key)?);
                                        continue;
                                    }
                                }
                            }
                            return Ok(false);
                        }
                        match create(tx, table, key, val.expect("put value")) {
                            Ok(()) => {
                                created(reg);
                                return Ok(true);
                            }
                            Err(v) => v,
                        }
                    }
                },
            }
        };
        // SAFETY: reached through the index while pinned.
        let rec = unsafe { MvRecord::from_index(found) };
        let p = patch.as_mut().map(|p| Patch {
            at: p.at,
            bytes: p.bytes,
            buf: &mut *p.buf,
        });
        if let Some(done) = write_record(tx, table, key, rec, val, op, p)? {
            if !done && memoized && M::SSN {
                // The memo gave no leaf: answer through the index, whose
                // leaf version, read before the record, goes into the node
                // set. (The read of the head just made is tracked twice,
                // which only repeats its checks.)
                memo = false;
                tx.st.sets.last.forget();
                continue;
            }
            // SSN: "missing" answered from a tombstone is an absence seen
            // (see `get`).
            if !done && matches!(op, Op::Update | Op::Delete) && ssn(tx) {
                if let Some(n) = node {
                    tx.st.sets.nodes.push(n);
                }
            }
            // MVRCC: "missing" answered from a tombstone (or ⊥) is an
            // absence of the range: protect it and look again.
            if !done && matches!(op, Op::Update | Op::Delete) && M::MVTO {
                match prot {
                    Some(p) => mvto_recheck(p)?,
                    None => {
                        prot = Some(mvto_protect_key(tx, table, key)?);
                        tx.st.sets.last.forget();
                        continue;
                    }
                }
            }
            return Ok(done);
        }
        tx.st.sets.last.forget();
    }
    conflict(ConflictReason::Stale)
}

/// MVRCC: register the writer in the range of `key` (see [`mvrcc`]).
#[allow(clippy::type_complexity)]
fn mvto_register<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<(*const mvrcc::MvTable, *const mvrcc::Partition, usize)> {
    let g = tx.g;
    let st = &mut *tx.st;
    let mt = mvrcc::table_state(&tx.sh.mvrcc, &mut st.mvr, table, g);
    // SAFETY: the worker's table cache keeps it alive.
    let (p, i) = mvrcc::register(
        &mut st.mvr,
        unsafe { &*mt },
        key,
        st.mv.begin,
        st.mv.slot,
        g,
    )?;
    Ok((mt, p as *const mvrcc::Partition, i))
}

/// `Txn::put` under ERMIA.
pub(crate) fn put<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<()> {
    write(tx, table, key, Some(val), Op::Put).map(|_| ())
}

/// `Txn::insert` under ERMIA.
pub(crate) fn insert<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    write(tx, table, key, Some(val), Op::Insert)
}

/// `Txn::update` under ERMIA.
pub(crate) fn update<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    write(tx, table, key, Some(val), Op::Update)
}

/// `Txn::get_many` under ERMIA: the keys are looked up together
/// (`cc::for_each_found`) and each record found is read at once, as `get`
/// reads a record a prefetch found. Under SI that answers as the index
/// would even for a record unlinked since (see `get`). Under SSN a record
/// found answers only "present" this way: an absent answer needs the leaf
/// for the node set, so a key whose visible version is a tombstone (or
/// none), like a key not found, is read again by `get`, with its leaf.
pub(crate) fn get_many<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    keys: &[&[u8]],
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, Option<&[u8]>),
) -> TxResult<()> {
    let g = tx.g;
    // SSN's node set and MVRCC's range protection need an absent answer to
    // go through `get`.
    let ssn = ssn(tx) || M::MVTO;
    crate::cc::for_each_found::<MvRecord>(table, keys, end, g, |i, key, rec| {
        if !rec.is_null() {
            // SAFETY: found through the index while pinned (the attempt's
            // guard), so not freed; records of this database are
            // multi-version.
            let rec = unsafe { MvRecord::from_record(&*rec) };
            let present = read_if_present(tx, rec, ssn, (start, end))?;
            if present.is_some() || !ssn {
                tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
                f(i, present.map(|skip| &tx.st.sets.rbuf[skip..]));
                return Ok(());
            }
        }
        f(i, get_slice(tx, table, key, start, end)?);
        Ok(())
    })
}

/// `Txn::update_slice` under ERMIA: the write of `update`, whose new
/// version is built from the version it supersedes (no separate read).
pub(crate) fn update_slice<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    at: usize,
    bytes: &[u8],
) -> TxResult<bool> {
    let mut buf = std::mem::take(&mut tx.core.scratch);
    let patch = Patch {
        at,
        bytes,
        buf: &mut buf,
    };
    let r = write_with(tx, table, key, None, Op::Update, Some(patch));
    tx.core.scratch = buf;
    r
}

/// `Txn::delete` under ERMIA: a tombstone version.
pub(crate) fn delete<M: Mode>(tx: &mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<bool> {
    write(tx, table, key, None, Op::Delete)
}

/// `Txn::scan` under ERMIA: the snapshot's versions; under SSN every record
/// met is a read and every leaf goes into the node set.
pub(crate) fn scan<M: Mode, F>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    mut f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    if M::MVTO {
        return scan_mvto(tx, table, lo, hi, opts, f);
    }
    let limit = opts.limit.unwrap_or(usize::MAX);
    let cols = opts.slice.unwrap_or((0, usize::MAX));
    let is_ssn = ssn(tx);
    let sh = tx.sh;
    let recs = tx.records();
    let st = &mut *tx.st;
    let my = my_flagged(st);
    let begin = st.mv.begin;
    let mut count = 0usize;
    // The rows handed out are remembered, as Silo's scans remember them,
    // so that a write of one (Delivery's order lines) needs no descent.
    // Unlike Silo's, with TID 0 and no read-set entry: the write checks
    // the head again (first updater wins), and rows of our own writes are
    // remembered too (the write then rewrites our version).
    st.sets.last.scan_begins();
    let mut failed: Option<TxError> = None;
    // The node callback and the row callback both need the sets: the node
    // set is taken out for the scan (no allocation) and put back after.
    let mut nodes = std::mem::take(&mut st.sets.nodes);
    recs.scan(
        table,
        (lo, hi),
        opts.reverse,
        |leaf: crate::index::LeafRef, version: u64| {
            if is_ssn {
                nodes.push(NodeEntry { leaf, version })
            }
        },
        |k, rec: &MvRecord| {
            let Some(seen) = visible(sh, my, begin, rec) else {
                return true;
            };
            if is_ssn && !seen.own {
                if let Err(e) = on_read(st, seen.v, seen.cstamp) {
                    failed = Some(e);
                    return false;
                }
            }
            // SAFETY: pinned; the visible version is committed or ours.
            if !unsafe { &*seen.v }.is_tombstone() {
                st.sets.last.scanned(table.id, k, rec.as_record(), 0);
            }
            emit_row(seen.v, k, &mut st.sets.rbuf, cols, &mut count, limit, &mut f)
        },
    );
    st.sets.nodes = nodes;
    match failed {
        Some(e) => Err(e),
        None => Ok(count),
    }
}

/// A scan's visible version `v` of key `k`, bytes `cols.0..cols.1` of it
/// (only the words that hold them are copied), handed to the visitor `f`
/// through `buf` unless it is a tombstone (skipped); whether the scan goes
/// on (the visitor's answer, and `count`, the rows handed over, below
/// `limit`). The caller is pinned and `v` is committed or its own.
#[inline]
fn emit_row<F: FnMut(&[u8], &[u8]) -> bool>(
    v: *const Version,
    k: &[u8],
    buf: &mut Vec<u8>,
    cols: (usize, usize),
    count: &mut usize,
    limit: usize,
    f: &mut F,
) -> bool {
    // SAFETY: per the contract.
    if unsafe { &*v }.is_tombstone() {
        return true;
    }
    *count += 1;
    buf.clear();
    // SAFETY: committed (immutable) or the caller's own version; pinned.
    let skip = unsafe { Version::read_slice_into(v, cols.0, cols.1, buf) };
    f(k, &buf[skip..]) && *count < limit
}

/// `Txn::scan` under MVRCC: range by range, each protected whole (its read
/// timestamp raised, every slot of its writer array examined, in the
/// current partition and the one it replaced) before any of its rows is
/// read; rows are read at the timestamp (an older active writer's version
/// aborts the scan). The range's read timestamp covers the rows, so no
/// per-row read timestamp is raised. At the end the partition must still
/// be the table's (see [`mvrcc`]).
fn scan_mvto<M: Mode, F>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    mut f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    use crate::cc::{max_lo, min_hi};
    let g = tx.g;
    let sh = tx.sh;
    let mt = mvrcc::table_state(&sh.mvrcc, &mut tx.st.mvr, table, g);
    // SAFETY: the worker's table cache keeps it alive.
    let mt = unsafe { &*mt };
    let part = mt.current(g);
    let (first, last) = (part.cuts.first_for(lo), part.cuts.last_for(hi));
    let limit = opts.limit.unwrap_or(usize::MAX);
    let cols = opts.slice.unwrap_or((0, usize::MAX));
    let recs = tx.records();
    let st = &mut *tx.st;
    let (my, t) = (my_flagged(st), st.mv.begin);
    let mut count = 0usize;
    let mut failed: Option<TxError> = None;
    let mut stopped = false;
    if first <= last {
        for step in 0..=last - first {
            let i = if opts.reverse {
                last - step
            } else {
                first + step
            };
            mvrcc::protect(part, i, t)?;
            let sub_lo = max_lo(lo, Bound::Included(part.cuts.start(i)));
            let sub_hi = match part.cuts.end(i) {
                Some(e) => min_hi(hi, Bound::Excluded(e)),
                None => hi,
            };
            recs.scan(
                table,
                (sub_lo, sub_hi),
                opts.reverse,
                crate::index::Unobserved,
                |k, rec: &MvRecord| {
                    let seen = match visible_to(sh, my, t, rec, true) {
                        Ok(Some(seen)) => seen,
                        Ok(None) => return true,
                        Err(e) => {
                            failed = Some(e);
                            stopped = true;
                            return false;
                        }
                    };
                    let go =
                        emit_row(seen.v, k, &mut st.sets.rbuf, cols, &mut count, limit, &mut f);
                    stopped |= !go;
                    go
                },
            );
            if stopped {
                break;
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if !mt.is_current(part) {
        return conflict(ConflictReason::RangeSplit);
    }
    Ok(count)
}
