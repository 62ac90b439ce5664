//! SmallBank, as the BOHM evaluation runs it (Faleiro's thesis, section
//! 5.4.3, Figure 5.9; the benchmark is Alomari et al.'s, ICDE 2008).
//!
//! Three tables: CUSTOMER (name to id), SAVINGS and CHECKING (id to an
//! 8-byte balance). Five transactions, each on customer ids drawn
//! uniformly, touching 1 to 3 rows (so, as in BOHM's runs, no transaction
//! reads CUSTOMER; it is loaded for completeness):
//!
//! | transaction | rows | what it does |
//! |---|---|---|
//! | Balance (read-only) | 2 | savings + checking of one customer |
//! | DepositChecking | 1 | checking += V (V in 1..=100) |
//! | TransactSaving | 1 | savings += V (V in -100..=100, not 0); rolls back if the balance would go negative |
//! | Amalgamate | 3 | move all of customer A's savings and checking into B's checking |
//! | WriteCheck | 2 | checking -= V (V in 1..=100), and 1 more as a penalty when savings + checking < V |
//!
//! The default mix is 20% each (Balance at 20% as in the thesis).
//!
//! *Amounts and balances differ from BOHM's code* (`jmfaleiro/multiversioning`,
//! which draws amounts in 0..25 and loads balances in 0..100, and never
//! rolls TransactSaving back): we follow Alomari et al.'s definition, with
//! amounts of up to 100 (TransactSaving's of either sign), balances loaded
//! at [`INITIAL_BALANCE`] and TransactSaving's overdraft rollback. With 50
//! customers Amalgamate keeps emptying savings, so many TransactSavings
//! roll back (user aborts, reported apart from conflict aborts): compare
//! committed rates with BOHM's with that in mind.
//! Contention is set by the number of customers (the thesis: 50 is high,
//! 100,000 low), and `spin_us` makes each transaction busy-wait that long
//! after its logic, as BOHM's code does (the thesis: 50 us), which
//! stretches the window in which it conflicts.
//!
//! *Conservation.* Every committed transaction reports how much money it
//! brought in or took out (Balance and Amalgamate: none); after a run,
//! [`SmallBank::check`] verifies that the sum of all balances equals the
//! initial total plus those amounts, and that no account was lost.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tessera::{Database, Error, KeySet, Request, TableId, Transaction, TxError, TxResult, Worker};

use crate::driver::Workload;

/// Each account's balance at load (savings and checking alike).
pub const INITIAL_BALANCE: i64 = 10_000;
/// Rows per loading transaction.
const LOAD_BATCH: u64 = 1_000;

/// The five transactions, in mix order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SbTxn {
    /// Read-only: savings + checking.
    Balance,
    /// checking += V.
    DepositChecking,
    /// savings += V, unless it would go negative.
    TransactSaving,
    /// A's savings and checking into B's checking.
    Amalgamate,
    /// checking -= V (+1 penalty on overdraft).
    WriteCheck,
}

impl SbTxn {
    /// All five, in mix order.
    pub const ALL: [SbTxn; 5] = [
        SbTxn::Balance,
        SbTxn::DepositChecking,
        SbTxn::TransactSaving,
        SbTxn::Amalgamate,
        SbTxn::WriteCheck,
    ];
    const NAMES: [&'static str; 5] = [
        "balance",
        "deposit_checking",
        "transact_saving",
        "amalgamate",
        "write_check",
    ];
}

/// SmallBank's knobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SmallBankConfig {
    /// Customers (accounts): the contention knob.
    pub customers: u64,
    /// Busy-wait inside each transaction, in microseconds.
    pub spin_us: u64,
    /// Percentages of Balance, DepositChecking, TransactSaving, Amalgamate,
    /// WriteCheck (adding up to 100).
    pub mix: [u32; 5],
}

impl Default for SmallBankConfig {
    fn default() -> Self {
        SmallBankConfig {
            customers: 100_000,
            spin_us: 0,
            mix: [20; 5],
        }
    }
}

impl SmallBankConfig {
    /// Check the knobs.
    pub fn validate(&self) -> Result<(), String> {
        if self.customers < 2 || self.customers > 1 << 40 {
            return Err(format!(
                "customers must be in 2..=2^40 (Amalgamate needs two), got {}",
                self.customers
            ));
        }
        if self.spin_us > 1_000_000 {
            return Err(format!(
                "spin must be at most 1,000,000 us, got {}",
                self.spin_us
            ));
        }
        // Summed wide: five u32 percentages cannot wrap to 100.
        let sum: u64 = self.mix.iter().map(|&m| m as u64).sum();
        if sum != 100 {
            return Err(format!("the mix must add up to 100, got {sum}"));
        }
        Ok(())
    }
}

