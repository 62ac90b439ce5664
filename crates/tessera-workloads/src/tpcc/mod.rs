//! TPC-C (TPC Benchmark C, standard specification revision 5.11): the nine
//! tables, their population, the five transactions and the consistency
//! conditions, written once against the engine's transaction API so that
//! every protocol runs them unchanged.
//!
//! * [`schema`]: table names, big-endian composite keys, fixed-size binary
//!   rows with all the spec's columns, the two secondary indexes
//!   (CUSTOMER by last and first name, ORDER by customer);
//! * [`random`]: NURand and its C constants, last names, a-/n-strings;
//! * [`load`]: the population of clause 4.3, in parallel;
//! * [`txns`]: NewOrder, Payment, OrderStatus, Delivery, StockLevel
//!   (clauses 2.4-2.8);
//! * [`consistency`]: consistency conditions 3.3.2.1-3.3.2.12;
//! * [`extended`]: TPC-C with one transaction type added, written once for
//!   the two variants below (the six-way mix, the knobs, the workload);
//! * [`hybrid`]: TPC-C-hybrid (ERMIA's TPC-C plus TPC-CH Q2\*): the SUPPLIER,
//!   NATION and REGION tables, the Q2\* transaction and its workload;
//! * [`toppayer`]: Cai et al.'s modified TPC-C, with the bulk top-payer
//!   reward (a CUSTOMER range scan and a Payment).
//!
//! [`Tpcc`] ties them to the shared driver ([`crate::driver::Workload`]).
//! Each driver thread is a terminal with a home warehouse: thread `i` uses
//! warehouse `(i % W) + 1`, and for StockLevel district
//! `((i / W) % 10) + 1`. There is no keying or think time. docs/TPCC.md
//! lists every deviation from the spec.

pub mod consistency;
pub mod det;
pub mod extended;
pub mod hybrid;
pub mod load;
pub mod random;
pub mod schema;
pub mod toppayer;
pub mod txns;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tessera::{Database, Error, KeySet, Request, Transaction, TxResult, Worker};

use crate::driver::{Report, Workload};
pub use consistency::{check_consistency, check_database, ConsistencyReport, FoundTpcc};
use random::{nurand, uniform, NuRandC, A_C_ID, A_C_LAST, A_OL_I_ID};
use schema::{Tables, Text};
use txns::{
    CustomerSel, DeliveryInput, NewOrderInput, OrderStatusInput, PaymentInput, Recon, Scratch,
    StockLevelInput,
};

/// Districts per warehouse (clause 4.2.2).
pub const DISTRICTS: u8 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3000;
/// Orders per district at load.
pub const ORDERS: u32 = 3000;
/// The loaded orders from this id on are undelivered (in NEW-ORDER): the
/// last 900.
pub const FIRST_NEW_ORDER: u32 = 2101;
/// Items (and stock rows per warehouse).
pub const ITEMS: u32 = 100_000;
/// Most order lines per order.
pub const MAX_OL_CNT: usize = 15;
/// Largest scale factor: warehouse ids take two bytes in keys.
pub const MAX_WAREHOUSES: u32 = u16::MAX as u32;

/// The five transactions, in report order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TxnType {
    /// Clause 2.4.
    #[default]
    NewOrder,
    /// Clause 2.5.
    Payment,
    /// Clause 2.6.
    OrderStatus,
    /// Clause 2.7.
    Delivery,
    /// Clause 2.8.
    StockLevel,
}

impl TxnType {
    /// All of them, in the order of [`TpccConfig::mix`] and of reports.
    pub const ALL: [TxnType; 5] = [
        TxnType::NewOrder,
        TxnType::Payment,
        TxnType::OrderStatus,
        TxnType::Delivery,
        TxnType::StockLevel,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            TxnType::NewOrder => "new_order",
            TxnType::Payment => "payment",
            TxnType::OrderStatus => "order_status",
            TxnType::Delivery => "delivery",
            TxnType::StockLevel => "stock_level",
        }
    }
}

