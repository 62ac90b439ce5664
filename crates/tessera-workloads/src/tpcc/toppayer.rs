//! Cai, Guo and Zhou's modified TPC-C (the book's section 3.5.1): TPC-C with
//! a bulk transaction added, the *top payer* reward, built to give TPC-C
//! long scans that conflict with ordinary traffic.
//!
//! The book specifies: a transaction that scans a range of the CUSTOMER
//! table in a randomly selected district of its own warehouse to find the
//! customer "who made the highest total payment from a certain start time",
//! and rewards that customer by adding money to their balance: one scan and
//! three updates (customer, district, warehouse). Terminals equal
//! warehouses; bulk scans are local only, so they conflict with remote
//! Payments; the mix is Payment 40, NewOrder 40, bulk 10, OrderStatus 4,
//! Delivery 4, StockLevel 2. The book's "85% local, 15% remote" for the
//! ordinary transactions is TPC-C's own rule for Payment's customer (kept,
//! `--remote-payment-pct 15`); NewOrder's supply warehouses stay at the
//! spec's 1% remote (`--remote-item-pct`).
//!
//! What the book leaves open, and the choices here (docs/TPCC.md repeats
//! them):
//!
//! * **The payment measure**: C_YTD_PAYMENT, the customer's payments since
//!   the start of the year (TPC-C's only per-customer payment total; the
//!   "start time" is the population's). Ties go to the smallest C_ID.
//! * **The range**: `scan` consecutive customer ids (default 600, one of the
//!   book's TPC-C logical ranges) from a uniform start in the district,
//!   read with a column slice (only C_YTD_PAYMENT crosses the API).
//! * **The reward**: a Payment of [`REWARD_CENTS`] to that customer by its
//!   own warehouse and district, with its HISTORY row: W_YTD, D_YTD and the
//!   customer's C_BALANCE, C_YTD_PAYMENT and C_PAYMENT_CNT change exactly as
//!   a Payment changes them. These are the book's three updates; the
//!   HISTORY row is added so that the TPC-C consistency conditions (8, 9,
//!   10 and 12 tie the YTD columns and balances to HISTORY) still hold after
//!   a run, and are checked as after every TPC-C run.
//!
//! [`TpccTopPayer`] reuses [`Tpcc`](super::Tpcc) for the five TPC-C
//! transactions and adds the top payer ([`TopPayer`]) through
//! [`super::extended`], as TPC-C-hybrid adds Q2\*. It runs on the interactive
//! protocols; a deterministic one would have to declare the whole CUSTOMER
//! table (the payee is known only after the scan), and is refused.

use std::ops::Bound;

use rand::Rng;
use tessera::{Error, Request, ScanOptions, Transaction, TxResult, Worker};

use super::extended::{ExtendedConfig, ExtendedThread, ExtendedTxn, ExtraTxn, TpccExtended};
use super::random::uniform;
use super::schema::{customer_key, history_key, Customer, Tables};
use super::txns::{self, vanished, CustomerSel, PaymentInput, PaymentOutput, Recon, Scratch};
use super::{now_ms, TpccThread, TxnType, CUSTOMERS, DISTRICTS};

/// The reward, in cents ($10), paid as a Payment of this amount.
pub const REWARD_CENTS: i64 = 1_000;

/// Customers one top-payer scan reads by default: 600, the size of the
/// book's TPC-C logical ranges (2,000 ranges over 40 warehouses' customers).
pub const DEFAULT_SCAN: u32 = 600;

/// The bulk top-payer reward, the transaction the modified TPC-C adds (as a
/// value, the [`ExtendedTxn::Extra`] of [`TopPayerTxn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopPayer;

/// The six transaction types, in report (and `--mix`) order: Payment,
/// NewOrder, top payer, OrderStatus, Delivery, StockLevel, the order in
/// which the book lists its mix (40/40/10/4/4/2).
pub type TopPayerTxn = ExtendedTxn<TopPayer>;

/// The modified TPC-C's knobs: TPC-C's, the six-way mix (in
/// [`TopPayerTxn::ALL`]'s order; the book's 40/40/10/4/4/2 by default) and
/// the top payer's ([`TopPayerKnobs`]).
pub type TopPayerConfig = ExtendedConfig<TopPayer>;

/// The top payer's knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopPayerKnobs {
    /// Customers one top-payer scan reads (1..=3000).
    pub scan: u32,
}

impl Default for TopPayerKnobs {
    /// Scans of [`DEFAULT_SCAN`] customers.
    fn default() -> TopPayerKnobs {
        TopPayerKnobs { scan: DEFAULT_SCAN }
    }
}

/// A top payer's inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopPayerInput {
    /// The terminal's warehouse (scans are local).
    pub w_id: u16,
    /// The district, uniform.
    pub d_id: u8,
    /// The first customer id scanned.
    pub first: u32,
    /// Customers scanned: `first..first + count`.
    pub count: u32,
    /// H_DATE of the reward's history row.
    pub h_date: u64,
    /// The reward's HISTORY key (drawn with the inputs, so a retry reuses
    /// it).
    pub h_key: [u8; 8],
}

