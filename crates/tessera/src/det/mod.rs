//! The deterministic substrate (Faleiro's thesis, chapter 6's common ground;
//! digest 6.1): requests that can be logged before they run, the
//! sequencer that orders them into batches, the input log that makes each
//! batch durable, and the per-batch release of outcomes to the submitters.
//!
//! A deterministic protocol (BOHM, and later PWV and lazy evaluation) does
//! not run closures: a client submits a [`Procedure`], a whole transaction
//! whose key sets it can declare before it runs. The sequencer gives it a
//! timestamp, its position in the input log, and cuts the log into
//! batches. A batch is logged (one `Input` block of the redo log's segment
//! format, synced once: group commit), executed by the protocol, and only
//! then are its outcomes released. Recovery replays the logged batches
//! through the same execution path, so the state after a crash is the one
//! a serial execution in timestamp order gives.
//!
//! Nondeterminism is captured before logging: everything a procedure's
//! body may depend on besides the database (clock readings, random draws)
//! is in its arguments, fixed by the client, and encoded with them.
//!
//! This module knows no protocol. `serial::SerialExecutor` (an engine internal) runs batches
//! one transaction after another on a worker of any interactive protocol:
//! the reference a deterministic protocol's state is compared with, and
//! the executor of the substrate's own tests.

pub(crate) mod pieces;
internal_modules! {
    checkpoint;
    expunge;
    input;
    sequencer;
    serial;
}

use std::any::Any;
use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, TxResult};
use crate::request::{KeySet, Request};
use crate::txn::Txn;

pub use crate::cc::bohm::{BohmStats, ReplayStats};
pub use pieces::{PieceAccess, PieceId, PieceIo, PiecePlan};
pub(crate) use sequencer::Sequencer;
pub use sequencer::{Receipt, SequencerConfig};

/// A procedure's identifier in the input log (unique within a
/// [`Procedures`] registry).
pub type ProcId = u16;

/// The most bytes one procedure's encoded arguments may take.
pub const MAX_ARGS_LEN: usize = 1 << 20;