/// TPC-C knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpccConfig {
    /// Scale factor: number of warehouses.
    pub warehouses: u32,
    /// Percentages of NewOrder, Payment, OrderStatus, Delivery and
    /// StockLevel (in that order); they add up to 100. The spec's minimum
    /// mix (clause 5.2.3) is 45/43/4/4/4.
    pub mix: [u32; 5],
    /// Percentage of NewOrder lines supplied by a remote warehouse (spec: 1;
    /// only with more than one warehouse).
    pub remote_item_pct: u32,
    /// Percentage of Payments for a customer of a remote warehouse (spec:
    /// 15; only with more than one warehouse).
    pub remote_payment_pct: u32,
    /// Percentage of Payments and OrderStatus that select the customer by
    /// last name (spec: 60).
    pub by_last_name_pct: u32,
    /// Percentage of NewOrders rolled back with an unused item id (spec: 1).
    pub rollback_pct: u32,
    /// Seed of the population and of the NURand constants.
    pub seed: u64,
    /// PWV-coarse (the thesis's §6.5.3): NewOrder declares its STOCK rows
    /// per supply warehouse rather than per row (`--granularity coarse`;
    /// only the piece declarations of `--cc pwv` read it).
    pub coarse_stock: bool,
}

impl TpccConfig {
    /// The spec's settings for `warehouses` warehouses.
    pub fn new(warehouses: u32) -> TpccConfig {
        TpccConfig {
            warehouses,
            mix: [45, 43, 4, 4, 4],
            remote_item_pct: 1,
            remote_payment_pct: 15,
            by_last_name_pct: 60,
            rollback_pct: 1,
            seed: 0x7C_C0DE,
            coarse_stock: false,
        }
    }

    /// Parse a mix: five comma-separated percentages (NewOrder, Payment,
    /// OrderStatus, Delivery, StockLevel) adding up to 100.
    pub fn parse_mix(s: &str) -> Result<[u32; 5], String> {
        parse_percentages(s, &TxnType::ALL.map(TxnType::name))
    }

    /// A mix of any length (the variants of [`extended`] have six types)
    /// must add up to 100.
    fn check_mix(mix: &[u32]) -> Result<(), String> {
        let sum: u64 = mix.iter().map(|&x| x as u64).sum();
        if sum != 100 {
            return Err(format!(
                "the mix percentages must add up to 100, got {} = {sum}",
                mix.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" + ")
            ));
        }
        Ok(())
    }

    /// Check the knobs; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses == 0 || self.warehouses > MAX_WAREHOUSES {
            return Err(format!(
                "--warehouses must be in 1..={MAX_WAREHOUSES}, got {}",
                self.warehouses
            ));
        }
        Self::check_mix(&self.mix).map_err(|e| format!("--mix: {e}"))?;
        for (flag, v) in [
            ("--remote-item-pct", self.remote_item_pct),
            ("--remote-payment-pct", self.remote_payment_pct),
            ("--by-last-name-pct", self.by_last_name_pct),
            ("--rollback-pct", self.rollback_pct),
        ] {
            if v > 100 {
                return Err(format!("{flag} must be in 0..=100, got {v}"));
            }
        }
        Ok(())
    }
}

/// Parse a mix of `N` transaction types named `names`: `N` comma-separated
/// whole percentages adding up to 100 (the `--mix` of `bench tpcc` and of
/// its six-type variants).
pub(crate) fn parse_percentages<const N: usize>(
    s: &str,
    names: &[&str; N],
) -> Result<[u32; N], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != N {
        let count = match N {
            5 => "five".to_string(),
            6 => "six".to_string(),
            n => n.to_string(),
        };
        return Err(format!(
            "expected {count} comma-separated percentages ({}), got {} value(s) in '{s}'",
            names.join(","),
            parts.len()
        ));
    }
    let mut mix = [0u32; N];
    for (m, p) in mix.iter_mut().zip(&parts) {
        *m = p
            .parse()
            .map_err(|_| format!("'{p}' is not a whole percentage in '{s}'"))?;
    }
    TpccConfig::check_mix(&mix)?;
    Ok(mix)
}

/// A mix as the report's `mix_pct` object: each type's name (`names`, in
/// the mix's order) with its percentage.
pub(crate) fn mix_json(names: &[&str], mix: &[u32]) -> serde_json::Value {
    let mix: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .zip(mix)
        .map(|(n, m)| (n.to_string(), serde_json::json!(m)))
        .collect();
    mix.into()
}

/// The running sums of a mix: type `i` is drawn for `x < cum[i]`, `x`
/// uniform in `0..100`.
pub(crate) fn cumulative<const N: usize>(mix: [u32; N]) -> [u32; N] {
    let mut cum = [0u32; N];
    let mut acc = 0;
    for (c, m) in cum.iter_mut().zip(mix) {
        acc += m;
        *c = acc;
    }
    cum
}