/// The tables.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tables {
    customer: TableId,
    savings: TableId,
    checking: TableId,
}

/// The SmallBank workload.
pub struct SmallBank {
    cfg: SmallBankConfig,
    cum: [u32; 5],
    tables: OnceLock<Tables>,
    /// Net money committed transactions brought in (threads add theirs
    /// when they finish).
    net: Arc<AtomicI64>,
}

/// A driver thread's state: its RNG, the drawn transaction, and the money
/// its committed transactions moved in or out (added to the workload's
/// total when the state is dropped).
pub struct SmallBankThread {
    rng: SmallRng,
    req: SbRequest,
    net: i64,
    total: Arc<AtomicI64>,
}

impl Drop for SmallBankThread {
    fn drop(&mut self) {
        self.total.fetch_add(self.net, Ordering::Relaxed);
    }
}

/// One drawn transaction: the request the worker executes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct SbRequest {
    kind: SbTxn,
    a: u64,
    b: u64,
    amount: i64,
    spin: Duration,
    t: Tables,
}

/// One SmallBank transaction as an owned, loggable request (a
/// `tessera::det::Procedure`) for the deterministic protocols: the drawn
/// inputs, taken by [`SmallBank::procedure`]; its body and declared sets
/// are the interactive request's. Its output is the money it moved in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SbProc(SbRequest);

impl Request for SbProc {
    type Output = i64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        self.0.run(tx)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        self.0.declare(keys)
    }
}

/// Encoding: `kind u8 | a u64 | b u64 | amount i64 | spin_ns u64 |
/// customer, savings, checking u32` (45 bytes).
impl tessera::det::Procedure for SbProc {
    const ID: tessera::det::ProcId = 0x0200;
    const NAME: &'static str = "smallbank";

    fn encode(&self, out: &mut Vec<u8>) {
        let r = &self.0;
        let kind = SbTxn::ALL.iter().position(|&k| k == r.kind).unwrap_or(0) as u8;
        out.push(kind);
        out.extend_from_slice(&r.a.to_le_bytes());
        out.extend_from_slice(&r.b.to_le_bytes());
        out.extend_from_slice(&r.amount.to_le_bytes());
        out.extend_from_slice(&(r.spin.as_nanos() as u64).to_le_bytes());
        for t in [r.t.customer, r.t.savings, r.t.checking] {
            out.extend_from_slice(&t.as_u32().to_le_bytes());
        }
    }

    /// PWV (`--cc pwv`): a piece per account touched, as the thesis
    /// decomposes SmallBank. Balance reads the two accounts in two pieces;
    /// WriteCheck reads savings, then (a data dependency) decides and
    /// debits checking; Amalgamate empties savings and checking in two
    /// pieces and credits the sum to `b` in a third, which needs both.
    /// DepositChecking is one piece, and TransactSaving one abortable
    /// piece (its overdraft check aborts). BOHM's spin runs in the last
    /// piece.
    fn pieces(&self, plan: &mut tessera::det::PiecePlan) -> bool {
        let r = &self.0;
        let t = r.t;
        let (a, b) = (id_key(r.a), id_key(r.b));
        match r.kind {
            SbTxn::Balance => {
                let p = plan.piece(false);
                plan.read(p, t.savings, &a);
                let q = plan.piece(false);
                plan.read(q, t.checking, &a);
            }
            SbTxn::DepositChecking => {
                let p = plan.piece(false);
                plan.write(p, t.checking, &a);
            }
            SbTxn::TransactSaving => {
                let p = plan.piece(true);
                plan.write(p, t.savings, &a);
            }
            SbTxn::Amalgamate => {
                let s = plan.piece(false);
                plan.write(s, t.savings, &a);
                let c = plan.piece(false);
                plan.write(c, t.checking, &a);
                let to = plan.piece(false);
                plan.write(to, t.checking, &b);
                plan.after(to, s);
                plan.after(to, c);
            }
            SbTxn::WriteCheck => {
                let s = plan.piece(false);
                plan.read(s, t.savings, &a);
                let c = plan.piece(false);
                plan.write(c, t.checking, &a);
                plan.after(c, s);
            }
        }
        true
    }

