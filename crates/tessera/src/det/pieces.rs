//! Transactions as piece DAGs, for piece-wise visibility (PWV; Faleiro's
//! thesis §6.4.1, digest 4.3 and checklist 6.3).
//!
//! A [`Procedure`](super::Procedure) may decompose itself into *pieces*:
//! each piece reads and writes a few declared records (or coarse groups of
//! records), and the procedure says, before anything runs, which pieces
//! may abort and which need another's output. PWV then runs the pieces,
//! not the transaction, as its unit of scheduling: a hot record is held
//! for one piece, and a piece after the transaction's *commit point* (its
//! last abortable piece) makes its writes visible as soon as it completes.
//!
//! How a procedure author writes one (the thesis decomposes by hand, as
//! here):
//!
//! 1. In [`Procedure::pieces`](super::Procedure::pieces), call
//!    [`PiecePlan::piece`] once per piece, in an order that puts every
//!    parent before its children, and declare each piece's keys with
//!    [`PiecePlan::read`] / [`PiecePlan::write`] (exact keys) or
//!    [`PiecePlan::read_group`] / [`PiecePlan::write_group`] (every key
//!    with a prefix: the conservative, coarse declaration of §6.4.5).
//!    A piece that may abort (an explicit abort statement, a constraint
//!    check) is declared *abortable*. Data dependencies are
//!    [`PiecePlan::after`]. Return `true`.
//! 2. [`Procedure::run_piece`](super::Procedure::run_piece) runs piece `i`
//!    on a [`Txn`](crate::Txn) that reaches only that piece's keys, and a
//!    [`PieceIo`]: the outputs of its parents, and its own output.
//! 3. [`Procedure::pieces_output`](super::Procedure::pieces_output) makes
//!    the transaction's output from the pieces' outputs once all have run.
//!
//! Commit-dependency edges are not written by the author: the engine adds
//! one from every abortable piece to every later piece (the thesis's rule
//! 5, "from every abortable piece to every writing piece after the commit
//! point"; here to reading ones too, as Listing 6.1 makes every
//! non-abortable piece wait for the commit decision). A piece that is a
//! parent of an abortable piece is before the commit point, so it is
//! treated as abortable too (its writes are hidden until the commit and
//! undone on an abort). A procedure that does not decompose itself runs as
//! one abortable piece: correct, with no early visibility.

use crate::catalog::TableId;

/// A piece's number within its transaction (declaration order).
pub type PieceId = u16;

/// The most pieces one transaction may have.
pub const MAX_PIECES: usize = 4096;

/// One declared access of a piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceAccess {
    /// The piece.
    pub piece: PieceId,
    /// The table.
    pub table: TableId,
    /// Where the key (or the group's prefix) is in the [`PiecePlan`]'s key bytes.
    pub at: u32,
    /// Its length.
    pub len: u32,
    /// A group: every key that starts with the bytes.
    pub group: bool,
    /// A write (else a read).
    pub write: bool,
}

/// What [`Procedure::pieces`](super::Procedure::pieces) declares: the
/// pieces, their keys, abortability and data dependencies.
#[derive(Clone, Debug, Default)]
pub struct PiecePlan {
    pub(crate) abortable: Vec<bool>,
    pub(crate) parents: Vec<(PieceId, PieceId)>,
    pub(crate) accesses: Vec<PieceAccess>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) error: Option<String>,
}

impl PiecePlan {
    /// An empty plan.
    pub fn new() -> PiecePlan {
        PiecePlan::default()
    }

    /// Forget everything (reused between transactions).
    pub fn clear(&mut self) {
        self.abortable.clear();
        self.parents.clear();
        self.accesses.clear();
        self.bytes.clear();
        self.error = None;
    }

    /// A new piece; `abortable` if it may abort (it is then before the
    /// commit point).
    pub fn piece(&mut self, abortable: bool) -> PieceId {
        if self.abortable.len() >= MAX_PIECES {
            self.error
                .get_or_insert_with(|| format!("more than {MAX_PIECES} pieces"));
        }
        self.abortable.push(abortable);
        (self.abortable.len() - 1) as PieceId
    }

