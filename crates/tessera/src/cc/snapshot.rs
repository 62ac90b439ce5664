//! Read-only snapshot transactions (Silo section 4.9): reads see the
//! database as of a snapshot epoch boundary, with no read set, no validation
//! and no aborts. Writers keep the versions a live snapshot may need (see
//! `Record::install`).

use std::ops::Bound;

use crate::catalog::{Found, Table};
use crate::epoch::Guard;
use crate::storage::Record;
use crate::txn::ScanOptions;

/// `Txn::get` in a snapshot transaction at `boundary`.
pub(crate) fn get<'t>(
    buf: &'t mut Vec<u8>,
    g: &Guard<'_>,
    table: &Table,
    key: &[u8],
    boundary: u64,
) -> Option<&'t [u8]> {
    match table.lookup::<Record>(key, g) {
        Found::Missing => None,
        Found::Record(rec) => {
            buf.clear();
            rec.read_snapshot(boundary, buf).map(|_| &buf[..])
        }
    }
}

/// `Txn::scan` in a snapshot transaction at `boundary`.
pub(crate) fn scan<F>(
    buf: &mut Vec<u8>,
    g: &Guard<'_>,
    table: &Table,
    (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
    opts: ScanOptions,
    boundary: u64,
    mut f: F,
) -> usize
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut count = 0;
    table.scan_records(
        lo,
        hi,
        opts.reverse,
        g,
        crate::index::Unobserved,
        |k, rec: &Record| {
            buf.clear();
            match rec.read_snapshot(boundary, buf) {
                None => true,
                Some(_) => {
                    count += 1;
                    f(k, buf) && count < limit
                }
            }
        },
    );
    count
}
