//! Read-only snapshot transactions (Silo section 4.9): reads see the
//! database as of a snapshot epoch boundary, with no read set, no validation
//! and no aborts. Writers keep the versions a live snapshot may need (see
//! `Record::install`).

use std::ops::Bound;

use super::{CcProtocol, Records};
use crate::catalog::Table;
use crate::storage::Record;
use crate::txn::ScanOptions;

/// `Txn::get` in a snapshot transaction at `boundary`.
pub(crate) fn get<'t, P: CcProtocol<Rec = Record>>(
    buf: &'t mut Vec<u8>,
    recs: Records<'_, P>,
    table: &Table,
    key: &[u8],
    boundary: u64,
) -> Option<&'t [u8]> {
    match recs.lookup(table, key) {
        None => None,
        Some(rec) => {
            buf.clear();
            rec.read_snapshot(boundary, buf).map(|_| &buf[..])
        }
    }
}

/// `Txn::scan` in a snapshot transaction at `boundary`.
pub(crate) fn scan<P: CcProtocol<Rec = Record>, F>(
    buf: &mut Vec<u8>,
    recs: Records<'_, P>,
    table: &Table,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    opts: ScanOptions,
    boundary: u64,
    f: F,
) -> usize
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    super::sv_scan(
        buf,
        recs,
        table,
        range,
        opts,
        |rec, buf| rec.read_snapshot(boundary, buf).map(|_| 0),
        f,
    )
}