    /// The pieces declared so far.
    pub fn len(&self) -> usize {
        self.abortable.len()
    }

    /// Whether no piece is declared.
    pub fn is_empty(&self) -> bool {
        self.abortable.is_empty()
    }

    fn access(&mut self, p: PieceId, table: TableId, key: &[u8], group: bool, write: bool) {
        if usize::from(p) >= self.abortable.len() {
            self.error
                .get_or_insert_with(|| format!("an access of piece {p}, which is not declared"));
            return;
        }
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        self.accesses.push(PieceAccess {
            piece: p,
            table,
            at,
            len: key.len() as u32,
            group,
            write,
        });
    }

    /// Piece `p` reads `key`.
    pub fn read(&mut self, p: PieceId, table: TableId, key: &[u8]) {
        self.access(p, table, key, false, false);
    }

    /// Piece `p` writes (puts, inserts, updates or deletes) `key`.
    pub fn write(&mut self, p: PieceId, table: TableId, key: &[u8]) {
        self.access(p, table, key, false, true);
    }

    /// Piece `p` reads (or scans) keys that start with `prefix`.
    pub fn read_group(&mut self, p: PieceId, table: TableId, prefix: &[u8]) {
        self.access(p, table, prefix, true, false);
    }

    /// Piece `p` reads and writes keys that start with `prefix`, new keys
    /// included.
    pub fn write_group(&mut self, p: PieceId, table: TableId, prefix: &[u8]) {
        self.access(p, table, prefix, true, true);
    }

    /// Piece `child` needs `parent`'s output (a data dependency): it runs
    /// only after `parent`. `parent` must be declared before `child`.
    pub fn after(&mut self, child: PieceId, parent: PieceId) {
        if parent >= child || usize::from(child) >= self.abortable.len() {
            self.error.get_or_insert_with(|| {
                format!(
                    "piece {child} after piece {parent}: a parent must be an earlier declared piece"
                )
            });
            return;
        }
        self.parents.push((child, parent));
    }

    /// The bytes of an access's key or prefix.
    pub fn key(&self, a: &PieceAccess) -> &[u8] {
        &self.bytes[a.at as usize..(a.at + a.len) as usize]
    }

    /// The declared accesses.
    pub fn accesses(&self) -> &[PieceAccess] {
        &self.accesses
    }

    /// Whether piece `p` was declared abortable.
    pub fn is_abortable(&self, p: PieceId) -> bool {
        self.abortable.get(usize::from(p)).copied().unwrap_or(false)
    }

    /// The data dependencies, as `(child, parent)`.
    pub fn dependencies(&self) -> &[(PieceId, PieceId)] {
        &self.parents
    }

    /// What is wrong with the plan, if anything.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

/// A running piece's view of the small values pieces pass on: its
/// parents' outputs, and its own.
pub struct PieceIo<'a> {
    pub(crate) inputs: &'a dyn Fn(PieceId) -> Option<&'a [u8]>,
    pub(crate) out: &'a mut Vec<u8>,
}

impl<'a> PieceIo<'a> {
    /// A view over `inputs` (a piece's output by its id) writing `out`
    /// (the serial reference executor and tests build one).
    pub fn new(inputs: &'a dyn Fn(PieceId) -> Option<&'a [u8]>, out: &'a mut Vec<u8>) -> Self {
        PieceIo { inputs, out }
    }

    /// The output of piece `p`, a parent of this piece (empty if it wrote
    /// none); `None` if `p` is not one of its parents.
    pub fn input(&self, p: PieceId) -> Option<&'a [u8]> {
        (self.inputs)(p)
    }

    /// Set this piece's output (replacing what it set before).
    pub fn output(&mut self, bytes: &[u8]) {
        self.out.clear();
        self.out.extend_from_slice(bytes);
    }
}