/// What a top payer did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopPayerOutput {
    /// The customer rewarded.
    pub c_id: u32,
    /// Their C_YTD_PAYMENT before the reward (the largest in the range).
    pub ytd_payment: i64,
    /// The reward's Payment.
    pub payment: PaymentOutput,
}

/// The top payer, one attempt: scan customers `first..first + count` of
/// district `d_id` of warehouse `w_id` for the largest C_YTD_PAYMENT (the
/// smallest id among equals), then pay that customer [`REWARD_CENTS`]
/// through TPC-C's Payment (W_YTD, D_YTD, the customer, a HISTORY row).
pub fn top_payer<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &TopPayerInput,
    s: &mut Scratch,
) -> TxResult<TopPayerOutput> {
    let lo = customer_key(inp.w_id, inp.d_id, inp.first);
    let hi = customer_key(inp.w_id, inp.d_id, inp.first + inp.count - 1);
    let ytd = Customer::PAYMENT.start + 8..Customer::PAYMENT.start + 16;
    let mut best: Option<(i64, u32)> = None;
    let mut malformed = false;
    let n = tx.scan(
        t.customer,
        Bound::Included(&lo),
        Bound::Included(&hi),
        ScanOptions::new().slice(ytd),
        |k, v| {
            let (Ok(id), Ok(paid)) = (
                <[u8; 4]>::try_from(&k[3..]).map(u32::from_be_bytes),
                <[u8; 8]>::try_from(v).map(i64::from_le_bytes),
            ) else {
                malformed = true;
                return false;
            };
            if best.is_none_or(|(b, _)| paid > b) {
                best = Some((paid, id));
            }
            true
        },
    )?;
    if malformed {
        return Err(tessera::TxError::Error(Error::InvalidArgument(
            "TPC-C top payer: a malformed CUSTOMER key or row".into(),
        )));
    }
    // Customers are never deleted: a short scan is an inconsistent
    // optimistic read, retried.
    let Some((ytd_payment, c_id)) = best.filter(|_| n == inp.count as usize) else {
        return Err(vanished());
    };
    let pay = PaymentInput {
        w_id: inp.w_id,
        d_id: inp.d_id,
        c_w_id: inp.w_id,
        c_d_id: inp.d_id,
        customer: CustomerSel::Id(c_id),
        h_amount: REWARD_CENTS,
        h_date: inp.h_date,
        h_key: inp.h_key,
    };
    let payment = txns::payment(tx, t, &pay, &Recon::default(), s)?;
    Ok(TopPayerOutput {
        c_id,
        ytd_payment,
        payment,
    })
}

/// The top payer as a request.
struct TopPayerRequest<'a> {
    t: &'a Tables,
    inp: &'a TopPayerInput,
    s: &'a mut Scratch,
}

impl Request for TopPayerRequest<'_> {
    type Output = TopPayerOutput;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<TopPayerOutput> {
        top_payer(tx, self.t, self.inp, self.s)
    }
}

/// The modified TPC-C: [`Tpcc`](super::Tpcc)'s five transactions and
/// terminals plus the top payer, with a six-way mix.
pub type TpccTopPayer = TpccExtended<TopPayer>;

/// Per-thread state: a TPC-C terminal's (its RNG draws the type and the top
/// payer's inputs too) plus the top payer's inputs. The top payer's Payment
/// uses the terminal's TPC-C buffers.
pub type TopPayerThread = ExtendedThread<TopPayer>;

impl TpccTopPayer {
    /// A top payer's inputs for a terminal of warehouse `w_id`, drawn from
    /// `rng` (the history key is the caller's).
    pub fn draw_top_payer<R: Rng>(&self, rng: &mut R, w_id: u16) -> TopPayerInput {
        let count = self.cfg.extra.scan;
        TopPayerInput {
            w_id,
            d_id: uniform(rng, 1, DISTRICTS as u32) as u8,
            first: uniform(rng, 1, CUSTOMERS - count + 1),
            count,
            h_date: now_ms(),
            h_key: [0; 8],
        }
    }
}

impl ExtraTxn for TopPayer {
    const WORKLOAD: &'static str = "tpcc-toppayer";
    const NAME: &'static str = "top_payer";
    const ORDER: [TopPayerTxn; 6] = [
        TopPayerTxn::Tpcc(TxnType::Payment),
        TopPayerTxn::Tpcc(TxnType::NewOrder),
        TopPayerTxn::Extra(TopPayer),
        TopPayerTxn::Tpcc(TxnType::OrderStatus),
        TopPayerTxn::Tpcc(TxnType::Delivery),
        TopPayerTxn::Tpcc(TxnType::StockLevel),
    ];
    const DEFAULT_MIX: [u32; 6] = [40, 40, 10, 4, 4, 2];