/// A request that a deterministic protocol can log and replay: a
/// [`Request`] (body, declared sets, optional reconnaissance) with an id
/// and an encoding of its arguments.
///
/// `decode(encode(p))` must give a procedure whose body does exactly what
/// `p`'s does: replay depends on it.
///
/// ```
/// use tessera::det::{ProcId, Procedure};
/// use tessera::{KeySet, Request, TableId, Transaction, TxResult};
///
/// /// Add `by` to the 8-byte counter at `key`.
/// struct Bump { t: TableId, key: u64, by: u64 }
///
/// impl Request for Bump {
///     type Output = u64;
///     fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
///         let k = self.key.to_be_bytes();
///         let old = tx.get(self.t, &k)?.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
///         tx.put(self.t, &k, &(old + self.by).to_le_bytes())?;
///         Ok(old + self.by)
///     }
///     fn declare(&self, keys: &mut KeySet) -> bool {
///         keys.write(self.t, &self.key.to_be_bytes());
///         true
///     }
/// }
///
/// impl Procedure for Bump {
///     const ID: ProcId = 1;
///     const NAME: &'static str = "bump";
///     fn encode(&self, out: &mut Vec<u8>) {
///         out.extend_from_slice(&self.t.as_u32().to_le_bytes());
///         out.extend_from_slice(&self.key.to_le_bytes());
///         out.extend_from_slice(&self.by.to_le_bytes());
///     }
///     fn decode(b: &[u8]) -> Result<Self, String> {
///         let b: &[u8; 20] = b.try_into().map_err(|_| format!("{} bytes, not 20", b.len()))?;
///         Ok(Bump {
///             t: TableId::from_u32(u32::from_le_bytes(b[0..4].try_into().unwrap())),
///             key: u64::from_le_bytes(b[4..12].try_into().unwrap()),
///             by: u64::from_le_bytes(b[12..20].try_into().unwrap()),
///         })
///     }
/// }
/// ```
///
/// A procedure may also decompose itself into pieces for piece-wise
/// visibility (`--cc pwv`; see [`PiecePlan`]): [`Procedure::pieces`],
/// [`Procedure::run_piece`] and [`Procedure::pieces_output`]. Pieces of one
/// transaction run on several threads at once, hence `Sync`.
pub trait Procedure: Request + Send + Sync + Sized + 'static
where
    Self::Output: Send + 'static,
{
    /// The id written to the input log.
    const ID: ProcId;
    /// A name for messages and reports.
    const NAME: &'static str;
    /// Append the arguments (every input of the body, nondeterministic
    /// ones included) to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// The procedure whose arguments `encode` wrote as `bytes`; a message
    /// saying what is wrong otherwise ([`ArgReader`] reads them in order
    /// and refuses short or overlong input).
    fn decode(bytes: &[u8]) -> Result<Self, String>;

    /// Declare the transaction's pieces in `plan` and return `true`; the
    /// default, `false`, runs the whole body as one piece (see [`PiecePlan`]).
    fn pieces(&self, plan: &mut PiecePlan) -> bool {
        let _ = plan;
        false
    }

    /// Run piece `i` on `tx`, which reaches only the piece's declared keys;
    /// `io` holds its parents' outputs and takes its own. An abortable
    /// piece aborts the transaction with `tx.user_abort()`.
    fn run_piece(&self, i: PieceId, tx: &mut Txn<'_>, io: &mut PieceIo<'_>) -> TxResult<()> {
        let _ = (tx, io);
        Err(crate::error::TxError::Error(Error::InvalidArgument(
            format!(
                "{}: piece {i} run, but the procedure declares no pieces",
                Self::NAME
            ),
        )))
    }

    /// The transaction's output, once every piece has run and it commits;
    /// `outputs[p]` is piece `p`'s output.
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<Self::Output> {
        let _ = outputs;
        Err(crate::error::TxError::Error(Error::InvalidArgument(
            format!("{}: no output made from pieces", Self::NAME),
        )))
    }

    /// Lazy evaluation (`--cc lazy`, the thesis's chapter 4): the
    /// **now-phase**, run at once and in log order. It makes every check
    /// that decides commit or abort (abort with `tx.user_abort()`), and
    /// may read and write (the hot read-modify-writes belong here); then it
    /// returns [`NowPhase::Ended`] with the output the client gets: the
    /// thesis's `EndNowPhase()`. Every declared write key it did not write
    /// gets a **sticky** (a version that stands for the value the rest of
    /// the body will compute), the transaction commits, and
    /// [`Procedure::later_phase`] runs when some reader needs one of those
    /// values (or a substantiation worker gets to it).
    ///
    /// The default returns [`NowPhase::Eager`] without touching `tx`: the
    /// procedure has no end of now-phase and runs whole, at once (its
    /// `run`), as under any other protocol. Eager and lazy procedures mix
    /// freely.
    ///
    /// The later phase cannot abort: whatever would abort belongs to the
    /// now-phase (the commit was promised when it ended).
    fn now_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<NowPhase<Self::Output>> {
        let _ = tx;
        Ok(NowPhase::Eager)
    }

    /// The rest of a body whose [`Procedure::now_phase`] ended: it resumes
    /// where the now-phase stopped (`self` keeps what the now-phase
    /// computed), at the transaction's place in the log (it reads the
    /// values as they were then), and writes the keys left sticky. It may
    /// read what its own now-phase wrote; it may not write those keys
    /// again. It reads only keys its [`Request::declare`] covers (a
    /// declared read, a write that is not blind, a declared range):
    /// anything else fails with an error, since a producer whose stickies
    /// were overwritten blindly may have been skipped as unneeded.
    fn later_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<()> {
        let _ = tx;
        Err(crate::error::TxError::Error(Error::InvalidArgument(
            format!(
                "{}: a now-phase ended but there is no later phase",
                Self::NAME
            ),
        )))
    }
}

