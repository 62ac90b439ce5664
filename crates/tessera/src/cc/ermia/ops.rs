//! The operations: reads through [`super::visibility`], first-updater-wins
//! writes (section 3.6.1), inserts of new records, scans with the node set.

use super::*;
use crate::txn::{clamp_slice, patch_row};

/// Read `rec` for the running transaction: the visible version (with the
/// SSN read hook) into `rbuf`; `Ok(false)` if the key is absent to us.
pub(super) fn read_record<M: Mode>(tx: &mut ETx<'_, M>, rec: &MvRecord) -> TxResult<bool> {
    read_if_present(tx, rec, false)
}

/// [`read_record`]; with `only_present`, a record whose visible version is
/// a tombstone is left unread (`false`, and nothing recorded for SSN), so
/// that the caller can answer "absent" through the index.
fn read_if_present<M: Mode>(
    tx: &mut ETx<'_, M>,
    rec: &MvRecord,
    only_present: bool,
) -> TxResult<bool> {
    let st = &mut *tx.st;
    let Some(seen) = visible(tx.sh, my_flagged(st), st.mv.begin, rec) else {
        return Ok(false);
    };
    // SAFETY: pinned.
    if only_present && unsafe { &*seen.v }.is_tombstone() {
        return Ok(false);
    }
    if !seen.own && M::SSN {
        on_read(st, seen.v, seen.cstamp)?;
    }
    // SAFETY: pinned.
    if unsafe { &*seen.v }.is_tombstone() {
        return Ok(false);
    }
    st.sets.rbuf.clear();
    // SAFETY: a visible version's data never changes (committed), or it is ours.
    unsafe { Version::read_into(seen.v, &mut st.sets.rbuf) };
    Ok(true)
}

/// `Txn::get` under ERMIA.
pub(crate) fn get<'t, M: Mode>(
    tx: &'t mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
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
                let found = read_record(tx, rec)?;
                tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
                Ok(found.then_some(&tx.st.sets.rbuf[..]))
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
        if read_if_present(tx, rec, true)? {
            tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
            return Ok(Some(&tx.st.sets.rbuf[..]));
        }
    }
    let (found, leaf, version) = tx.records().lookup_with_leaf(table, key);
    let Some(rec) = found else {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    };
    let present = read_record(tx, rec)?;
    tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
    if !present {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    }
    Ok(Some(&tx.st.sets.rbuf[..]))
}

/// The kinds of write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Put,
    Insert,
    Update,
    Delete,
}

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
    let r = MvRecord::new_mv(val, my_flagged(st), meta.then_some(SSN_META));
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
    let ins = table.index.insert(key, r as u64, tx.g);
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
                let nv = new_mv_version(val, my, h.prev(), meta.then_some(SSN_META));
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
            return Ok(Some(false));
        }
        // A column write: the new version is the head's value (committed,
        // in our snapshot, so immutable) with the bytes written over it.
        let val = match patch.as_mut() {
            Some(p) => Some(p.apply_to(head)?),
            None => val,
        };
        // The record's inline first version if GC freed it, else a new one.
        // SAFETY: pinned; `rec` came from the index as a raw address.
        let nv = match unsafe { MvRecord::take_inline(rec, val.map_or(0, |v| v.len())) } {
            Some(a) => {
                // SAFETY: claimed just now, unpublished; the value fits.
                unsafe { reinit_inline(a, val, my, head, SSN_META) };
                a
            }
            None => new_mv_version(val, my, head, meta.then_some(SSN_META)),
        };
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
        let k = if val.is_none() || tomb || logging {
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
    for attempt in 0..STALE_RETRIES {
        let mut node = None;
        let found = if op == Op::Insert {
            // Inserts usually find no key: try the index insert first.
            match create(tx, table, key, val.expect("insert value")) {
                Ok(()) => return Ok(true),
                Err(v) => v,
            }
        } else {
            let mut last = if attempt == 0 {
                tx.st.sets.last.matches(table.id, key).map(|(rec, _)| rec)
            } else {
                None
            };
            // Under SI, a record a prefetch found (SSN needs the leaf for
            // its node set); one unlinked since refuses the write under its
            // lock (`LATEST`), and the next attempt goes through the index.
            if last.is_none() && attempt == 0 && !M::SSN {
                last = tx.st.sets.prefetched.find(table.id, key);
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
                            return Ok(false);
                        }
                        match create(tx, table, key, val.expect("put value")) {
                            Ok(()) => return Ok(true),
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
            // SSN: "missing" answered from a tombstone is an absence seen
            // (see `get`).
            if !done && matches!(op, Op::Update | Op::Delete) && ssn(tx) {
                if let Some(n) = node {
                    tx.st.sets.nodes.push(n);
                }
            }
            return Ok(done);
        }
        tx.st.sets.last.forget();
    }
    conflict(ConflictReason::Stale)
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
    let ssn = ssn(tx);
    crate::cc::for_each_found(table, keys, end, g, |i, key, rec| {
        if !rec.is_null() {
            // SAFETY: found through the index while pinned (the attempt's
            // guard), so not freed; records of this database are
            // multi-version.
            let rec = unsafe { MvRecord::from_record(&*rec) };
            let present = read_if_present(tx, rec, ssn)?;
            if present || !ssn {
                tx.st.sets.last.set(table.id, key, rec.as_record(), 0);
                f(
                    i,
                    present.then(|| clamp_slice(&tx.st.sets.rbuf, start, end)),
                );
                return Ok(());
            }
        }
        let v = get(tx, table, key)?;
        f(i, v.map(|v| clamp_slice(v, start, end)));
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
    let limit = opts.limit.unwrap_or(usize::MAX);
    let is_ssn = ssn(tx);
    let sh = tx.sh;
    let recs = tx.records();
    let st = &mut *tx.st;
    let my = my_flagged(st);
    let begin = st.mv.begin;
    let mut count = 0usize;
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
            // SAFETY: pinned.
            if unsafe { &*seen.v }.is_tombstone() {
                return true;
            }
            count += 1;
            st.sets.rbuf.clear();
            // SAFETY: committed (immutable) or our own version.
            unsafe { Version::read_into(seen.v, &mut st.sets.rbuf) };
            f(k, &st.sets.rbuf) && count < limit
        },
    );
    st.sets.nodes = nodes;
    match failed {
        Some(e) => Err(e),
        None => Ok(count),
    }
}