    type Knobs = TopPayerKnobs;
    /// Nothing: the top payer uses TPC-C's tables only.
    type State = ();
    type Input = TopPayerInput;
    /// Nothing: the reward's Payment uses the terminal's TPC-C buffers.
    type Scratch = ();

    fn validate(k: &TopPayerKnobs) -> Result<(), String> {
        if !(1..=CUSTOMERS).contains(&k.scan) {
            return Err(format!(
                "--top-payer-scan must be in 1..={CUSTOMERS} (the customers of a district), got {}",
                k.scan
            ));
        }
        Ok(())
    }

    fn state(_: &TopPayerConfig) {}

    fn scratch() {}

    /// A local scan (the terminal's warehouse), and the reward's HISTORY key
    /// from the terminal's sequence, as Payment draws it.
    fn draw(wl: &TpccTopPayer, t: &mut TpccThread) -> TopPayerInput {
        let mut inp = wl.draw_top_payer(&mut t.rng, t.w_id);
        inp.h_key = history_key(t.origin, t.hist_seq);
        t.hist_seq += 1;
        inp
    }

    fn execute(wl: &TpccTopPayer, st: &mut TopPayerThread, w: &mut Worker) -> TxResult<()> {
        let mut req = TopPayerRequest {
            t: wl.tpcc.t(),
            inp: &st.input,
            s: &mut st.tpcc.scratch,
        };
        w.try_execute(&mut req).map(drop)
    }

    fn config(k: &TopPayerKnobs, o: &mut serde_json::Map<String, serde_json::Value>) {
        o.insert("top_payer_scan".into(), k.scan.into());
        o.insert("top_payer_reward_cents".into(), REWARD_CENTS.into());
        o.insert(
            "top_payer".into(),
            "max C_YTD_PAYMENT over consecutive customers of a uniform local district, \
             rewarded by a Payment"
                .into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Workload;
    use rand::SeedableRng;

    #[test]
    fn mix_parsing_and_validation() {
        assert_eq!(
            TopPayerConfig::parse_mix("40,40,10,4,4,2").unwrap(),
            [40, 40, 10, 4, 4, 2]
        );
        let e = TopPayerConfig::parse_mix("45,43,4,4,4").unwrap_err();
        assert!(e.contains("six"), "{e}");
        let e = TopPayerConfig::parse_mix("40,40,10,4,4,3").unwrap_err();
        assert!(e.contains("add up to 100") && e.contains("101"), "{e}");
        let mut c = TopPayerConfig::new(1);
        assert!(c.validate().is_ok());
        for bad in [0, CUSTOMERS + 1] {
            c.extra.scan = bad;
            assert!(c.validate().unwrap_err().contains("--top-payer-scan"));
        }
        c.extra.scan = CUSTOMERS;
        assert!(c.validate().is_ok());
        c.mix = [40, 40, 10, 4, 4, 3];
        assert!(c.validate().unwrap_err().contains("--mix"));
    }

    #[test]
    fn the_mix_draws_each_type_and_scans_stay_in_the_district() {
        let mut cfg = TopPayerConfig::new(3);
        cfg.extra.scan = CUSTOMERS;
        let wl = TpccTopPayer::new(cfg).unwrap();
        let mut st = wl.thread_state(1, 3, 5);
        let mut n = [0u32; 6];
        let mut keys = std::collections::HashSet::new();
        for _ in 0..100_000 {
            let ty = wl.next(&mut st);
            n[ty] += 1;
            assert_eq!(
                st.extra_next,
                TopPayerTxn::ALL[ty] == TopPayerTxn::Extra(TopPayer)
            );
            if st.extra_next {
                let t = st.input;
                assert_eq!(t.w_id, 2, "scans are local");
                assert!((1..=DISTRICTS).contains(&t.d_id));
                assert_eq!((t.first, t.count), (1, CUSTOMERS));
                assert!(keys.insert(t.h_key), "history keys are unique");
            } else {
                assert_eq!(
                    st.tpcc.txn().kind,
                    match TopPayerTxn::ALL[ty] {
                        TopPayerTxn::Tpcc(k) => k,
                        TopPayerTxn::Extra(_) => unreachable!(),
                    }
                );
            }
        }
        for (i, &p) in wl.cfg.mix.iter().enumerate() {
            let got = n[i] as f64 / 1000.0;
            assert!((got - p as f64).abs() < 1.0, "type {i}: {got}% vs {p}%");
        }
        let wl = TpccTopPayer::new(TopPayerConfig::new(1)).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for _ in 0..10_000 {
            let t = wl.draw_top_payer(&mut rng, 1);
            assert!(t.first >= 1 && t.first + t.count - 1 <= CUSTOMERS);
        }
        assert_eq!(wl.config()["mix_pct"]["top_payer"], 10);
        assert_eq!(wl.config()["top_payer_scan"], DEFAULT_SCAN);
    }
}