/// How a lazy transaction's now-phase ended (see [`Procedure::now_phase`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NowPhase<T> {
    /// No end of now-phase: run the whole body now.
    Eager,
    /// `EndNowPhase()`: committed, with this output for the client; the
    /// later phase runs when its values are needed.
    Ended(T),
}

/// Reads a procedure's encoded arguments front to back, for
/// [`Procedure::decode`]: a read past the end, or bytes left over at
/// [`ArgReader::finish`], is an error naming the procedure (`what`) and
/// the offset, so a damaged input log is refused, never misread.
pub struct ArgReader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

macro_rules! arg_ints {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("The next `", stringify!($t), "`, little-endian.")]
        pub fn $name(&mut self) -> Result<$t, String> {
            let b = self.take(std::mem::size_of::<$t>())?;
            Ok(<$t>::from_le_bytes(b.try_into().expect("the size asked for")))
        }
    )*};
}

impl<'a> ArgReader<'a> {
    /// A reader of `bytes`, the arguments of the procedure named `what`.
    pub fn new(what: &'static str, bytes: &'a [u8]) -> ArgReader<'a> {
        ArgReader { bytes, at: 0, what }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let s = self
            .bytes
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| {
                format!(
                    "{} arguments end at byte {} of {}",
                    self.what,
                    self.at,
                    self.bytes.len()
                )
            })?;
        self.at += n;
        Ok(s)
    }

    arg_ints!(u8: u8, u16: u16, u32: u32, u64: u64, i64: i64);

    /// Every byte was read (an error says how many were left).
    pub fn finish(self) -> Result<(), String> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the {} arguments", self.what)),
        }
    }
}