/// The JSON of `tessera bench tpcc --json`: the driver's report with a
/// `consistency` object added.
#[derive(serde::Serialize)]
pub struct TpccReport<'a> {
    /// The run.
    #[serde(flatten)]
    pub run: &'a Report,
    /// The consistency check after the run.
    pub consistency: ConsistencyJson<'a>,
}

/// The `consistency` object: the [`ConsistencyReport`] (`passed`,
/// `conditions`) plus how it was used.
#[derive(serde::Serialize)]
pub struct ConsistencyJson<'a> {
    /// The check's result.
    #[serde(flatten)]
    pub report: &'a ConsistencyReport,
    /// Whether a failure fails the run (not under nocc with several
    /// threads, which has no isolation).
    pub enforced: bool,
    /// Time the check took.
    pub seconds: f64,
}

/// Milliseconds since the Unix epoch (TPC-C's "current date and time").
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The TPC-C workload.
pub struct Tpcc {
    cfg: TpccConfig,
    names: [&'static str; 5],
    /// Cumulative mix: type `i` is drawn for `x < cum[i]`, `x` uniform in
    /// `0..100`.
    cum: [u32; 5],
    /// NURand constants used by the load (only C_LAST's matters).
    c_load: NuRandC,
    /// NURand constants used by the run (clause 2.1.6.1's delta rule
    /// against `c_load`).
    c_run: NuRandC,
    tables: OnceLock<Tables>,
    /// HISTORY key origins handed to driver threads (0 is the loader).
    origins: AtomicU32,
}

/// One drawn TPC-C transaction: its type, its inputs (only the type's are
/// meaningful) and what its reconnaissance found (batch path).
#[derive(Clone, Debug, Default)]
pub struct TpccTxn {
    /// The type drawn.
    pub kind: TxnType,
    /// NewOrder's inputs.
    pub new_order: NewOrderInput,
    /// Payment's inputs.
    pub payment: PaymentInput,
    /// OrderStatus's inputs.
    pub order_status: OrderStatusInput,
    /// Delivery's inputs.
    pub delivery: DeliveryInput,
    /// StockLevel's inputs.
    pub stock_level: StockLevelInput,
    /// What reconnaissance found; empty on the interactive path.
    pub recon: Recon,
}

/// Per-thread TPC-C state: the terminal's warehouse, its RNG, the current
/// transaction and reusable buffers.
pub struct TpccThread {
    rng: SmallRng,
    w_id: u16,
    /// StockLevel's fixed district (clause 2.8.1.1).
    sl_d_id: u8,
    /// This thread's HISTORY key origin and its next sequence number.
    origin: u16,
    hist_seq: u64,
    txn: TpccTxn,
    scratch: Scratch,
}

impl TpccThread {
    /// The transaction last drawn.
    pub fn txn(&self) -> &TpccTxn {
        &self.txn
    }
}

/// A TPC-C transaction as a request: its inputs, its body (one of
/// [`txns`]), and for the batch path its declared key sets, after a
/// reconnaissance for Payment by last name, OrderStatus and Delivery.
pub struct TpccRequest<'a> {
    t: &'a Tables,
    txn: &'a mut TpccTxn,
    s: &'a mut Scratch,
}