    fn run_piece(
        &self,
        i: u16,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
    ) -> TxResult<()> {
        let r = &self.0;
        let t = r.t;
        let (a, b, v) = (r.a, r.b, r.amount);
        let input = |io: &tessera::det::PieceIo<'_>, p: u16| -> TxResult<i64> {
            balance_of(io.input(p).unwrap_or_default())
        };
        let last = match (r.kind, i) {
            (SbTxn::Balance, 0) => {
                std::hint::black_box(read(tx, t.savings, a)?);
                false
            }
            (SbTxn::Balance, _) => {
                std::hint::black_box(read(tx, t.checking, a)?);
                true
            }
            // One piece: the whole transaction's logic.
            (SbTxn::DepositChecking | SbTxn::TransactSaving, _) => {
                r.body(tx)?;
                true
            }
            (SbTxn::Amalgamate, 0 | 1) => {
                let table = if i == 0 { t.savings } else { t.checking };
                let x = read(tx, table, a)?;
                write(tx, table, a, 0)?;
                io.output(&x.to_le_bytes());
                false
            }
            (SbTxn::Amalgamate, _) => {
                let moved = input(io, 0)? + input(io, 1)?;
                let cb = read(tx, t.checking, b)?;
                write(tx, t.checking, b, cb + moved)?;
                true
            }
            (SbTxn::WriteCheck, 0) => {
                io.output(&read(tx, t.savings, a)?.to_le_bytes());
                false
            }
            (SbTxn::WriteCheck, _) => {
                let s = input(io, 0)?;
                let c = read(tx, t.checking, a)?;
                let out = check_debit(s, c, v);
                write(tx, t.checking, a, c - out)?;
                io.output(&out.to_le_bytes());
                true
            }
        };
        if last {
            spin(r.spin);
        }
        Ok(())
    }

    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<i64> {
        let r = &self.0;
        Ok(match r.kind {
            SbTxn::Balance | SbTxn::Amalgamate => 0,
            SbTxn::DepositChecking | SbTxn::TransactSaving => r.amount,
            SbTxn::WriteCheck => -balance_of(outputs[1])?,
        })
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        let b: &[u8; 45] = b
            .try_into()
            .map_err(|_| format!("smallbank arguments of {} bytes, not 45", b.len()))?;
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let t_at =
            |i: usize| TableId::from_u32(u32::from_le_bytes(b[i..i + 4].try_into().unwrap()));
        let kind = *SbTxn::ALL
            .get(b[0] as usize)
            .ok_or_else(|| format!("smallbank transaction kind {}", b[0]))?;
        Ok(SbProc(SbRequest {
            kind,
            a: u64_at(1),
            b: u64_at(9),
            amount: u64_at(17) as i64,
            spin: Duration::from_nanos(u64_at(25)),
            t: Tables {
                customer: t_at(33),
                savings: t_at(37),
                checking: t_at(41),
            },
        }))
    }
}

fn id_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

fn name_of(id: u64) -> String {
    format!("customer-{id:012}")
}

fn balance_of(v: &[u8]) -> TxResult<i64> {
    let b: [u8; 8] = v.try_into().map_err(|_| {
        TxError::Error(Error::InvalidArgument(format!(
            "SmallBank: a balance of {} bytes (8 expected)",
            v.len()
        )))
    })?;
    Ok(i64::from_le_bytes(b))
}

/// Read the balance of account `id` in `t`; it must exist.
fn read<T: Transaction>(tx: &mut T, t: TableId, id: u64) -> TxResult<i64> {
    match tx.get(t, &id_key(id))? {
        Some(v) => balance_of(v),
        // Under OCC an inconsistent read; accounts are never deleted.
        None => Err(TxError::Conflict(tessera::ConflictReason::Stale)),
    }
}

fn write<T: Transaction>(tx: &mut T, t: TableId, id: u64, bal: i64) -> TxResult<()> {
    tx.put(t, &id_key(id), &bal.to_le_bytes())
}

/// WriteCheck's debit of a check of `v` against savings `s` and checking
/// `c`: one more than the check if the two cannot cover it (the penalty).
fn check_debit(s: i64, c: i64, v: i64) -> i64 {
    if s + c < v {
        v + 1
    } else {
        v
    }
}

