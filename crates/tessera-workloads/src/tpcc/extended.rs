//! TPC-C with one transaction type added: the plumbing that TPC-C-hybrid
//! ([`super::hybrid`], Q2\*) and Cai et al.'s modified TPC-C
//! ([`super::toppayer`], the top payer) share.
//!
//! Both run [`Tpcc`]'s five transactions unchanged (inputs, terminals,
//! execution) and add a sixth under a six-way mix; only the added
//! transaction differs. [`ExtraTxn`] describes it: its names, its place in
//! the report order, its knobs, what the workload and each thread keep for
//! it, how its inputs are drawn and how it runs. Over it, this module
//! writes once the six types ([`ExtendedTxn`]), the knobs
//! ([`ExtendedConfig`]: TPC-C's, the mix, the added transaction's), the
//! workload ([`TpccExtended`]) and a driver thread's state
//! ([`ExtendedThread`]). Each variant's module names the instances
//! (`HybridConfig` is `ExtendedConfig<Q2Star>`, and so on).

use std::fmt::Debug;
use std::hash::Hash;

use rand::Rng;
use tessera::{Database, Error, TxResult, Worker};

use super::schema::Tables;
use super::{Tpcc, TpccConfig, TpccThread, TxnType};
use crate::driver::Workload;

/// The transaction a variant adds to TPC-C, implemented by a unit type that
/// names it ([`super::hybrid::Q2Star`], [`super::toppayer::TopPayer`]) and
/// is the payload of [`ExtendedTxn::Extra`].
pub trait ExtraTxn: Copy + Debug + Eq + Hash + Sized + 'static {
    /// The workload's name in reports (`tpcc-hybrid`).
    const WORKLOAD: &'static str;
    /// The added transaction's name in reports (`q2_star`).
    const NAME: &'static str;
    /// The six types in report (and `--mix`) order: the order in which the
    /// variant's source lists its mix, so that `--mix` reads as the source.
    const ORDER: [ExtendedTxn<Self>; 6];
    /// The source's mix, in the order of [`ExtraTxn::ORDER`].
    const DEFAULT_MIX: [u32; 6];

    /// The added transaction's knobs; `Default` gives the source's values.
    type Knobs: Clone + Debug + Default + PartialEq + Eq + Send + Sync;
    /// What the workload keeps for it beside [`Tpcc`] (extra tables, maps
    /// computed once).
    type State: Send + Sync;
    /// One transaction's inputs, drawn by [`ExtraTxn::draw`] and kept for
    /// the retries of an aborted attempt.
    type Input: Clone + Debug + Default + Send;
    /// A thread's buffers, reused across transactions.
    type Scratch: Send;

    /// Check the knobs; the message names the offending option.
    fn validate(knobs: &Self::Knobs) -> Result<(), String>;

    /// The workload's state for these (validated) knobs.
    fn state(cfg: &ExtendedConfig<Self>) -> Self::State;

    /// A thread's buffers.
    fn scratch() -> Self::Scratch;

    /// Rows [`ExtraTxn::load`] inserts; TPC-C's by default.
    fn rows_to_load(wl: &TpccExtended<Self>) -> u64 {
        wl.tpcc.rows_to_load()
    }

    /// Create the tables and load them; TPC-C's by default, for a
    /// transaction that needs no table of its own.
    fn load(
        wl: &TpccExtended<Self>,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        wl.tpcc.load(db, threads, progress)
    }

    /// Draw a transaction's inputs from the terminal `t` (its RNG, and
    /// anything else of it the transaction uses, such as its warehouse),
    /// after the type was drawn from the same RNG.
    fn draw(wl: &TpccExtended<Self>, t: &mut TpccThread) -> Self::Input;

    /// Run the transaction of `st.input` once (one `Worker::try_execute`).
    fn execute(
        wl: &TpccExtended<Self>,
        st: &mut ExtendedThread<Self>,
        w: &mut Worker,
    ) -> TxResult<()>;

    /// Add the knobs (and anything a reader of a report needs to know about
    /// the transaction) to the report's `config` object.
    fn config(knobs: &Self::Knobs, o: &mut serde_json::Map<String, serde_json::Value>);
}

/// The six transaction types of a variant: TPC-C's five and `X`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtendedTxn<X> {
    /// One of the five TPC-C transactions.
    Tpcc(TxnType),
    /// The added transaction.
    Extra(X),
}

impl<X: ExtraTxn> ExtendedTxn<X> {
    /// All of them, in the order of [`ExtendedConfig::mix`] and of reports
    /// ([`ExtraTxn::ORDER`]).
    pub const ALL: [ExtendedTxn<X>; 6] = X::ORDER;

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ExtendedTxn::Tpcc(t) => t.name(),
            ExtendedTxn::Extra(_) => X::NAME,
        }
    }
}

/// The knobs of TPC-C with `X` added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedConfig<X: ExtraTxn> {
    /// The TPC-C knobs (scale, remote percentages, seed, ...). Its `mix` is
    /// not used: [`ExtendedConfig::mix`] replaces it.
    pub tpcc: TpccConfig,
    /// Percentages of the six types, in the order of [`ExtendedTxn::ALL`],
    /// adding up to 100.
    pub mix: [u32; 6],
    /// The added transaction's knobs.
    pub extra: X::Knobs,
}

impl<X: ExtraTxn> ExtendedConfig<X> {
    /// The source's mix and knobs on `warehouses` warehouses, the spec's
    /// TPC-C settings.
    pub fn new(warehouses: u32) -> ExtendedConfig<X> {
        ExtendedConfig {
            tpcc: TpccConfig::new(warehouses),
            mix: X::DEFAULT_MIX,
            extra: X::Knobs::default(),
        }
    }