/// The object-safe form of a [`Procedure`] that the runtime holds: the
/// body runs on a [`Txn`] (one indirect call per operation, as closures
/// do) and its output is boxed.
pub trait DynProcedure: Send + Sync {
    /// [`Procedure::ID`].
    fn id(&self) -> ProcId;
    /// [`Procedure::NAME`].
    fn name(&self) -> &'static str;
    /// [`Procedure::encode`].
    fn encode(&self, out: &mut Vec<u8>);
    /// [`Request::declare`].
    fn declare(&self, keys: &mut KeySet) -> bool;
    /// [`Request::needs_reconnaissance`].
    fn needs_reconnaissance(&self) -> bool;
    /// [`Request::reconnoiter`].
    fn reconnoiter(&mut self, tx: &mut Txn<'_>) -> TxResult<()>;
    /// [`Request::run`], the output boxed.
    fn run(&mut self, tx: &mut Txn<'_>) -> TxResult<Box<dyn Any + Send>>;
    /// [`Procedure::pieces`].
    fn pieces(&self, plan: &mut PiecePlan) -> bool;
    /// [`Procedure::run_piece`].
    fn run_piece(&self, i: PieceId, tx: &mut Txn<'_>, io: &mut PieceIo<'_>) -> TxResult<()>;
    /// [`Procedure::pieces_output`], boxed.
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<Box<dyn Any + Send>>;
    /// [`Procedure::now_phase`], the output boxed.
    fn now_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<NowPhase<Box<dyn Any + Send>>>;
    /// [`Procedure::later_phase`].
    fn later_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<()>;
}

impl<P: Procedure> DynProcedure for P
where
    P::Output: Send + 'static,
{
    fn id(&self) -> ProcId {
        P::ID
    }
    fn name(&self) -> &'static str {
        P::NAME
    }
    fn encode(&self, out: &mut Vec<u8>) {
        Procedure::encode(self, out)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        Request::declare(self, keys)
    }
    fn needs_reconnaissance(&self) -> bool {
        Request::needs_reconnaissance(self)
    }
    fn reconnoiter(&mut self, tx: &mut Txn<'_>) -> TxResult<()> {
        Request::reconnoiter(self, tx)
    }
    fn run(&mut self, tx: &mut Txn<'_>) -> TxResult<Box<dyn Any + Send>> {
        Request::run(self, tx).map(|o| Box::new(o) as Box<dyn Any + Send>)
    }
    fn pieces(&self, plan: &mut PiecePlan) -> bool {
        Procedure::pieces(self, plan)
    }
    fn run_piece(&self, i: PieceId, tx: &mut Txn<'_>, io: &mut PieceIo<'_>) -> TxResult<()> {
        Procedure::run_piece(self, i, tx, io)
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<Box<dyn Any + Send>> {
        Procedure::pieces_output(self, outputs).map(|o| Box::new(o) as Box<dyn Any + Send>)
    }
    fn now_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<NowPhase<Box<dyn Any + Send>>> {
        Ok(match Procedure::now_phase(self, tx)? {
            NowPhase::Eager => NowPhase::Eager,
            NowPhase::Ended(o) => NowPhase::Ended(Box::new(o) as Box<dyn Any + Send>),
        })
    }
    fn later_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<()> {
        Procedure::later_phase(self, tx)
    }
}

/// What a deterministic transaction came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// It committed with this output.
    Committed(T),
    /// Its logic rolled it back (a user abort); nothing it wrote remains.
    /// The only abort a deterministic protocol has, besides a stale
    /// reconnaissance, which is redone, not reported.
    Aborted,
}

type Decoder = fn(&[u8]) -> Result<Box<dyn DynProcedure>, String>;

fn decode_boxed<P: Procedure>(b: &[u8]) -> Result<Box<dyn DynProcedure>, String>
where
    P::Output: Send + 'static,
{
    P::decode(b).map(|p| Box::new(p) as Box<dyn DynProcedure>)
}

/// The procedures a deterministic database knows: id to decoder, so that
/// recovery can turn the input log back into requests.
#[derive(Clone, Default)]
pub struct Procedures {
    decoders: HashMap<ProcId, (&'static str, Decoder)>,
}

impl fmt::Debug for Procedures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<_> = self.decoders.iter().map(|(id, (n, _))| (*id, *n)).collect();
        ids.sort_unstable();
        f.debug_struct("Procedures").field("known", &ids).finish()
    }
}

impl Procedures {
    /// No procedures.
    pub fn new() -> Procedures {
        Procedures::default()
    }

    /// Add `P`; an error if its id is taken by another procedure.
    pub fn register<P: Procedure>(mut self) -> Result<Procedures, Error>
    where
        P::Output: Send + 'static,
    {
        if let Some((other, _)) = self.decoders.get(&P::ID) {
            if *other != P::NAME {
                return Err(Error::InvalidArgument(format!(
                    "procedure id {} is taken by '{other}', cannot register '{}'",
                    P::ID,
                    P::NAME
                )));
            }
        }
        self.decoders.insert(P::ID, (P::NAME, decode_boxed::<P>));
        Ok(self)
    }

    /// Whether `id` is known.
    pub fn knows(&self, id: ProcId) -> bool {
        self.decoders.contains_key(&id)
    }

    /// The procedure logged as `id` with arguments `bytes`.
    pub fn decode(&self, id: ProcId, bytes: &[u8]) -> Result<Box<dyn DynProcedure>, Error> {
        let (name, dec) = self.decoders.get(&id).ok_or_else(|| {
            Error::Corrupt(format!(
                "the input log names procedure id {id}, which is not registered (Procedures::register)"
            ))
        })?;
        dec(bytes).map_err(|e| {
            Error::Corrupt(format!(
                "the input log's arguments of procedure '{name}' (id {id}) do not decode: {e}"
            ))
        })
    }
}

#[cfg(test)]
mod tests;