fn spin(d: Duration) {
    if d.is_zero() {
        return;
    }
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

impl Request for SbRequest {
    /// The money the transaction brought in (negative: took out).
    type Output = i64;

    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        let moved = self.body(tx)?;
        // BOHM's SmallBank spins after the transaction's logic, every read
        // and write done (its `do_spin`), so a lock-based protocol holds
        // every lock through the spin.
        spin(self.spin);
        Ok(moved)
    }

    /// Every SmallBank transaction knows its rows from its inputs (as in
    /// BOHM's evaluation): the accounts of `a` (and `b`), read or written.
    fn declare(&self, keys: &mut KeySet) -> bool {
        let t = self.t;
        let (a, b) = (id_key(self.a), id_key(self.b));
        match self.kind {
            SbTxn::Balance => {
                keys.read(t.savings, &a);
                keys.read(t.checking, &a);
            }
            SbTxn::DepositChecking => keys.write(t.checking, &a),
            SbTxn::TransactSaving => keys.write(t.savings, &a),
            SbTxn::Amalgamate => {
                keys.write(t.savings, &a);
                keys.write(t.checking, &a);
                keys.write(t.checking, &b);
            }
            SbTxn::WriteCheck => {
                keys.read(t.savings, &a);
                keys.write(t.checking, &a);
            }
        }
        true
    }
}

impl SbRequest {
    /// The transaction's logic: the money it brought in.
    fn body<T: Transaction>(&self, tx: &mut T) -> TxResult<i64> {
        let t = self.t;
        let (a, b, v) = (self.a, self.b, self.amount);
        match self.kind {
            SbTxn::Balance => {
                let s = read(tx, t.savings, a)?;
                let c = read(tx, t.checking, a)?;
                std::hint::black_box(s + c);
                Ok(0)
            }
            SbTxn::DepositChecking => {
                let c = read(tx, t.checking, a)?;
                write(tx, t.checking, a, c + v)?;
                Ok(v)
            }
            SbTxn::TransactSaving => {
                let s = read(tx, t.savings, a)?;
                // Alomari et al.'s definition rolls back an overdraft (a
                // user abort, reported as such); BOHM's code adds the
                // amount unconditionally. Amalgamate empties savings, so
                // with few customers many of these roll back.
                if s + v < 0 {
                    return tx.user_abort();
                }
                write(tx, t.savings, a, s + v)?;
                Ok(v)
            }
            SbTxn::Amalgamate => {
                let s = read(tx, t.savings, a)?;
                let c = read(tx, t.checking, a)?;
                let cb = read(tx, t.checking, b)?;
                write(tx, t.savings, a, 0)?;
                write(tx, t.checking, a, 0)?;
                write(tx, t.checking, b, cb + s + c)?;
                Ok(0)
            }
            SbTxn::WriteCheck => {
                let s = read(tx, t.savings, a)?;
                let c = read(tx, t.checking, a)?;
                let out = check_debit(s, c, v);
                write(tx, t.checking, a, c - out)?;
                Ok(-out)
            }
        }
    }
}

/// The outcome of [`SmallBank::check`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Conservation {
    /// Accounts found in SAVINGS and in CHECKING.
    pub savings_rows: u64,
    /// See `savings_rows`.
    pub checking_rows: u64,
    /// Money at load.
    pub initial_total: i64,
    /// Net money committed transactions brought in.
    pub net_committed: i64,
    /// Money found.
    pub total: i64,
    /// `total == initial_total + net_committed` and no account is missing.
    pub passed: bool,
}

impl Conservation {
    /// One line for the report.
    pub fn summary(&self) -> String {
        if self.passed {
            format!(
                "conservation: holds ({} accounts; {} = {} initial {:+} committed)",
                self.savings_rows, self.total, self.initial_total, self.net_committed
            )
        } else {
            format!(
                "conservation: FAILED: {} savings and {} checking accounts, total {} but {} initial {:+} committed = {}",
                self.savings_rows,
                self.checking_rows,
                self.total,
                self.initial_total,
                self.net_committed,
                self.initial_total + self.net_committed
            )
        }
    }
}

impl SmallBank {
    /// The current transaction of `st` (drawn by `Workload::next`) as an
    /// owned, loggable request.
    pub fn procedure(&self, st: &SmallBankThread) -> SbProc {
        SbProc(st.req)
    }