    /// Parse a mix: six comma-separated percentages, in the order of
    /// [`ExtendedTxn::ALL`], adding up to 100.
    pub fn parse_mix(s: &str) -> Result<[u32; 6], String> {
        super::parse_percentages(s, &X::ORDER.map(ExtendedTxn::name))
    }

    /// Check the knobs; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        self.tpcc_part().validate()?;
        TpccConfig::check_mix(&self.mix).map_err(|e| format!("--mix: {e}"))?;
        X::validate(&self.extra)
    }

    /// The TPC-C configuration the five TPC-C transactions run with. Its mix
    /// is a placeholder that passes validation; the variant draws the type.
    fn tpcc_part(&self) -> TpccConfig {
        TpccConfig {
            mix: [100, 0, 0, 0, 0],
            ..self.tpcc.clone()
        }
    }
}

/// TPC-C with `X` added: [`Tpcc`]'s five transactions and terminals, plus
/// `X`, with a six-way mix.
pub struct TpccExtended<X: ExtraTxn> {
    pub(super) cfg: ExtendedConfig<X>,
    pub(super) tpcc: Tpcc,
    names: [&'static str; 6],
    /// Cumulative mix, as in [`Tpcc`].
    cum: [u32; 6],
    /// What `X` keeps.
    pub(super) state: X::State,
}

/// Per-thread state: a TPC-C terminal's (its RNG draws the type and `X`'s
/// inputs too) plus `X`'s inputs and buffers.
pub struct ExtendedThread<X: ExtraTxn> {
    pub(super) tpcc: TpccThread,
    /// The current transaction is an `X` (else the TPC-C one in `tpcc`).
    pub(super) extra_next: bool,
    pub(super) input: X::Input,
    pub(super) scratch: X::Scratch,
}

impl<X: ExtraTxn> TpccExtended<X> {
    /// The workload for these knobs (validated).
    pub fn new(cfg: ExtendedConfig<X>) -> Result<TpccExtended<X>, String> {
        cfg.validate()?;
        let tpcc = Tpcc::new(cfg.tpcc_part())?;
        Ok(TpccExtended {
            names: X::ORDER.map(ExtendedTxn::name),
            cum: super::cumulative(cfg.mix),
            state: X::state(&cfg),
            tpcc,
            cfg,
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &ExtendedConfig<X> {
        &self.cfg
    }

    /// The TPC-C configuration (for [`super::check_consistency`]; its mix is
    /// not this workload's).
    pub fn tpcc_config(&self) -> &TpccConfig {
        self.tpcc.config_ref()
    }

    /// The TPC-C workload running the five TPC-C transactions.
    pub fn tpcc(&self) -> &Tpcc {
        &self.tpcc
    }

    /// The TPC-C tables, once loaded.
    pub fn tables(&self) -> Option<Tables> {
        self.tpcc.tables()
    }
}

impl<X: ExtraTxn> Workload for TpccExtended<X> {
    type Thread = ExtendedThread<X>;

    fn name(&self) -> &'static str {
        X::WORKLOAD
    }

    fn txn_types(&self) -> &[&'static str] {
        &self.names
    }

    fn rows_to_load(&self) -> u64 {
        X::rows_to_load(self)
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        X::load(self, db, threads, progress)
    }

    fn thread_state(&self, thread: usize, threads: usize, seed: u64) -> ExtendedThread<X> {
        ExtendedThread {
            tpcc: self.tpcc.thread_state(thread, threads, seed),
            extra_next: false,
            input: X::Input::default(),
            scratch: X::scratch(),
        }
    }

    fn next(&self, st: &mut ExtendedThread<X>) -> usize {
        let x = st.tpcc.rng.gen_range(0..100u32);
        let ty = self.cum.iter().position(|&c| x < c).unwrap_or(0);
        match X::ORDER[ty] {
            ExtendedTxn::Tpcc(kind) => {
                st.extra_next = false;
                self.tpcc.draw(&mut st.tpcc, kind);
            }
            ExtendedTxn::Extra(_) => {
                st.extra_next = true;
                st.input = X::draw(self, &mut st.tpcc);
            }
        }
        ty
    }

    fn execute(&self, st: &mut ExtendedThread<X>, w: &mut Worker) -> TxResult<()> {
        if st.extra_next {
            X::execute(self, st, w)
        } else {
            self.tpcc.execute(&mut st.tpcc, w)
        }
    }

    fn config(&self) -> serde_json::Value {
        let mut v = self.tpcc.config();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "mix_pct".into(),
                super::mix_json(&self.names, &self.cfg.mix),
            );
            X::config(&self.cfg.extra, o);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::hybrid::Q2Star;
    use crate::tpcc::toppayer::TopPayer;

    /// Each variant lists TPC-C's five types and its own once each, and its
    /// default mix is valid.
    fn lists_six_distinct_types<X: ExtraTxn>() {
        let mut tpcc: Vec<TxnType> = X::ORDER
            .iter()
            .filter_map(|t| match t {
                ExtendedTxn::Tpcc(k) => Some(*k),
                ExtendedTxn::Extra(_) => None,
            })
            .collect();
        assert_eq!(tpcc.len(), 5, "{:?}", X::ORDER);
        tpcc.sort_by_key(|k| TxnType::ALL.iter().position(|a| a == k));
        assert_eq!(tpcc, TxnType::ALL);
        assert!(ExtendedConfig::<X>::new(1).validate().is_ok());
    }

    #[test]
    fn variants_list_six_distinct_types() {
        lists_six_distinct_types::<Q2Star>();
        lists_six_distinct_types::<TopPayer>();
    }
}
