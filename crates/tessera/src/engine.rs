//! What every protocol reaches of an open database: the few settings it
//! reads, the epochs, the catalog's tables and the log. It sits below the
//! protocols in the module graph (`db` → `cc` → `engine` → `log`, `epoch`,
//! `catalog`), so that no protocol imports `db` and the log imports
//! neither: the database (`db::DbInner`) holds an [`Engine`] beside the
//! protocol's state and the things only it uses (the control file, the
//! checkpointer, the directory lock).

use std::sync::Arc;

use parking_lot::RwLock;

use crate::catalog::Table;
use crate::epoch::Epochs;
use crate::error::ConflictReason;
use crate::log::Log;

/// The settings protocols read (copied from `Options` at open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Worker slots (`Options::workers`); epoch slots past them are the
    /// database's internal users.
    pub workers: usize,
    /// Silo's snapshot transactions are on (`Options::snapshots`).
    pub snapshots: bool,
    /// Opened read-only: every write is refused.
    pub read_only: bool,
    /// ROCC's logical ranges.
    pub rocc: RoccConfig,
    /// How Silo validates its scans (`Options::scan_validation`).
    pub scan_validation: ScanValidation,
}

/// How Silo validates a scan against phantoms (`Options::scan_validation`;
/// `--scan-validation` on the command line). Both are what Cai et al.
/// (chapter 3) call LRV, local read-set validation: the scanned rows enter
/// the read set and their TIDs are re-read at commit, so the cost grows
/// with the rows scanned. They differ in how an insert or delete within the
/// scanned range is caught.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScanValidation {
    /// Silo's node set (section 4.6): the version of every index leaf the
    /// scan passed is checked at commit; a leaf whose keys changed fails.
    /// Cheap, and coarse: a change anywhere in the leaf aborts.
    #[default]
    NodeSet,
    /// The scan is run again at commit, after the write set is locked, and
    /// must find the same present rows in the same order (Hekaton's repeated
    /// scan). Exact at the range's edges, and as dear as the scan itself.
    Reread,
}

impl ScanValidation {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ScanValidation::NodeSet => "nodeset",
            ScanValidation::Reread => "reread",
        }
    }
}

impl std::str::FromStr for ScanValidation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nodeset" | "node-set" => Ok(ScanValidation::NodeSet),
            "reread" | "re-read" | "rescan" => Ok(ScanValidation::Reread),
            _ => Err(format!(
                "unknown scan validation {s:?}: expected nodeset or reread"
            )),
        }
    }
}

/// ROCC's knobs (`Options::rocc_range_size`, `Options::rocc_slots`,
/// `Options::rocc_registration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RoccConfig {
    /// Target records per logical range (default 610: the book's 16,384
    /// ranges over 10M keys).
    pub range_size: u32,
    /// Slots in each range's circular writer list (default 5,000, the
    /// book's).
    pub slots: u32,
    /// Where a committing writer registers.
    pub registration: RoccRegistration,
}

/// Where a ROCC (or GWV) writer registers at commit
/// (`Options::rocc_registration`; `--rocc-registration`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RoccRegistration {
    /// In every range it wrote, as Algorithm 3.1 does (the default).
    #[default]
    Always,
    /// Only in the ranges it wrote where some scan is in flight: every scan
    /// counts itself in the ranges it touches, for the length of its
    /// transaction, and a writer that finds a count of zero, after its
    /// write set is locked, skips that range. Not in the book: Tessera's
    /// addition (the module docs of `cc::rocc` have the proof that a scan
    /// still sees every writer it must). It spares writers the registration's
    /// shared writes when no scan could need them.
    Scanned,
}

impl RoccRegistration {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            RoccRegistration::Always => "always",
            RoccRegistration::Scanned => "scanned",
        }
    }
}

impl std::str::FromStr for RoccRegistration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(RoccRegistration::Always),
            "scanned" => Ok(RoccRegistration::Scanned),
            _ => Err(format!(
                "unknown ROCC registration {s:?}: expected always or scanned"
            )),
        }
    }
}

/// ROCC's default records per logical range (`Options::rocc_range_size`).
pub const ROCC_RANGE_SIZE: u32 = 610;
/// ROCC's default slots per writer list (`Options::rocc_slots`).
pub const ROCC_SLOTS: u32 = 5000;

impl Default for RoccConfig {
    fn default() -> Self {
        RoccConfig {
            range_size: ROCC_RANGE_SIZE,
            slots: ROCC_SLOTS,
            registration: RoccRegistration::Always,
        }
    }
}

/// The substrate shared by every protocol.
pub(crate) struct Engine {
    pub opts: Settings,
    pub epochs: Arc<Epochs>,
    pub tables: RwLock<Vec<Arc<Table>>>,
    /// The redo log, when durable.
    pub log: Option<Arc<Log>>,
}

/// Per-worker counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Committed transactions.
    pub commits: u64,
    /// Transactions rolled back by their own logic.
    pub user_aborts: u64,
    /// Conflict aborts, indexed by [`ConflictReason::index`].
    pub conflicts: [u64; ConflictReason::ALL.len()],
}

impl WorkerStats {
    /// Total conflict aborts.
    pub fn conflict_total(&self) -> u64 {
        self.conflicts.iter().sum()
    }
}