    /// The workload for these knobs (validated).
    pub fn new(cfg: SmallBankConfig) -> Result<SmallBank, String> {
        cfg.validate()?;
        let mut cum = [0u32; 5];
        let mut acc = 0;
        for (c, m) in cum.iter_mut().zip(cfg.mix) {
            acc += m;
            *c = acc;
        }
        Ok(SmallBank {
            cfg,
            cum,
            tables: OnceLock::new(),
            net: Arc::new(AtomicI64::new(0)),
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &SmallBankConfig {
        &self.cfg
    }

    /// Net money that committed transactions brought in so far (threads
    /// add theirs when the run ends).
    pub fn net_committed(&self) -> i64 {
        self.net.load(Ordering::Relaxed)
    }

    /// After a run: every account is there and the money adds up.
    pub fn check(&self, db: &Database) -> Result<Conservation, Error> {
        let t = *self.tables.get().ok_or_else(|| {
            Error::InvalidArgument("SmallBank checked before it was loaded".into())
        })?;
        let mut w = db.worker()?;
        let savings = crate::driver::table_values(&mut w, t.savings)?;
        let checking = crate::driver::table_values(&mut w, t.checking)?;
        self.conservation(&savings, &checking, self.net_committed())
    }

    /// The conservation check over the balances of every savings and
    /// checking account (however they were read: the deterministic
    /// engines dump their own tables), given the net money that committed
    /// transactions brought in.
    pub fn conservation<V: AsRef<[u8]>>(
        &self,
        savings: &[V],
        checking: &[V],
        net_committed: i64,
    ) -> Result<Conservation, Error> {
        let sum = |rows: &[V]| -> Result<i64, Error> {
            rows.iter()
                .try_fold(0i64, |acc, v| match balance_of(v.as_ref()) {
                    Ok(b) => Ok(acc + b),
                    Err(TxError::Error(e)) => Err(e),
                    Err(e) => Err(Error::InvalidArgument(format!("SmallBank: {e}"))),
                })
        };
        let (sn, cn) = (savings.len() as u64, checking.len() as u64);
        let total = sum(savings)? + sum(checking)?;
        let initial_total = 2 * INITIAL_BALANCE * self.cfg.customers as i64;
        Ok(Conservation {
            savings_rows: sn,
            checking_rows: cn,
            initial_total,
            net_committed,
            total,
            passed: sn == self.cfg.customers
                && cn == self.cfg.customers
                && total == initial_total + net_committed,
        })
    }
}

impl Workload for SmallBank {
    type Thread = SmallBankThread;

    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn txn_types(&self) -> &[&'static str] {
        &SbTxn::NAMES
    }

    fn rows_to_load(&self) -> u64 {
        3 * self.cfg.customers
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        let get = |name: &str| match db.table(name) {
            Ok(t) => Ok(t),
            Err(_) => db.create_table(name),
        };
        let t = Tables {
            customer: get("customer")?,
            savings: get("savings")?,
            checking: get("checking")?,
        };
        let t = *self.tables.get_or_init(|| t);
        let n = self.cfg.customers;
        let bal = INITIAL_BALANCE.to_le_bytes();
        crate::driver::load_rows(
            db,
            n,
            threads,
            LOAD_BATCH,
            &|rows| progress(3 * rows),
            |tx, id, _| {
                Ok(tx.insert(t.customer, name_of(id).as_bytes(), &id_key(id))?
                    && tx.insert(t.savings, &id_key(id), &bal)?
                    && tx.insert(t.checking, &id_key(id), &bal)?)
            },
            &|id| format!("SmallBank: customer {id} exists already: load into an empty database"),
        )?;
        Ok(3 * n)
    }

    fn thread_state(&self, _thread: usize, _threads: usize, seed: u64) -> SmallBankThread {
        SmallBankThread {
            rng: SmallRng::seed_from_u64(seed),
            req: SbRequest {
                kind: SbTxn::Balance,
                a: 0,
                b: 1,
                amount: 0,
                spin: Duration::from_micros(self.cfg.spin_us),
                t: *self
                    .tables
                    .get()
                    .expect("SmallBank run before it was loaded"),
            },
            net: 0,
            total: Arc::clone(&self.net),
        }
    }

    fn next(&self, st: &mut SmallBankThread) -> usize {
        let x = st.rng.gen_range(0..100u32);
        let ty = self.cum.iter().position(|&c| x < c).unwrap_or(0);
        let n = self.cfg.customers;
        let r = &mut st.req;
        r.kind = SbTxn::ALL[ty];
        r.a = st.rng.gen_range(0..n);
        r.b = loop {
            let b = st.rng.gen_range(0..n);
            if b != r.a {
                break b;
            }
        };
        r.amount = match r.kind {
            SbTxn::TransactSaving => {
                let v = st.rng.gen_range(1..=100i64);
                if st.rng.gen_bool(0.5) {
                    v
                } else {
                    -v
                }
            }
            _ => st.rng.gen_range(1..=100i64),
        };
        ty
    }

    fn execute(&self, st: &mut SmallBankThread, w: &mut Worker) -> TxResult<()> {
        let moved = w.try_execute(&mut st.req)?;
        st.net += moved;
        Ok(())
    }

    fn config(&self) -> serde_json::Value {
        let c = &self.cfg;
        let mix: serde_json::Map<String, serde_json::Value> = SbTxn::NAMES
            .iter()
            .zip(c.mix)
            .map(|(n, m)| (n.to_string(), serde_json::json!(m)))
            .collect();
        serde_json::json!({
            "customers": c.customers,
            "spin_us": c.spin_us,
            "mix": mix,
            "initial_balance": INITIAL_BALANCE,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{self, RunConfig};
    use tessera::{Options, Protocol};

    fn run(p: Protocol, customers: u64, threads: usize) -> (Conservation, u64) {
        let wl = SmallBank::new(SmallBankConfig {
            customers,
            ..SmallBankConfig::default()
        })
        .unwrap();
        let db = Database::open(Options::in_memory().protocol(p).workers(4)).unwrap();
        let cfg = RunConfig {
            threads,
            load_threads: 2,
            seconds: 0.4,
            warmup: 0.0,
            quiet: true,
            seed: 7,
            backoff: true,
            retry: true,
            durability: tessera::Durability::None,
            declared: false,
            txns: None,
        };
        let rep = driver::bench(&db, &wl, &cfg).unwrap();
        (wl.check(&db).unwrap(), rep.committed)
    }

    /// Every isolated protocol of the list conserves money under high
    /// contention (50 customers, 3 threads); the check is not vacuous:
    /// money moved.
    #[test]
    fn money_is_conserved_under_every_isolated_protocol() {
        for p in Protocol::INTERACTIVE
            .into_iter()
            .filter(|p| p.caps().serializable || p.caps().snapshot_reads)
        {
            let (c, committed) = run(p, 50, 3);
            assert!(c.passed, "{p}: {}", c.summary());
            assert!(committed > 100, "{p}: only {committed} commits");
            assert_ne!(c.net_committed, 0, "{p}: no money moved");
        }
    }

    /// The check catches lost money: a write behind the workload's back.
    #[test]
    fn the_check_catches_a_changed_balance() {
        let (c, _) = run(Protocol::Silo, 100, 1);
        assert!(c.passed, "{}", c.summary());
        let wl = SmallBank::new(SmallBankConfig {
            customers: 10,
            ..SmallBankConfig::default()
        })
        .unwrap();
        let db = Database::open(Options::in_memory().workers(2)).unwrap();
        wl.load(&db, 1, &|_| {}).unwrap();
        assert!(wl.check(&db).unwrap().passed);
        let t = *wl.tables.get().unwrap();
        db.worker()
            .unwrap()
            .run(|tx| tx.put(t.checking, &id_key(3), &5i64.to_le_bytes()))
            .unwrap();
        let c = wl.check(&db).unwrap();
        assert!(!c.passed, "{}", c.summary());
        db.worker()
            .unwrap()
            .run(|tx| tx.delete(t.savings, &id_key(4)).map(drop))
            .unwrap();
        assert_eq!(wl.check(&db).unwrap().savings_rows, 9);
    }

    #[test]
    fn bad_knobs_are_rejected() {
        for cfg in [
            SmallBankConfig {
                customers: 1,
                ..SmallBankConfig::default()
            },
            SmallBankConfig {
                mix: [20, 20, 20, 20, 10],
                ..SmallBankConfig::default()
            },
            SmallBankConfig {
                spin_us: 2_000_000,
                ..SmallBankConfig::default()
            },
        ] {
            assert!(SmallBank::new(cfg).is_err());
        }
    }
}