impl<'a> TpccRequest<'a> {
    /// The request for `txn` on the loaded tables `t`, with buffers `s`.
    pub fn new(t: &'a Tables, txn: &'a mut TpccTxn, s: &'a mut Scratch) -> TpccRequest<'a> {
        TpccRequest { t, txn, s }
    }
}

impl Request for TpccRequest<'_> {
    type Output = ();
    #[inline]
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let (t, x, s) = (self.t, &*self.txn, &mut *self.s);
        match x.kind {
            TxnType::NewOrder => txns::new_order(tx, t, &x.new_order, s).map(drop),
            TxnType::Payment => txns::payment(tx, t, &x.payment, &x.recon, s).map(drop),
            TxnType::OrderStatus => {
                txns::order_status(tx, t, &x.order_status, &x.recon, s).map(drop)
            }
            TxnType::Delivery => txns::delivery(tx, t, &x.delivery, &x.recon, s).map(drop),
            TxnType::StockLevel => txns::stock_level(tx, t, &x.stock_level, s).map(drop),
        }
    }

    fn needs_reconnaissance(&self) -> bool {
        match self.txn.kind {
            TxnType::Payment => matches!(self.txn.payment.customer, CustomerSel::LastName(_)),
            TxnType::OrderStatus | TxnType::Delivery => true,
            TxnType::NewOrder | TxnType::StockLevel => false,
        }
    }

    fn reconnoiter<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let (t, x, s) = (self.t, &mut *self.txn, &mut *self.s);
        x.recon = match x.kind {
            TxnType::Payment => txns::reconnoiter_payment(tx, t, &x.payment, s)?,
            TxnType::OrderStatus => txns::reconnoiter_order_status(tx, t, &x.order_status, s)?,
            TxnType::Delivery => txns::reconnoiter_delivery(tx, t, &x.delivery)?,
            TxnType::NewOrder | TxnType::StockLevel => Recon::default(),
        };
        Ok(())
    }

    fn declare(&self, keys: &mut KeySet) -> bool {
        let (t, x) = (self.t, &*self.txn);
        match x.kind {
            TxnType::NewOrder => {
                txns::declare_new_order(t, &x.new_order, keys);
                true
            }
            TxnType::Payment => txns::declare_payment(t, &x.payment, &x.recon, keys),
            TxnType::OrderStatus => txns::declare_order_status(t, &x.order_status, &x.recon, keys),
            TxnType::Delivery => txns::declare_delivery(t, &x.delivery, &x.recon, keys),
            TxnType::StockLevel => {
                txns::declare_stock_level(t, &x.stock_level, keys);
                true
            }
        }
    }
}

