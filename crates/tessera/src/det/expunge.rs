//! The expunge list, `tessera.expunged`: requests of the input log that
//! recovery must not replay (Faleiro's thesis §6.4.7, digest 4.3 "corner
//! cases").
//!
//! Under piece-wise visibility a piece after its transaction's commit point
//! cannot abort: its writes, and those of the pieces before it, are visible
//! to later transactions as soon as they complete. A failure there that the
//! procedure did not declare (an integer overflow, an error, a panic) would
//! leave part of a transaction in the database. The thesis treats it as a
//! **full system failure**: discard the state, reload the last checkpoint,
//! **expunge the offending transaction from the log**, and replay. Tessera
//! does exactly that: the request's timestamp is added to this list (made
//! durable before anyone is told), the engine fails the batch it was in and
//! everything after it (none of their outcomes was released), and recovery
//! (the next open, or the restart the database makes at once) replays the
//! log from the last checkpoint with the expunged requests turned into
//! no-ops that abort. Checkpoints are refused once the engine has failed, so
//! none ever covers the partial state.
//!
//! The log itself is never edited in place (a torn rewrite of a CRC-checked
//! block would read as damage); the list beside it is replaced whole, by a
//! write to a temporary file, an fsync and a rename.
//!
//! ```text
//! file:   magic "TSXPUNG1" | n u32 | n x (ts u64 | len u16 | len bytes of reason) | crc32c u32
//! ```
//! The CRC covers everything before it. A file that fails the check is
//! damage ([`Error::Corrupt`]), never read as an empty list.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use super::{DynProcedure, NowPhase, PieceId, PieceIo, PiecePlan, ProcId};
use crate::error::{Error, TxError, TxResult};
use crate::request::KeySet;
use crate::txn::Txn;

/// The file name, in the data directory.
pub const EXPUNGE_FILE: &str = "tessera.expunged";
const MAGIC: &[u8; 8] = b"TSXPUNG1";
/// The longest reason kept (longer ones are cut at a character boundary).
const REASON_MAX: usize = 1024;

/// The expunged requests: timestamp to the reason they failed.
pub type Expunged = BTreeMap<u64, String>;

/// Read `dir/tessera.expunged`: empty if there is no such file.
pub fn read(dir: &Path) -> Result<Expunged, Error> {
    let path = dir.join(EXPUNGE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Expunged::new()),
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    decode(&bytes).map_err(|why| Error::Corrupt(format!("{}: {why}", path.display())))
}

fn decode(b: &[u8]) -> Result<Expunged, String> {
    if b.len() < MAGIC.len() + 4 + 4 || &b[..8] != MAGIC {
        return Err("not an expunge list (bad magic or too short)".into());
    }
    let (body, crc) = b.split_at(b.len() - 4);
    let want = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if crc32c::crc32c(body) != want {
        return Err("checksum mismatch".into());
    }
    let n = u32::from_le_bytes(body[8..12].try_into().expect("4 bytes")) as usize;
    let mut at = 12;
    let mut out = Expunged::new();
    for i in 0..n {
        if body.len() - at < 10 {
            return Err(format!("entry {i} of {n} cut off at byte {at}"));
        }
        let ts = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        let len = u16::from_le_bytes(body[at + 8..at + 10].try_into().expect("2 bytes")) as usize;
        at += 10;
        if body.len() - at < len {
            return Err(format!("entry {i} of {n}: reason cut off at byte {at}"));
        }
        let reason = String::from_utf8_lossy(&body[at..at + len]).into_owned();
        at += len;
        out.insert(ts, reason);
    }
    if at != body.len() {
        return Err(format!(
            "{} bytes after the last of {n} entries",
            body.len() - at
        ));
    }
    Ok(out)
}