impl Tpcc {
    /// The workload for these knobs (validated).
    pub fn new(cfg: TpccConfig) -> Result<Tpcc, String> {
        cfg.validate()?;
        let cum = cumulative(cfg.mix);
        // The constants come from the seed, so a run reproduces; the load's
        // C_LAST and the run's obey the delta rule.
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0xC0C0_C0C0);
        let c_load = NuRandC::for_load(&mut rng);
        let c_run = NuRandC::for_run(&c_load, &mut rng);
        Ok(Tpcc {
            cfg,
            names: TxnType::ALL.map(TxnType::name),
            cum,
            c_load,
            c_run,
            tables: OnceLock::new(),
            origins: AtomicU32::new(1),
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &TpccConfig {
        &self.cfg
    }

    /// NURand constants of the load and of the run.
    pub fn nurand_constants(&self) -> (NuRandC, NuRandC) {
        (self.c_load, self.c_run)
    }

    /// Draw the next transaction on `st` (as the driver does) and return a
    /// copy: for batches of requests ([`TpccRequest::new`]).
    pub fn draw_txn(&self, st: &mut TpccThread) -> TpccTxn {
        self.next(st);
        st.txn.clone()
    }

    /// The tables, once loaded.
    pub fn tables(&self) -> Option<Tables> {
        self.tables.get().copied()
    }

    fn t(&self) -> &Tables {
        self.tables.get().expect("TPC-C run before it was loaded")
    }

    /// A warehouse other than `home`, uniformly (`home` if there is only
    /// one).
    fn other_warehouse(&self, rng: &mut SmallRng, home: u16) -> u16 {
        let w = self.cfg.warehouses;
        if w <= 1 {
            return home;
        }
        let x = uniform(rng, 1, w - 1) as u16;
        if x >= home {
            x + 1
        } else {
            x
        }
    }

    /// A customer chosen by last name (`by_last_name_pct`) or by id (clauses
    /// 2.5.1.2, 2.6.1.2), with the run's NURand constants.
    fn customer_sel(&self, rng: &mut SmallRng) -> CustomerSel {
        if uniform(rng, 1, 100) <= self.cfg.by_last_name_pct {
            let mut b = [0u8; 16];
            let n = random::last_name(nurand(rng, A_C_LAST, self.c_run.c_last, 0, 999), &mut b);
            CustomerSel::LastName(Text::new(&b[..n]))
        } else {
            CustomerSel::Id(nurand(rng, A_C_ID, self.c_run.c_id, 1, CUSTOMERS))
        }
    }

    fn draw_new_order(&self, st: &mut TpccThread) {
        let rng = &mut st.rng;
        let inp = &mut st.txn.new_order;
        inp.w_id = st.w_id;
        inp.d_id = uniform(rng, 1, DISTRICTS as u32) as u8;
        inp.c_id = nurand(rng, A_C_ID, self.c_run.c_id, 1, CUSTOMERS);
        inp.ol_cnt = uniform(rng, 5, MAX_OL_CNT as u32) as u8;
        let rollback = uniform(rng, 1, 100) <= self.cfg.rollback_pct;
        let remote_ok = self.cfg.warehouses > 1;
        let n = inp.ol_cnt as usize;
        for (i, l) in inp.lines[..n].iter_mut().enumerate() {
            l.i_id = if rollback && i == n - 1 {
                // Clause 2.4.1.4: the last item of a rolled-back order is an
                // unused id.
                ITEMS + 1
            } else {
                nurand(rng, A_OL_I_ID, self.c_run.ol_i_id, 1, ITEMS)
            };
            l.supply_w_id = if remote_ok && uniform(rng, 1, 100) <= self.cfg.remote_item_pct {
                self.other_warehouse(rng, st.w_id)
            } else {
                st.w_id
            };
            l.quantity = uniform(rng, 1, 10) as u8;
        }
        inp.o_entry_d = now_ms();
    }

    fn draw_payment(&self, st: &mut TpccThread) {
        let rng = &mut st.rng;
        let d_id = uniform(rng, 1, DISTRICTS as u32) as u8;
        let remote = self.cfg.warehouses > 1 && uniform(rng, 1, 100) <= self.cfg.remote_payment_pct;
        let (c_w_id, c_d_id) = if remote {
            (
                self.other_warehouse(rng, st.w_id),
                uniform(rng, 1, DISTRICTS as u32) as u8,
            )
        } else {
            (st.w_id, d_id)
        };
        let customer = self.customer_sel(rng);
        let inp = &mut st.txn.payment;
        inp.w_id = st.w_id;
        inp.d_id = d_id;
        inp.c_w_id = c_w_id;
        inp.c_d_id = c_d_id;
        inp.customer = customer;
        inp.h_amount = uniform(rng, 100, 500_000) as i64;
        inp.h_date = now_ms();
        // Drawn with the inputs, so a retried attempt reuses the same key.
        inp.h_key = schema::history_key(st.origin, st.hist_seq);
        st.hist_seq += 1;
    }

    /// Draw the inputs of a `kind` transaction into `st` (after the type
    /// was drawn; the variants of [`extended`] draw their own type and call
    /// this for the five TPC-C ones).
    fn draw(&self, st: &mut TpccThread, kind: TxnType) {
        st.txn.kind = kind;
        st.txn.recon = Recon::default();
        match kind {
            TxnType::NewOrder => self.draw_new_order(st),
            TxnType::Payment => self.draw_payment(st),
            TxnType::OrderStatus => {
                let d_id = uniform(&mut st.rng, 1, DISTRICTS as u32) as u8;
                let customer = self.customer_sel(&mut st.rng);
                st.txn.order_status = OrderStatusInput {
                    w_id: st.w_id,
                    d_id,
                    customer,
                };
            }
            TxnType::Delivery => {
                st.txn.delivery = DeliveryInput {
                    w_id: st.w_id,
                    carrier_id: uniform(&mut st.rng, 1, 10) as u8,
                    delivery_d: now_ms(),
                };
            }
            TxnType::StockLevel => {
                st.txn.stock_level = StockLevelInput {
                    w_id: st.w_id,
                    d_id: st.sl_d_id,
                    threshold: uniform(&mut st.rng, 10, 20) as i32,
                };
            }
        }
    }
}

impl Workload for Tpcc {
    type Thread = TpccThread;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn txn_types(&self) -> &[&'static str] {
        &self.names
    }

    fn rows_to_load(&self) -> u64 {
        load::rows_to_load(&self.cfg)
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        let t = Tables::create(db)?;
        let t = *self.tables.get_or_init(|| t);
        load::load(db, &t, &self.cfg, &self.c_load, threads, progress)
    }

    fn thread_state(&self, thread: usize, _threads: usize, seed: u64) -> TpccThread {
        let w = self.cfg.warehouses as usize;
        TpccThread {
            rng: SmallRng::seed_from_u64(seed),
            w_id: (thread % w + 1) as u16,
            sl_d_id: ((thread / w) % DISTRICTS as usize + 1) as u8,
            origin: u16::try_from(self.origins.fetch_add(1, Ordering::Relaxed)).expect(
                "more than 65,535 TPC-C driver threads on one database (HISTORY key origins)",
            ),
            hist_seq: 0,
            txn: TpccTxn::default(),
            scratch: Scratch::default(),
        }
    }

    fn next(&self, st: &mut TpccThread) -> usize {
        let x = random::uniform(&mut st.rng, 0, 99);
        let ty = self.cum.iter().position(|&c| x < c).unwrap_or(0);
        self.draw(st, TxnType::ALL[ty]);
        ty
    }

    fn execute(&self, st: &mut TpccThread, w: &mut Worker) -> TxResult<()> {
        w.try_execute(&mut TpccRequest::new(
            self.t(),
            &mut st.txn,
            &mut st.scratch,
        ))
    }

    fn config(&self) -> serde_json::Value {
        let c = &self.cfg;
        serde_json::json!({
            "warehouses": c.warehouses,
            "mix_pct": mix_json(&self.names, &c.mix),
            "remote_item_pct": c.remote_item_pct,
            "remote_payment_pct": c.remote_payment_pct,
            "stock_granularity": if c.coarse_stock { "coarse" } else { "fine" },
            "by_last_name_pct": c.by_last_name_pct,
            "rollback_pct": c.rollback_pct,
            "seed": c.seed,
            "nurand_c": {
                "c_last_load": self.c_load.c_last,
                "c_last_run": self.c_run.c_last,
                "c_id": self.c_run.c_id,
                "ol_i_id": self.c_run.ol_i_id,
            },
            "delivery": "all 10 districts in one transaction",
            "think_time": false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parsing_and_validation() {
        assert_eq!(
            TpccConfig::parse_mix("45,43,4,4,4").unwrap(),
            [45, 43, 4, 4, 4]
        );
        assert_eq!(
            TpccConfig::parse_mix(" 100, 0,0 ,0,0").unwrap(),
            [100, 0, 0, 0, 0]
        );
        let e = TpccConfig::parse_mix("45,43,4,4,5").unwrap_err();
        assert!(e.contains("add up to 100") && e.contains("101"), "{e}");
        let e = TpccConfig::parse_mix("50,50").unwrap_err();
        assert!(e.contains("five"), "{e}");
        let e = TpccConfig::parse_mix("45,43,4,4,x").unwrap_err();
        assert!(e.contains("'x'"), "{e}");
        assert!(TpccConfig::parse_mix("45,43,4,4,-4").is_err());

        let mut c = TpccConfig::new(1);
        assert!(c.validate().is_ok());
        c.mix = [50, 50, 0, 0, 1];
        assert!(c.validate().unwrap_err().contains("--mix"));
        c.mix = [50, 50, 0, 0, 0];
        c.warehouses = 0;
        assert!(c.validate().unwrap_err().contains("--warehouses"));
        c.warehouses = 2;
        c.remote_payment_pct = 101;
        assert!(c.validate().unwrap_err().contains("--remote-payment-pct"));
        assert!(Tpcc::new(c).is_err());
    }

    #[test]
    fn the_mix_draws_each_type_in_proportion() {
        let wl = Tpcc::new(TpccConfig::new(2)).unwrap();
        let mut st = wl.thread_state(3, 4, 9);
        assert_eq!((st.w_id, st.sl_d_id), (2, 2));
        let mut n = [0u32; 5];
        for _ in 0..100_000 {
            n[wl.next(&mut st)] += 1;
        }
        for (i, &p) in wl.cfg.mix.iter().enumerate() {
            let got = n[i] as f64 / 1000.0;
            assert!((got - p as f64).abs() < 1.0, "type {i}: {got}% vs {p}%");
        }
        // Remote lines and payments only go to other warehouses.
        for _ in 0..10_000 {
            wl.draw_payment(&mut st);
            assert!(st.txn.payment.c_w_id == 1 || st.txn.payment.c_d_id == st.txn.payment.d_id);
            wl.draw_new_order(&mut st);
            for l in &st.txn.new_order.lines[..st.txn.new_order.ol_cnt as usize] {
                assert!((1..=2).contains(&l.supply_w_id));
                assert!((1..=ITEMS + 1).contains(&l.i_id));
            }
        }
        // Thread origins are distinct.
        let other = wl.thread_state(0, 4, 9);
        assert_ne!(other.origin, st.origin);
        assert!(other.origin > 0 && st.origin > 0);
    }
}