fn encode(list: &Expunged) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + list.len() * 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
    for (ts, reason) in list {
        let mut cut = reason.len().min(REASON_MAX);
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        out.extend_from_slice(&ts.to_le_bytes());
        out.extend_from_slice(&(cut as u16).to_le_bytes());
        out.extend_from_slice(&reason.as_bytes()[..cut]);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// One writer at a time: two executors may fail at once (two transactions,
/// or a piece and its child on another partition), and each rewrites the
/// whole list through the same temporary file. (Another process cannot
/// share the directory: its `LOCK`.)
static WRITER: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Add request `ts` to `dir`'s list, durably: the list is rewritten whole
/// (temporary file, fsync, rename, fsync of the directory) before this
/// returns.
pub fn add(dir: &Path, ts: u64, reason: &str) -> Result<(), Error> {
    let _one = WRITER.lock();
    let mut list = read(dir)?;
    list.insert(ts, reason.to_owned());
    write(dir, &list)
}

/// Drop the entries at or after `next_ts`, the first timestamp the log
/// does not hold (their batches never became durable: recovery cut them,
/// and the sequencer hands those timestamps out again), and return what
/// is left. The file is rewritten only if something is dropped.
pub fn retain_below(dir: &Path, next_ts: u64) -> Result<Expunged, Error> {
    let _one = WRITER.lock();
    let mut list = read(dir)?;
    if list.range(next_ts..).next().is_some() {
        list.retain(|&ts, _| ts < next_ts);
        write(dir, &list)?;
    }
    Ok(list)
}

fn write(dir: &Path, list: &Expunged) -> Result<(), Error> {
    let path = dir.join(EXPUNGE_FILE);
    let tmp = dir.join(format!("{EXPUNGE_FILE}.tmp"));
    let io = |what: &str, p: &Path, e| Error::io(format!("cannot {what} {}", p.display()), e);
    let mut f = std::fs::File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
    f.write_all(&encode(list))
        .map_err(|e| io("write", &tmp, e))?;
    f.sync_all().map_err(|e| io("sync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| io("rename into", &path, e))?;
    crate::log::segment::sync_dir(dir).map_err(|e| io("sync", dir, e))
}

/// What recovery replays in place of an expunged request: it keeps the
/// request's timestamp (the log's positions do not move), declares no key,
/// touches nothing and aborts.
pub(crate) struct ExpungedRequest {
    /// The logged procedure's id.
    pub id: ProcId,
}

impl DynProcedure for ExpungedRequest {
    fn id(&self) -> ProcId {
        self.id
    }
    fn name(&self) -> &'static str {
        "(expunged)"
    }
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn declare(&self, _keys: &mut KeySet) -> bool {
        true
    }
    fn needs_reconnaissance(&self) -> bool {
        false
    }
    fn reconnoiter(&mut self, _tx: &mut Txn<'_>) -> TxResult<()> {
        Ok(())
    }
    fn run(&mut self, _tx: &mut Txn<'_>) -> TxResult<Box<dyn std::any::Any + Send>> {
        Err(TxError::Error(Error::UserAbort))
    }
    fn pieces(&self, _plan: &mut PiecePlan) -> bool {
        false
    }
    fn run_piece(&self, _i: PieceId, _tx: &mut Txn<'_>, _io: &mut PieceIo<'_>) -> TxResult<()> {
        Err(TxError::Error(Error::UserAbort))
    }
    fn pieces_output(&mut self, _outputs: &[&[u8]]) -> TxResult<Box<dyn std::any::Any + Send>> {
        Err(TxError::Error(Error::UserAbort))
    }
    fn now_phase(
        &mut self,
        _tx: &mut Txn<'_>,
    ) -> TxResult<NowPhase<Box<dyn std::any::Any + Send>>> {
        Ok(NowPhase::Eager)
    }
    fn later_phase(&mut self, _tx: &mut Txn<'_>) -> TxResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_round_trips_and_grows() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
        add(dir.path(), 42, "overflow in piece 3").unwrap();
        add(dir.path(), 7, &"é".repeat(REASON_MAX)).unwrap();
        let l = read(dir.path()).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[&42], "overflow in piece 3");
        // Cut at a character boundary, at most REASON_MAX bytes.
        assert!(l[&7].len() <= REASON_MAX && l[&7].chars().all(|c| c == 'é'));
        assert!(!dir.path().join(format!("{EXPUNGE_FILE}.tmp")).exists());
    }

    /// Entries past the log's end (their batch was cut as a torn tail)
    /// are dropped, the others kept; concurrent adds lose nothing.
    #[test]
    fn entries_past_the_log_are_dropped_and_concurrent_adds_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let d = dir.path();
                s.spawn(move || {
                    for i in 0..10 {
                        add(d, t * 100 + i, "x").unwrap();
                    }
                });
            }
        });
        assert_eq!(read(dir.path()).unwrap().len(), 40);
        let left = retain_below(dir.path(), 205).unwrap();
        assert_eq!(left.len(), 25);
        assert_eq!(read(dir.path()).unwrap(), left);
        assert_eq!(left.keys().next_back(), Some(&204));
    }

    #[test]
    fn damage_is_refused_not_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        add(dir.path(), 9, "x").unwrap();
        let p = dir.path().join(EXPUNGE_FILE);
        let good = std::fs::read(&p).unwrap();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x40;
            std::fs::write(&p, &b).unwrap();
            assert!(
                matches!(read(dir.path()), Err(Error::Corrupt(_))),
                "flipped byte {i} accepted"
            );
        }
        std::fs::write(&p, &good[..good.len() - 1]).unwrap();
        assert!(matches!(read(dir.path()), Err(Error::Corrupt(_))));
    }
}
