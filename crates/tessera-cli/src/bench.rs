//! `tessera bench <workload>`: load a workload into an in-memory database,
//! run it with the shared driver, print the results.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Args, Subcommand, ValueEnum};
use serde_json::Value;
use tessera::{Database, Durability, Options, Protocol};
use tessera_workloads::cart::{Cart, CartCheck, CartConfig};
use tessera_workloads::driver::{self, Report, RunConfig, Workload};
use tessera_workloads::smallbank::{SmallBank, SmallBankConfig};
use tessera_workloads::tpcc::hybrid::{HybridConfig, Q2Knobs, TpccHybrid, DEFAULT_Q2_SIZE_PCT};
use tessera_workloads::tpcc::toppayer::{
    TopPayerConfig, TopPayerKnobs, TpccTopPayer, DEFAULT_SCAN,
};
use tessera_workloads::tpcc::{
    check_consistency, ConsistencyJson, Tpcc, TpccConfig, TpccReport, MAX_WAREHOUSES,
};
use tessera_workloads::ycsb::{Preset, Ycsb, YcsbConfig, YcsbOverrides, MAX_RECORDS};

use crate::failure::Failure;

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// YCSB: key-value transactions with a configurable mix and skew (a
    /// --workload preset sets the mix; knobs given explicitly override it).
    #[command(after_long_help = YCSB_HELP)]
    Ycsb(YcsbArgs),
    /// TPC-C: the five order-entry transactions on W warehouses, each
    /// driver thread a terminal of one home warehouse; the consistency
    /// conditions are checked after the run.
    #[command(after_long_help = TPCC_HELP)]
    Tpcc(TpccArgs),
    /// TPC-C-hybrid (ERMIA): TPC-C plus TPC-CH Q2*, a read-mostly
    /// transaction that scans --q2-size percent of SUPPLIER and refills the
    /// low STOCK rows of one region's suppliers in every warehouse.
    #[command(name = "tpcc-hybrid", after_long_help = TPCC_HYBRID_HELP)]
    TpccHybrid(TpccHybridArgs),
    /// Cai et al.'s modified TPC-C: TPC-C plus the bulk top payer, which
    /// scans --top-payer-scan customers of a local district for the largest
    /// C_YTD_PAYMENT and rewards that customer with a Payment.
    #[command(name = "tpcc-toppayer", after_long_help = TPCC_TOPPAYER_HELP)]
    TpccTopPayer(TpccTopPayerArgs),
    /// Cai et al.'s version-layout microbenchmark (chapter 2): pure N2O,
    /// pure O2N, HyPer's and EMS side by side; --jumps prints Table 2.1.
    Versions(crate::versions::VersionsArgs),
    /// Readers of rows that writers hold, through the protocols (EMS's
    /// current version in the header against si's chain): readers' gets
    /// per second with and without updaters.
    #[command(name = "hot-reads")]
    HotReads(crate::hot_reads::HotReadsArgs),
    /// SmallBank as the BOHM evaluation runs it: five transactions on 1-3
    /// rows of SAVINGS and CHECKING; --customers sets the contention (50
    /// high, 100,000 low); money conservation is checked after the run.
    #[command(after_long_help = SMALLBANK_HELP)]
    Smallbank(SmallbankArgs),
    /// The shopping cart of the lazy-evaluation evaluation (blind writes):
    /// each client adds --adds items to a cart, one transaction each, then
    /// checks out: a purchase (reads the cart, takes the stock) or, for
    /// --blind-pct percent, a clear (a blind write of the cart).
    #[command(after_long_help = CART_HELP)]
    Cart(CartArgs),
}

const CART_HELP: &str = "\
Tables: INVENTORY (--items rows of --item-bytes: stock and price) and CART (one
row per cart: the items in it). Client thread c uses carts (c, 0..--carts) in
turn. Transactions:
  add       read the item's INVENTORY row, append the item to the cart
  purchase  read the cart, take one unit of each item's stock, empty the cart
  clear     empty the cart without reading it: a blind write
            (KeySet::blind_write)

Under --cc lazy an add ends its now-phase at once (its cart row is left
sticky) and checkouts run eagerly: a purchase substantiates the cart's adds, a
clear overwrites them unread, so they are never run and count as committed
(stages.lazy.clobbered in the JSON): lazy's throughput rises with
--blind-pct (the thesis's Fig. 4.6), eager execution's does not.

Check: after the run the units of stock taken equal those committed purchases
took, and no cart holds more than --adds items; a failure makes the exit
status 1 (reported, not enforced, for nocc and rc with several threads, which
do not isolate transactions).";

/// `tessera bench cart`.
#[derive(Args, Debug)]
pub struct CartArgs {
    #[command(flatten)]
    pub common: Common,
    /// INVENTORY rows.
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=1 << 40), allow_negative_numbers = true)]
    pub items: u64,
    /// Bytes of an INVENTORY row.
    #[arg(long = "item-bytes", value_name = "B", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(16..=1 << 20), allow_negative_numbers = true)]
    pub item_bytes: u64,
    /// Carts per client thread, used in turn.
    #[arg(long, value_name = "N", default_value_t = 1_000,
          value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub carts: u32,
    /// Items added to a cart before its checkout.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1000), allow_negative_numbers = true)]
    pub adds: u32,
    /// Percentage of checkouts that clear the cart (blind writes).
    #[arg(long = "blind-pct", value_name = "PCT", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(0..=100), allow_negative_numbers = true)]
    pub blind_pct: u32,
}

const SMALLBANK_HELP: &str = "\
Tables: CUSTOMER (name to id), SAVINGS and CHECKING (id to an 8-byte balance,
10,000 at load). Transactions, on customer ids drawn uniformly:
  balance           read-only: savings + checking (2 rows)
  deposit_checking  checking += V, V in 1..=100 (1 row)
  transact_saving   savings += V, V in -100..=100; rolls back (a user abort)
                    if the balance would go negative (1 row)
  amalgamate        move A's savings and checking into B's checking (3 rows)
  write_check       checking -= V, plus 1 when savings + checking < V (2 rows)

Mix: --mix B,DC,TS,A,WC (default 20,20,20,20,20; Balance at 20% as in the
thesis). --spin-us U busy-waits U microseconds inside each transaction, after
its reads and writes, as BOHM's code does (the thesis runs 50).

Conservation: after the run, the sum of all balances must equal the initial
total plus the money committed transactions deposited and withdrew, with every
account present; a failure makes the exit status 1 (a `conservation` object
in the JSON; not enforced for nocc and rc with several threads, which do not
isolate transactions).";

/// `tessera bench smallbank`.
#[derive(Args, Debug)]
pub struct SmallbankArgs {
    #[command(flatten)]
    pub common: Common,
    /// Customers (accounts): 50 is high contention, 100,000 low.
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(2..=1 << 40), allow_negative_numbers = true)]
    pub customers: u64,
    /// Busy-wait inside each transaction, in microseconds.
    #[arg(long = "spin-us", value_name = "US", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000), allow_negative_numbers = true)]
    pub spin_us: u64,
    /// Percentages of balance, deposit_checking, transact_saving,
    /// amalgamate and write_check, adding up to 100.
    #[arg(long, value_name = "B,DC,TS,A,WC", default_value = "20,20,20,20,20", value_parser = parse_mix, allow_negative_numbers = true)]
    pub mix: [u32; 5],
}

const TPCC_HELP: &str = "\
Scale: --warehouses W (default: as many as --threads). Driver thread i is a
terminal of warehouse (i % W) + 1, with no keying or think time; with more
threads than warehouses several terminals share a warehouse (more contention).

Mix: --mix NO,P,OS,D,SL gives the percentages of NewOrder, Payment,
OrderStatus, Delivery and StockLevel (default 45,43,4,4,4, the spec's minimum
mix); they must add up to 100. 1% of NewOrders roll back (an unused item id),
reported as user aborts. Delivery handles all ten districts in one
transaction, as Silo and ERMIA do.

Consistency: after the run, TPC-C consistency conditions 3.3.2.1-3.3.2.12 and
the secondary indexes are checked on the whole database (one line in the
table, a `consistency` object in the JSON). A failed condition makes the exit
status 1, except under --cc nocc with more than one thread: without
concurrency control concurrent terminals are expected to break them, so the
result is reported (\"enforced\": false) but does not fail the run.

See docs/TPCC.md for the schema and every deviation from the spec.
Exit status 2 for bad arguments, 1 if the run fails or the database is
inconsistent.";

fn parse_mix(s: &str) -> Result<[u32; 5], String> {
    TpccConfig::parse_mix(s)
}

const TPCC_HYBRID_HELP: &str = "\
TPC-C-hybrid is ERMIA's (SIGMOD 2016) TPC-C with TPC-CH Q2* added. The load
adds CH-benCHmark's SUPPLIER (10,000 rows), NATION (62) and REGION (5); STOCK
row (w, i) is supplied by supplier (w * i) mod 10000.

Q2*: pick a random region; scan --q2-size percent of SUPPLIER (a contiguous
range of supplier keys from a random start, wrapping from 9999 to 0); for each
supplier of a nation in the region, read every STOCK row it supplies in every
warehouse, and add 91 to S_QUANTITY where it is below 15. It is reported as
`q2_star`.

Mix: --mix NO,P,Q2,OS,D,SL gives the percentages of NewOrder, Payment, Q2*,
OrderStatus, Delivery and StockLevel (default 40,38,10,4,4,4, ERMIA's); they
must add up to 100. Everything else (scale, terminals, remote percentages,
the consistency check and the exit status) is as for `bench tpcc`: Q2* only
changes S_QUANTITY, which no TPC-C consistency condition reads.

See docs/TPCC.md (TPC-C-hybrid) for what ERMIA specifies and the choices made
here. Exit status 2 for bad arguments, 1 if the run fails or the database is
inconsistent.";

fn parse_hybrid_mix(s: &str) -> Result<[u32; 6], String> {
    HybridConfig::parse_mix(s)
}

const TPCC_TOPPAYER_HELP: &str = "\
The modified TPC-C of Cai, Guo and Zhou (chapter 3, section 3.5.1), built to
give TPC-C long scans that conflict with its ordinary traffic. The top payer
picks a uniform district of its terminal's warehouse and a uniform range of
--top-payer-scan consecutive customer ids in it (default 600), finds the
customer with the largest C_YTD_PAYMENT (the smallest id among equals), and
rewards them with a Payment of $10: W_YTD, D_YTD, the customer's balance and
payment columns, and a HISTORY row. It is reported as `top_payer`.

Mix: --mix P,NO,TP,OS,D,SL gives the percentages of Payment, NewOrder, top
payer, OrderStatus, Delivery and StockLevel (default 40,40,10,4,4,2, the
book's); they must add up to 100. Everything else (scale, terminals, remote
percentages, the consistency check and the exit status) is as for
`bench tpcc`: the reward is a Payment, so the consistency conditions hold.
Interactive protocols only (the payee is known only after the scan).

See docs/TPCC.md (the top-payer TPC-C) for what the book specifies and the
choices made here. Exit status 2 for bad arguments, 1 if the run fails or
the database is inconsistent.";

fn parse_toppayer_mix(s: &str) -> Result<[u32; 6], String> {
    TopPayerConfig::parse_mix(s)
}

const YCSB_HELP: &str = "\
Presets: --workload a..f sets the operation mix and a zipfian request
distribution with --theta 0.99 (d reads the latest records instead); every
knob given explicitly overrides the preset's value, e.g.
`--workload a --theta 0.5` or `--workload f --rmw=false`. Without a preset
(custom): 50% reads, 50% blind updates, uniform.

Transactions: each performs --ops-per-txn operations and is of one type,
reported separately: `ycsb` (reads and updates, the usual mix; an operation
reads with probability read/(1 - scan - insert)), `scan` (scans of
1..=--scan-length rows) or `insert` (new records), drawn so that the ratios
are fractions of all operations, as in YCSB. Operations of one transaction may
repeat a key (as in CCBench). A conflict-aborted transaction is retried with
the same operations until it commits; its latency runs from the first attempt.

Keys: 8-byte big-endian values of a bijective hash of the record number
(YCSB's insertorder=hashed), so hot records spread over the whole tree.

Output: a table on stdout, or with --json one JSON object; progress and the
load bar go to stderr (none with --quiet). Exit status 2 for bad arguments,
1 if the run fails.";

/// Parses a protocol name with the engine's own parser and lists
/// [`Protocol::ALL`] in help texts and errors (so new protocols need no
/// change here).
#[derive(Clone, Debug)]
pub(crate) struct ProtocolParser;

impl ProtocolParser {
    fn names() -> PossibleValuesParser {
        PossibleValuesParser::new(Protocol::ALL.map(|p| p.name()))
    }
}

impl TypedValueParser for ProtocolParser {
    type Value = Protocol;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Protocol, clap::Error> {
        if let Some(p) = value.to_str().and_then(|s| s.parse::<Protocol>().ok()) {
            return Ok(p);
        }
        // Not a protocol: let clap word the error (value, flag, the list).
        Self::names().parse_ref(cmd, arg, value)?;
        Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!("unknown protocol {value:?}\n"),
        ))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            Protocol::ALL
                .into_iter()
                .map(|p| PossibleValue::new(p.name())),
        ))
    }
}

/// The interactive protocol `p`; a usage error for a deterministic one,
/// which runs `bench ycsb`, `bench smallbank`, `bench cart` and `bench
/// tpcc` only.
pub fn interactive(p: Protocol) -> Result<Protocol, Failure> {
    if p.caps().deterministic {
        return Err(Failure::usage(format!(
            "--cc {p} runs `tessera bench ycsb`, `tessera bench smallbank`, `tessera bench \
             cart` and `tessera bench tpcc` (NewOrder and Payment) only so far"
        )));
    }
    Ok(p)
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("must be in [0, 1]".into())
    }
}

fn parse_theta(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
    if (0.0..=tessera_workloads::ycsb::MAX_THETA).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "must be in [0, {}] (0 is uniform; YCSB uses 0.99, Cai et al. up to 1.04)",
            tessera_workloads::ycsb::MAX_THETA
        ))
    }
}

fn parse_positive_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
    if v > 0.0 && v <= 1e7 {
        Ok(v)
    } else {
        Err("must be a positive number of seconds".into())
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| "not a number".to_string())?;
    if (0.0..=1e7).contains(&v) {
        Ok(v)
    } else {
        Err("must be zero or a positive number of seconds".into())
    }
}

/// Options every benchmark has.
#[derive(Args, Debug)]
pub struct Common {
    /// Concurrency-control protocol: silo (Silo OCC), si (ERMIA snapshot
    /// isolation, not serializable), ssn (ERMIA SI + Serial Safety Net),
    /// 2pl-nowait and 2pl-waitdie (strict two-phase locking, DBx1000's
    /// NO_WAIT and WAIT_DIE), rc (read committed, Adya's PL-2, the PWV
    /// evaluation's baseline: not serializable), nocc (no concurrency
    /// control, for measuring overheads).
    /// bohm (Faleiro's deterministic multi-version protocol),
    /// 2pl-ordered (its deterministic 2PL baseline), pwv (piece-wise
    /// visibility: one executor per partition, --exec-threads of them)
    /// and lazy (lazy transactions: one stickification thread, or
    /// --cc-threads partitioned ones, --exec-threads substantiation
    /// workers, --chain-bound) take --cc-threads, --exec-threads,
    /// --clients, --batch-size and --batch-us; they run `bench ycsb`,
    /// `bench smallbank`, `bench cart` and `bench tpcc` (NewOrder and
    /// Payment).
    #[arg(long = "cc", value_name = "PROTOCOL", default_value = "silo", value_parser = ProtocolParser)]
    pub cc: Protocol,
    /// Driver threads, each with its own worker (loading uses at least as
    /// many threads as there are cores).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096), allow_negative_numbers = true)]
    pub threads: usize,
    /// Length of the measured period in seconds.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse_positive_seconds, allow_negative_numbers = true)]
    pub seconds: f64,
    /// Warm-up seconds before measuring (results discarded).
    #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = parse_seconds, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Instead of --seconds, measure until every thread has committed N
    /// transactions (a fixed amount of work: instruction counts under
    /// callgrind, comparisons across machines).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..), allow_negative_numbers = true)]
    pub txns: Option<u64>,
    /// rocc, gwv and mvrcc: target records per logical range [default:
    /// 610, the book's 16,384 ranges over 10M keys].
    #[arg(long = "rocc-range-size", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub rocc_range_size: Option<u32>,
    /// rocc and gwv: slots of each circular writer list [default: 5000,
    /// the book's].
    #[arg(long = "rocc-slots", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub rocc_slots: Option<u32>,
    /// rocc and gwv: where a committing writer registers: `always` (in
    /// every range it wrote, the book's, the default) or `scanned` (only
    /// where a scan is in flight; Tessera's addition).
    #[arg(long = "rocc-registration", value_name = "MODE")]
    pub rocc_registration: Option<tessera::RoccRegistration>,
    /// silo: how scans are validated against phantoms: `nodeset` (Silo's
    /// node set, the default) or `reread` (each scan run again at commit);
    /// both re-read the scanned rows' TIDs (Cai et al.'s LRV).
    #[arg(long = "scan-validation", value_name = "MODE")]
    pub scan_validation: Option<tessera::ScanValidation>,
    /// Epoch interval in milliseconds (Silo uses 40).
    #[arg(long = "epoch-ms", value_name = "MS", default_value_t = 40,
          value_parser = clap::value_parser!(u64).range(1..=10_000), allow_negative_numbers = true)]
    pub epoch_ms: u64,
    /// Print one JSON object on stdout instead of the table (progress stays
    /// on stderr).
    #[arg(long)]
    pub json: bool,
    /// No progress bar or progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Base RNG seed (each thread derives its own).
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Retry conflict-aborted transactions at once instead of after a
    /// randomized exponential backoff.
    #[arg(long = "no-backoff")]
    pub no_backoff: bool,
    /// Do not retry a conflict-aborted transaction: count the abort and draw
    /// a new one, as Silo's and ERMIA's benchmark drivers do by default
    /// (ERMIA's TPC-C-hybrid figures were measured so).
    #[arg(long = "no-retry")]
    pub no_retry: bool,
    /// Run every transaction through the batch path's checks: a
    /// reconnaissance where its key sets depend on reads, then its body
    /// against its declared read and write sets (an access outside them
    /// fails the run, naming the key). Tests the workload's declarations;
    /// measures what the checks cost.
    #[arg(long)]
    pub declared: bool,
    /// Fault this much memory in before the load (e.g. 3GiB, 512MiB, or
    /// bytes), as Silo pre-faults its arenas (the C++ Silo's --numa-memory):
    /// the run's new rows and index nodes then take no page faults. Memory
    /// freed later is kept, not returned to the OS. Size it to the load plus
    /// the run (about 1 KB per committed TPC-C transaction). Default: none.
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = parse_size)]
    pub prefault: u64,
    #[command(flatten)]
    pub durability: DurabilityArgs,
    #[command(flatten)]
    pub det: crate::det_bench::DetArgs,
}

/// A size in bytes, with an optional binary unit: `3GiB`, `512MiB`, `64KiB`,
/// `4096`.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = [
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
        ("G", 30),
        ("M", 20),
        ("K", 10),
    ]
    .iter()
    .find_map(|&(u, sh)| t.strip_suffix(u).map(|n| (n.trim(), sh)))
    .unwrap_or((t, 0));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 3GiB, 512MiB, 4096)"))?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .filter(|&b| b <= 1 << 46)
        .ok_or_else(|| format!("'{s}' is too large (at most 64TiB)"))?;
    Ok(bytes)
}

/// Logging options of every benchmark.
#[derive(Args, Debug)]
pub struct DurabilityArgs {
    /// Log committed transactions to --data-dir: none (in memory only),
    /// async (commits acknowledged at once) or sync (commits acknowledged
    /// when their epoch is durable; workers go on meanwhile and the
    /// acknowledged latency is reported as the durable commit latency).
    #[arg(long, value_name = "MODE", default_value = "none", value_parser = parse_durability)]
    pub durability: Durability,
    /// Directory for the log (required with --durability async|sync). It
    /// must not hold a tessera database already: the benchmark loads fresh
    /// data.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Logger threads, each writing its own log stream.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64), allow_negative_numbers = true)]
    pub loggers: usize,
    /// Take a checkpoint in the background every S seconds (needs
    /// --durability async|sync); each one lets recovery skip the log it
    /// covers and deletes the covered segments. Default: no checkpoints.
    #[arg(long = "checkpoint-secs", value_name = "S", value_parser = parse_positive_seconds, allow_negative_numbers = true)]
    pub checkpoint_secs: Option<f64>,
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    s.parse::<Durability>()
        .map_err(|_| "must be none, async or sync".to_string())
}

impl DurabilityArgs {
    /// Check the combination (the message names the flags): a mode other
    /// than none needs a fresh --data-dir.
    pub fn check(&self) -> Result<(), String> {
        if self.checkpoint_secs.is_some() && self.durability == Durability::None {
            return Err("--checkpoint-secs needs --durability async or sync".into());
        }
        match (self.durability, &self.data_dir) {
            (Durability::None, Some(_)) => Err(
                "--data-dir needs --durability async or sync (the default, none, logs nothing)"
                    .into(),
            ),
            (Durability::None, None) => Ok(()),
            (d, None) => Err(format!(
                "--durability {} needs --data-dir DIR (where the log is written)",
                d.name()
            )),
            (_, Some(dir)) => {
                if dir.join(tessera::log::meta::META_FILE).exists() {
                    Err(format!(
                        "--data-dir {} already holds a tessera database ({}); the benchmark \
                         loads fresh data, so give it a new or empty directory (use \
                         `tessera recover --data-dir {0}` or `tessera check tpcc --data-dir {0}` \
                         to look at the existing one)",
                        dir.display(),
                        tessera::log::meta::META_FILE
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The engine options: under sync the database runs with async
    /// acknowledgement and the driver acknowledges commits itself.
    fn apply(&self, o: Options) -> Options {
        match (self.durability, &self.data_dir) {
            (Durability::None, _) | (_, None) => o,
            (_, Some(dir)) => {
                let o = o
                    .durability(Durability::Async)
                    .data_dir(dir)
                    .loggers(self.loggers);
                match self.checkpoint_secs {
                    Some(s) => o.checkpoint_interval(Duration::from_secs_f64(s)),
                    None => o,
                }
            }
        }
    }
}

/// `tessera bench tpcc`: TPC-C knobs.
#[derive(Args, Debug)]
pub struct TpccArgs {
    #[command(flatten)]
    pub common: Common,
    /// Warehouses (the scale factor) [default: --threads].
    #[arg(long, value_name = "W",
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=MAX_WAREHOUSES as u64), allow_negative_numbers = true)]
    pub warehouses: Option<u32>,
    /// Percentages of NewOrder, Payment, OrderStatus, Delivery and
    /// StockLevel, adding up to 100.
    #[arg(long, value_name = "NO,P,OS,D,SL", default_value = "45,43,4,4,4", value_parser = parse_mix, allow_negative_numbers = true)]
    pub mix: [u32; 5],
    /// `--cc pwv`: how NewOrder declares its STOCK rows: per row (fine,
    /// the thesis's PWV) or per supply warehouse (coarse, PWV-coarse: a
    /// piece holds every STOCK row of the warehouse, and the table is
    /// partitioned by warehouse).
    #[arg(long, value_enum, value_name = "G")]
    pub granularity: Option<Granularity>,
    #[command(flatten)]
    pub knobs: TpccKnobs,
}

/// `--granularity`: PWV's conflict granularity for TPC-C's STOCK rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// One row.
    Fine,
    /// Every row of a warehouse.
    Coarse,
}

/// The TPC-C knobs `bench tpcc` and `bench tpcc-hybrid` share (besides
/// --warehouses, which each declares before its --mix so that the help
/// lists scale and mix first).
#[derive(Args, Debug)]
pub struct TpccKnobs {
    /// Percentage of NewOrder lines supplied by another warehouse (with
    /// more than one warehouse).
    #[arg(long = "remote-item-pct", value_name = "PCT", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(0..=100), allow_negative_numbers = true)]
    pub remote_item_pct: u32,
    /// Percentage of Payments for a customer of another warehouse (with
    /// more than one warehouse).
    #[arg(long = "remote-payment-pct", value_name = "PCT", default_value_t = 15,
          value_parser = clap::value_parser!(u32).range(0..=100), allow_negative_numbers = true)]
    pub remote_payment_pct: u32,
    /// Percentage of Payments and OrderStatus that select the customer by
    /// last name.
    #[arg(long = "by-last-name-pct", value_name = "PCT", default_value_t = 60,
          value_parser = clap::value_parser!(u32).range(0..=100), allow_negative_numbers = true)]
    pub by_last_name_pct: u32,
    /// Percentage of NewOrders rolled back with an unused item id.
    #[arg(long = "rollback-pct", value_name = "PCT", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(0..=100), allow_negative_numbers = true)]
    pub rollback_pct: u32,
}

impl TpccKnobs {
    /// The TPC-C part of a six-type variant (hybrid, top payer): these
    /// knobs, warehouses defaulting to the thread count, and TPC-C's own
    /// mix, which the variant does not use (it draws the type itself).
    fn six_type_config(&self, warehouses: Option<u32>, threads: usize) -> TpccConfig {
        self.config(warehouses, threads, TpccConfig::new(1).mix)
    }

    /// The TPC-C configuration with these knobs; warehouses default to the
    /// thread count.
    fn config(&self, warehouses: Option<u32>, threads: usize, mix: [u32; 5]) -> TpccConfig {
        TpccConfig {
            warehouses: warehouses.unwrap_or_else(|| threads.min(MAX_WAREHOUSES as usize) as u32),
            mix,
            remote_item_pct: self.remote_item_pct,
            remote_payment_pct: self.remote_payment_pct,
            by_last_name_pct: self.by_last_name_pct,
            rollback_pct: self.rollback_pct,
            ..TpccConfig::new(1)
        }
    }
}

impl TpccArgs {
    /// The TPC-C configuration (warehouses default to the thread count).
    pub fn tpcc_config(&self) -> TpccConfig {
        TpccConfig {
            coarse_stock: self.granularity == Some(Granularity::Coarse),
            ..self
                .knobs
                .config(self.warehouses, self.common.threads, self.mix)
        }
    }
}

/// `tessera bench tpcc-hybrid`: the TPC-C knobs, a six-way mix and the size
/// of Q2*.
#[derive(Args, Debug)]
pub struct TpccHybridArgs {
    #[command(flatten)]
    pub common: Common,
    /// Warehouses (the scale factor) [default: --threads].
    #[arg(long, value_name = "W",
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=MAX_WAREHOUSES as u64), allow_negative_numbers = true)]
    pub warehouses: Option<u32>,
    /// Percentages of NewOrder, Payment, Q2*, OrderStatus, Delivery and
    /// StockLevel, adding up to 100.
    #[arg(long, value_name = "NO,P,Q2,OS,D,SL", default_value = "40,38,10,4,4,4", value_parser = parse_hybrid_mix, allow_negative_numbers = true)]
    pub mix: [u32; 6],
    /// Percentage of the SUPPLIER table one Q2* scans (1..=100).
    #[arg(long = "q2-size", value_name = "PCT", default_value_t = DEFAULT_Q2_SIZE_PCT,
          value_parser = clap::value_parser!(u32).range(1..=100), allow_negative_numbers = true)]
    pub q2_size: u32,
    #[command(flatten)]
    pub knobs: TpccKnobs,
}

impl TpccHybridArgs {
    /// The TPC-C-hybrid configuration (warehouses default to the thread
    /// count).
    pub fn hybrid_config(&self) -> HybridConfig {
        let tpcc = self
            .knobs
            .six_type_config(self.warehouses, self.common.threads);
        HybridConfig {
            tpcc,
            mix: self.mix,
            extra: Q2Knobs {
                size_pct: self.q2_size,
                ..Q2Knobs::default()
            },
        }
    }
}

/// `tessera bench tpcc-toppayer`: the TPC-C knobs, a six-way mix and the
/// length of the top payer's scan.
#[derive(Args, Debug)]
pub struct TpccTopPayerArgs {
    #[command(flatten)]
    pub common: Common,
    /// Warehouses (the scale factor) [default: --threads].
    #[arg(long, value_name = "W",
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=MAX_WAREHOUSES as u64), allow_negative_numbers = true)]
    pub warehouses: Option<u32>,
    /// Percentages of Payment, NewOrder, top payer, OrderStatus, Delivery
    /// and StockLevel, adding up to 100.
    #[arg(long, value_name = "P,NO,TP,OS,D,SL", default_value = "40,40,10,4,4,2", value_parser = parse_toppayer_mix, allow_negative_numbers = true)]
    pub mix: [u32; 6],
    /// Customers one top payer scans (1..=3000, a district's).
    #[arg(long = "top-payer-scan", value_name = "N", default_value_t = DEFAULT_SCAN,
          value_parser = clap::value_parser!(u32).range(1..=3000), allow_negative_numbers = true)]
    pub top_payer_scan: u32,
    #[command(flatten)]
    pub knobs: TpccKnobs,
}

impl TpccTopPayerArgs {
    /// The modified TPC-C's configuration (warehouses default to the
    /// thread count).
    pub fn toppayer_config(&self) -> TopPayerConfig {
        TopPayerConfig {
            tpcc: self
                .knobs
                .six_type_config(self.warehouses, self.common.threads),
            mix: self.mix,
            extra: TopPayerKnobs {
                scan: self.top_payer_scan,
            },
        }
    }
}

/// YCSB presets for the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PresetArg {
    /// 50% read, 50% update, zipfian
    A,
    /// 95% read, 5% update, zipfian
    B,
    /// 100% read, zipfian
    C,
    /// 95% read of the latest records, 5% insert
    D,
    /// 95% scan, 5% insert, zipfian
    E,
    /// 50% read, 50% read-modify-write, zipfian
    F,
    /// Only the knobs given (default: 50% read, 50% blind update, uniform)
    Custom,
}

impl From<PresetArg> for Preset {
    fn from(p: PresetArg) -> Preset {
        match p {
            PresetArg::A => Preset::A,
            PresetArg::B => Preset::B,
            PresetArg::C => Preset::C,
            PresetArg::D => Preset::D,
            PresetArg::E => Preset::E,
            PresetArg::F => Preset::F,
            PresetArg::Custom => Preset::Custom,
        }
    }
}

/// `tessera bench ycsb`: YCSB knobs. A preset sets the mix; knobs given
/// explicitly override it.
#[derive(Args, Debug)]
pub struct YcsbArgs {
    #[command(flatten)]
    pub common: Common,
    /// YCSB core workload preset; explicit knobs below override its values.
    #[arg(
        long,
        value_name = "PRESET",
        default_value = "custom",
        ignore_case = true
    )]
    pub workload: PresetArg,
    /// Records loaded [default: 1000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_RECORDS), allow_negative_numbers = true)]
    pub records: Option<u64>,
    /// Value size in bytes [default: 100].
    #[arg(long = "value-size", value_name = "BYTES",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=tessera::MAX_VALUE_LEN as u64), allow_negative_numbers = true)]
    pub value_size: Option<usize>,
    /// Operations per transaction [default: 10].
    #[arg(long = "ops-per-txn", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000), allow_negative_numbers = true)]
    pub ops_per_txn: Option<usize>,
    /// Fraction of operations that read, in [0, 1] [default: 0.5, or the
    /// preset's]; what reads, scans and inserts leave are updates.
    #[arg(long = "read-ratio", value_name = "R", value_parser = parse_ratio, allow_negative_numbers = true)]
    pub read_ratio: Option<f64>,
    /// Fraction of operations that scan, in [0, 1] [default: 0, or the
    /// preset's].
    #[arg(long = "scan-ratio", value_name = "R", value_parser = parse_ratio, allow_negative_numbers = true)]
    pub scan_ratio: Option<f64>,
    /// Fraction of operations that insert new records, in [0, 1] [default:
    /// 0, or the preset's].
    #[arg(long = "insert-ratio", value_name = "R", value_parser = parse_ratio, allow_negative_numbers = true)]
    pub insert_ratio: Option<f64>,
    /// Updates read the record first and write back a modified copy
    /// (read-modify-write) instead of writing blindly; `--rmw=false` turns
    /// it off (e.g. for workload f).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = ArgAction::Set)]
    pub rmw: Option<bool>,
    /// Zipfian skew in [0, 1); 0 is uniform [default: 0, presets 0.99].
    #[arg(long, value_name = "THETA", value_parser = parse_theta, allow_negative_numbers = true)]
    pub theta: Option<f64>,
    /// Longest scan; scan lengths are uniform in 1..=N [default: 100].
    #[arg(long = "scan-length", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000_000), allow_negative_numbers = true)]
    pub scan_length: Option<usize>,
    /// Reads pick the newest records (zipfian distance back from the latest
    /// insert) [default: off, workload d on].
    #[arg(long = "read-latest", value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = ArgAction::Set)]
    pub read_latest: Option<bool>,
    /// Fraction of transactions that are long and read-only, each reading
    /// --long-read-size uniformly chosen records (the thesis's long
    /// read-only mix, with --rmw --read-ratio 0 for the 10RMW updates)
    /// [default: 0].
    #[arg(long = "long-read-ratio", value_name = "R", value_parser = parse_ratio, allow_negative_numbers = true)]
    pub long_read_ratio: Option<f64>,
    /// Fraction of transactions that are bulk: --ops-per-txn - 1 read/write
    /// operations and one scan of exactly --scan-length rows (Cai et al.'s
    /// hybrid YCSB: --ops-per-txn 5 --bulk-ratio 0.1) [default: 0].
    #[arg(long = "bulk-ratio", value_name = "R", value_parser = parse_ratio, allow_negative_numbers = true)]
    pub bulk_ratio: Option<f64>,
    /// Records per long read-only transaction [default: 10000].
    #[arg(long = "long-read-size", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=tessera_workloads::ycsb::MAX_LONG_READ as u64))]
    pub long_read_size: Option<usize>,
    /// PWV's commit-point sweep: an explicit abort statement (which never
    /// fires) after this many operations; under pwv the operations before
    /// it are abortable pieces whose writes stay hidden until the commit
    /// point [default: none].
    #[arg(long = "commit-point", value_name = "N")]
    pub commit_point: Option<usize>,
    /// Lazy evaluation's correlated-access microbenchmark ("Normal"): the
    /// first record of a transaction as usual, the others from a normal
    /// distribution around it with this standard deviation (the thesis
    /// uses 30), distinct [default: none, every record independent].
    #[arg(long = "normal-sigma", value_name = "S")]
    pub normal_sigma: Option<f64>,
}

impl YcsbArgs {
    /// The YCSB configuration: the preset with the explicit knobs on top.
    pub fn ycsb_config(&self) -> Result<YcsbConfig, String> {
        let o = YcsbOverrides {
            records: self.records,
            value_size: self.value_size,
            ops_per_txn: self.ops_per_txn,
            read_ratio: self.read_ratio,
            scan_ratio: self.scan_ratio,
            insert_ratio: self.insert_ratio,
            rmw: self.rmw,
            theta: self.theta,
            scan_length: self.scan_length,
            read_latest: self.read_latest,
            long_read_ratio: self.long_read_ratio,
            long_read_size: self.long_read_size,
            bulk_ratio: self.bulk_ratio,
            commit_point: self.commit_point,
            normal_sigma: self.normal_sigma,
        };
        YcsbConfig::with_overrides(self.workload.into(), &o)
    }
}

/// Report a failure of a benchmark run (with `--json`, the error object on
/// stdout) and return its exit status.
fn fail(c: &Common, f: Failure) -> ExitCode {
    f.report(c.json, Value::Null)
}

/// Run `tessera bench ...`.
pub fn main(cmd: BenchCmd) -> ExitCode {
    match cmd {
        BenchCmd::Ycsb(a) => {
            let cfg = match a.ycsb_config() {
                Ok(c) => c,
                Err(e) => return fail(&a.common, Failure::usage(e)),
            };
            let wl = match Ycsb::new(cfg) {
                Ok(w) => w,
                Err(e) => return fail(&a.common, Failure::usage(e)),
            };
            if !a.common.quiet {
                let c = wl.config_ref();
                eprintln!(
                    "ycsb (workload {}) on {}: {} thread(s), {} records of {} B, {} ops/txn, \
                     read {} / update {} / scan {} / insert {}{}, theta {}{}",
                    c.preset,
                    a.common.cc,
                    a.common.threads,
                    c.records,
                    c.value_size,
                    c.ops_per_txn,
                    c.read_ratio,
                    (c.update_ratio() * 1e9).round() / 1e9,
                    c.scan_ratio,
                    c.insert_ratio,
                    if c.rmw { " (rmw)" } else { "" },
                    c.theta,
                    if c.read_latest { ", read latest" } else { "" },
                );
            }
            if a.common.cc.caps().deterministic {
                return match crate::det_bench::run(&wl, a.common.cc, &a.common) {
                    Ok(out) => emit(&a.common, Ok(out)),
                    Err(f) => fail(&a.common, f),
                };
            }
            if let Err(f) = a.common.det.refuse_unless_det() {
                return fail(&a.common, f);
            }
            match load_and_run(&wl, &a.common) {
                Ok((db, report)) => {
                    let code = emit(
                        &a.common,
                        if a.common.json {
                            serde_json::to_string_pretty(&report).map(|s| s + "\n")
                        } else {
                            Ok(report.table())
                        },
                    );
                    dispose(db, &a.common);
                    code
                }
                Err(f) => fail(&a.common, f),
            }
        }
        BenchCmd::Tpcc(a) => tpcc(&a),
        BenchCmd::TpccHybrid(a) => tpcc_hybrid(&a),
        BenchCmd::TpccTopPayer(a) => tpcc_toppayer(&a),
        BenchCmd::Versions(a) => crate::versions::main(&a),
        BenchCmd::HotReads(a) => crate::hot_reads::main(&a),
        BenchCmd::Smallbank(a) => smallbank(&a),
        BenchCmd::Cart(a) => cart(&a),
    }
}

/// The cart check's result as the report's `consistency` object, or the
/// failure it is.
fn cart_verdict(
    r: Result<CartCheck, tessera::Error>,
    enforced: bool,
) -> Result<Option<(Value, String)>, Failure> {
    let chk = r.map_err(|e| Failure::run(format!("the stock check could not run: {e}")))?;
    if !chk.passed && enforced {
        return Err(Failure::new(
            1,
            "inconsistent",
            format!("the stock does not add up after the run: {}", chk.summary()),
        ));
    }
    let mut v = serde_json::to_value(&chk).unwrap_or(Value::Null);
    v["enforced"] = Value::Bool(enforced);
    let mut line = chk.summary();
    if !enforced {
        line.push_str(" (not enforced: this protocol does not isolate transactions)");
    }
    Ok(Some((v, line)))
}

/// `tessera bench cart`: load, run, check the stock, print.
fn cart(a: &CartArgs) -> ExitCode {
    let c = &a.common;
    let wl = match Cart::new(CartConfig {
        items: a.items,
        item_bytes: a.item_bytes as usize,
        carts: a.carts,
        adds: a.adds,
        blind_pct: a.blind_pct,
    }) {
        Ok(w) => w,
        Err(e) => return fail(c, Failure::usage(e)),
    };
    if !c.quiet {
        eprintln!(
            "cart on {}: {} thread(s), {} items, {} adds per checkout, {}% of checkouts blind",
            c.cc, c.threads, a.items, a.adds, a.blind_pct
        );
    }
    if c.cc.caps().deterministic {
        let check = |run: &crate::det_bench::DetRun<'_>| {
            let dump = |name: &str| -> Result<Vec<Vec<u8>>, tessera::Error> {
                let e = run.engine;
                Ok(e.dump(e.table(name)?)?
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect())
            };
            cart_verdict(
                dump("inventory")
                    .and_then(|inv| Ok((inv, dump("cart")?)))
                    .and_then(|(inv, carts)| wl.check_rows(&inv, &carts, run.tally)),
                true,
            )
        };
        return match crate::det_bench::run_checked(&wl, c.cc, c, check) {
            Ok(out) => emit(c, Ok(out)),
            Err(f) => fail(c, f),
        };
    }
    let (db, report) = match load_and_run(&wl, c) {
        Ok(r) => r,
        Err(f) => return fail(c, f),
    };
    // As SmallBank's: nocc and rc lose updates with several threads.
    let caps = c.cc.caps();
    let verdict = cart_verdict(
        wl.check(&db),
        caps.serializable || caps.snapshot_reads || c.threads == 1,
    );
    dispose(db, c);
    let (cj, line) = match verdict {
        Ok(Some(x)) => x,
        Ok(None) => (Value::Null, String::new()),
        Err(f) => return fail(c, f),
    };
    if c.json {
        let mut v = match serde_json::to_value(&report) {
            Ok(v) => v,
            Err(e) => return fail(c, Failure::run(e)),
        };
        v["consistency"] = cj;
        return emit(c, serde_json::to_string_pretty(&v).map(|s| s + "\n"));
    }
    print!("{}\n{line}\n", report.table());
    ExitCode::SUCCESS
}

/// SmallBank's conservation check on a stopped deterministic engine: the
/// balances it holds against the money its committed outcomes moved.
fn det_conservation(
    wl: &SmallBank,
    run: &crate::det_bench::DetRun<'_>,
) -> Result<Option<(Value, String)>, Failure> {
    let dump = |name: &str| -> Result<Vec<Vec<u8>>, Failure> {
        let e = run.engine;
        let t = e.table(name).map_err(|e| Failure::from_error("", &e))?;
        Ok(e.dump(t)
            .map_err(|e| Failure::from_error("", &e))?
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    };
    let cons = wl
        .conservation(&dump("savings")?, &dump("checking")?, run.tally)
        .map_err(|e| Failure::run(format!("the conservation check could not run: {e}")))?;
    if !cons.passed {
        return Err(Failure::new(
            1,
            "inconsistent",
            format!("money is not conserved after the run: {}", cons.summary()),
        ));
    }
    let mut v = serde_json::to_value(&cons).unwrap_or(Value::Null);
    v["enforced"] = Value::Bool(true);
    Ok(Some((v, cons.summary())))
}

/// `tessera bench smallbank`: load, run, check conservation, print.
fn smallbank(a: &SmallbankArgs) -> ExitCode {
    let c = &a.common;
    let wl = match SmallBank::new(SmallBankConfig {
        customers: a.customers,
        spin_us: a.spin_us,
        mix: a.mix,
    }) {
        Ok(w) => w,
        Err(e) => return fail(c, Failure::usage(e)),
    };
    if !c.quiet {
        eprintln!(
            "smallbank on {}: {} thread(s), {} customers, spin {} us, mix {} \
             (balance/deposit_checking/transact_saving/amalgamate/write_check)",
            c.cc,
            c.threads,
            a.customers,
            a.spin_us,
            a.mix.map(|x| x.to_string()).join("/"),
        );
    }
    if c.cc.caps().deterministic {
        return match crate::det_bench::run_checked(&wl, c.cc, c, |run| det_conservation(&wl, run)) {
            Ok(out) => emit(c, Ok(out)),
            Err(f) => fail(c, f),
        };
    }
    let (db, report) = match load_and_run(&wl, c) {
        Ok(r) => r,
        Err(f) => return fail(c, f),
    };
    let cons = match wl.check(&db) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                c,
                Failure::run(format!("the conservation check could not run: {e}")),
            )
        }
    };
    dispose(db, c);
    // load_and_run refused anything but an interactive protocol.
    let caps = interactive(c.cc)
        .map(|p| p.caps())
        .unwrap_or(Protocol::DEFAULT.caps());
    let enforced = caps.serializable || caps.snapshot_reads || c.threads == 1;
    let failure = (!cons.passed && enforced).then(|| {
        Failure::new(
            1,
            "inconsistent",
            format!("money is not conserved after the run: {}", cons.summary()),
        )
    });
    if c.json {
        let mut v = match serde_json::to_value(&report) {
            Ok(v) => v,
            Err(e) => return fail(c, Failure::run(e)),
        };
        let mut cj = serde_json::to_value(&cons).unwrap_or(Value::Null);
        cj["enforced"] = Value::Bool(enforced);
        v["conservation"] = cj;
        return match failure {
            Some(f) => f.report(true, v),
            None => emit(c, serde_json::to_string_pretty(&v).map(|s| s + "\n")),
        };
    }
    let mut line = cons.summary();
    if !enforced {
        line.push_str(&format!(
            " (not enforced: {} with several threads does not isolate transactions)",
            c.cc
        ));
    }
    print!("{}\n{line}\n", report.table());
    match failure {
        Some(f) => f.report(false, Value::Null),
        None => ExitCode::SUCCESS,
    }
}

/// `tessera bench tpcc`: load, run, check consistency, print.
fn tpcc(a: &TpccArgs) -> ExitCode {
    if a.granularity.is_some() && a.common.cc != Protocol::Pwv {
        return fail(
            &a.common,
            Failure::usage(format!(
                "--granularity sets PWV's piece declarations: it applies to --cc pwv, not {}",
                a.common.cc
            )),
        );
    }
    let cfg = a.tpcc_config();
    let wl = match Tpcc::new(cfg) {
        Ok(w) => w,
        Err(e) => return fail(&a.common, Failure::usage(e)),
    };
    let c = &a.common;
    if !c.quiet {
        let cfg = wl.config_ref();
        eprintln!(
            "tpcc on {}: {} thread(s), {} warehouse(s), mix {} (new_order/payment/order_status/delivery/stock_level), \
             remote items {}%, remote payments {}%",
            c.cc,
            c.threads,
            cfg.warehouses,
            cfg.mix.map(|x| x.to_string()).join("/"),
            cfg.remote_item_pct,
            cfg.remote_payment_pct,
        );
    }
    if c.cc.caps().deterministic {
        return tpcc_det(&wl, c.cc, c);
    }
    run_and_check(&wl, wl.config_ref(), c)
}

/// `tessera bench tpcc --cc bohm`: NewOrder and Payment (the thesis's
/// mix), then the TPC-C consistency conditions on the engine's state
/// (copied into an in-memory database, where the checker reads it).
fn tpcc_det(wl: &Tpcc, p: Protocol, c: &Common) -> ExitCode {
    if wl.config_ref().mix[2..] != [0, 0, 0] {
        return fail(
            c,
            Failure::usage(
                "--cc bohm runs TPC-C's NewOrder and Payment only: use --mix 50,50,0,0,0 (the \
                 thesis's NewOrder+Payment mix)",
            ),
        );
    }
    let cfg = wl.config_ref().clone();
    let check =
        move |run: &crate::det_bench::DetRun<'_>| -> Result<Option<(Value, String)>, Failure> {
            let e = run.engine;
            let t0 = Instant::now();
            let tables = e
                .table_names()
                .into_iter()
                .map(|n| {
                    let rows = e.dump(e.table(&n)?)?;
                    Ok((n, rows))
                })
                .collect::<Result<Vec<_>, tessera::Error>>()
                .map_err(|e| Failure::from_error("cannot read the engine's rows: ", &e))?;
            let db = crate::det_tools::copy_into_memory(&tables)
                .map_err(|e| Failure::from_error("cannot copy the engine's rows: ", &e))?;
            let cons = check_consistency(&db, &cfg)
                .map_err(|e| Failure::run(format!("the consistency check could not run: {e}")))?;
            let seconds = t0.elapsed().as_secs_f64();
            std::mem::forget(db);
            if !cons.passed {
                return Err(Failure::new(
                    1,
                    "inconsistent",
                    format!(
                        "the database is inconsistent after the run: {}",
                        cons.failed().join(", ")
                    ),
                ));
            }
            let v = serde_json::json!({
                "passed": cons.passed,
                "conditions": serde_json::to_value(&cons.conditions).unwrap_or(Value::Null),
                "enforced": true,
                "seconds": (seconds * 1000.0).round() / 1000.0,
            });
            Ok(Some((v, cons.summary())))
        };
    match crate::det_bench::run_checked(wl, p, c, check) {
        Ok(out) => emit(c, Ok(out)),
        Err(f) => fail(c, f),
    }
}

/// `tessera bench tpcc-hybrid`: as `tpcc`, with the hybrid workload.
fn tpcc_hybrid(a: &TpccHybridArgs) -> ExitCode {
    let wl = match TpccHybrid::new(a.hybrid_config()) {
        Ok(w) => w,
        Err(e) => return fail(&a.common, Failure::usage(e)),
    };
    let c = &a.common;
    if !c.quiet {
        let cfg = wl.config_ref();
        eprintln!(
            "tpcc-hybrid on {}: {} thread(s), {} warehouse(s), mix {} \
             (new_order/payment/q2_star/order_status/delivery/stock_level), \
             Q2* scans {}% of SUPPLIER ({} suppliers), remote items {}%, remote payments {}%",
            c.cc,
            c.threads,
            cfg.tpcc.warehouses,
            cfg.mix.map(|x| x.to_string()).join("/"),
            cfg.extra.size_pct,
            cfg.extra.suppliers(),
            cfg.tpcc.remote_item_pct,
            cfg.tpcc.remote_payment_pct,
        );
    }
    run_and_check(&wl, wl.tpcc_config(), c)
}

/// `tessera bench tpcc-toppayer`: as `tpcc`, with the top payer added.
fn tpcc_toppayer(a: &TpccTopPayerArgs) -> ExitCode {
    let wl = match TpccTopPayer::new(a.toppayer_config()) {
        Ok(w) => w,
        Err(e) => return fail(&a.common, Failure::usage(e)),
    };
    let c = &a.common;
    if !c.quiet {
        let cfg = wl.config_ref();
        eprintln!(
            "tpcc-toppayer on {}: {} thread(s), {} warehouse(s), mix {} \
             (payment/new_order/top_payer/order_status/delivery/stock_level), \
             top payer scans {} customers, remote items {}%, remote payments {}%",
            c.cc,
            c.threads,
            cfg.tpcc.warehouses,
            cfg.mix.map(|x| x.to_string()).join("/"),
            cfg.extra.scan,
            cfg.tpcc.remote_item_pct,
            cfg.tpcc.remote_payment_pct,
        );
    }
    run_and_check(&wl, wl.tpcc_config(), c)
}

/// Load and run a TPC-C workload (plain, hybrid or top payer), check the TPC-C
/// consistency conditions on the result, print the report with them, and
/// return the exit status. An inconsistent database fails the run; with
/// `--json` the report then carries the error object.
fn run_and_check<W: Workload>(wl: &W, tpcc_cfg: &TpccConfig, c: &Common) -> ExitCode {
    let (db, report) = match load_and_run(wl, c) {
        Ok(r) => r,
        Err(f) => return fail(c, f),
    };
    let t0 = Instant::now();
    let cons = match check_consistency(&db, tpcc_cfg) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                c,
                Failure::run(format!("the consistency check could not run: {e}")),
            )
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    dispose(db, c);
    // Without concurrency control, concurrent terminals race (lost updates
    // of D_NEXT_O_ID, W_YTD, ...): report, but do not fail the run.
    // load_and_run refused anything but an interactive protocol.
    let caps = interactive(c.cc)
        .map(|p| p.caps())
        .unwrap_or(Protocol::DEFAULT.caps());
    let enforced = caps.serializable || caps.snapshot_reads || c.threads == 1;
    let failure = (!cons.passed && enforced).then(|| {
        Failure::new(
            1,
            "inconsistent",
            format!(
                "the database is inconsistent after the run: {}",
                cons.failed().join(", ")
            ),
        )
    });
    if c.json {
        let out = TpccReport {
            run: &report,
            consistency: ConsistencyJson {
                report: &cons,
                enforced,
                seconds: (seconds * 1000.0).round() / 1000.0,
            },
        };
        return match failure {
            // The report with the error object in it.
            Some(f) => match serde_json::to_value(&out) {
                Ok(v) => f.report(true, v),
                Err(e) => fail(c, Failure::run(e)),
            },
            // Serialized from the structs: the keys keep their order.
            None => emit(c, serde_json::to_string_pretty(&out).map(|s| s + "\n")),
        };
    }
    let mut line = format!("{} [checked in {seconds:.2} s]", cons.summary());
    if !enforced {
        line.push_str(&format!(
            " (not enforced: {} with several threads does not isolate transactions)",
            c.cc
        ));
    }
    print!("{}\n{line}\n", report.table());
    match failure {
        Some(f) => f.report(false, Value::Null),
        None => ExitCode::SUCCESS,
    }
}

/// Let go of the benchmark's database once its report is made. An
/// in-memory database is left to the process's exit, which returns its
/// memory at once: freeing millions of records and index nodes one by one
/// took as long as a tenth of a TPC-C run (5,800 instructions per committed
/// transaction of a 5 s run, counted by callgrind against the run). A
/// database with a data directory is closed properly, so that its log is
/// flushed and its lock released.
fn dispose(db: Database, c: &Common) {
    if c.durability.data_dir.is_none() {
        std::mem::forget(db);
    }
}

/// `--prefault`: fault the memory in (with progress lines); the seconds it
/// took, `None` without the flag, a failure if the memory is not there.
pub(crate) fn prefault(c: &Common) -> Result<Option<f64>, Failure> {
    if c.prefault == 0 {
        return Ok(None);
    }
    if !c.quiet {
        eprintln!("pre-faulting {} MiB ...", c.prefault >> 20);
    }
    let t = crate::alloc::prefault(usize::try_from(c.prefault).unwrap_or(usize::MAX))
        .map_err(|e| Failure::run(format!("--prefault: {e}")))?;
    if !c.quiet {
        eprintln!("pre-faulted in {:.2} s", t.as_secs_f64());
    }
    Ok(Some(t.as_secs_f64()))
}

/// Open the database, load, run. Shared by every workload.
fn load_and_run<W: Workload>(wl: &W, c: &Common) -> Result<(Database, Report), Failure> {
    // Load with every core even when measuring fewer threads.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_threads = c.threads.max(cores);
    let cc = interactive(c.cc)?;
    c.det.refuse_unless_det()?;
    let d = &c.durability;
    d.check().map_err(Failure::usage)?;
    let prefault_secs = prefault(c)?;
    let mut opts = Options::in_memory()
        .protocol(cc)
        .workers(load_threads)
        .epoch_interval(Duration::from_millis(c.epoch_ms));
    if let Some(n) = c.rocc_range_size {
        opts = opts.rocc_range_size(n);
    }
    if let Some(n) = c.rocc_slots {
        opts = opts.rocc_slots(n);
    }
    if let Some(r) = c.rocc_registration {
        if !matches!(cc, Protocol::Rocc | Protocol::Gwv) {
            return Err(Failure::usage(format!(
                "--rocc-registration applies to --cc rocc and gwv only, not --cc {cc}"
            )));
        }
        opts = opts.rocc_registration(r);
    }
    if let Some(v) = c.scan_validation {
        if cc != Protocol::Silo {
            return Err(Failure::usage(format!(
                "--scan-validation applies to --cc silo only (--cc {cc} validates its scans its own way)"
            )));
        }
        opts = opts.scan_validation(v);
    }
    let db = Database::open(d.apply(opts)).map_err(|e| {
        let what = match &d.data_dir {
            Some(dir) => format!("cannot open --data-dir {}: ", dir.display()),
            None => "cannot open the database: ".to_string(),
        };
        Failure::from_error(&what, &e)
    })?;
    let cfg = RunConfig {
        threads: c.threads,
        load_threads,
        seconds: c.seconds,
        warmup: c.warmup,
        quiet: c.quiet,
        seed: c.seed,
        backoff: !c.no_backoff,
        retry: !c.no_retry,
        durability: d.durability,
        declared: c.declared,
        txns: c.txns,
    };
    let mut report = match driver::bench(&db, wl, &cfg) {
        Ok(r) => r,
        Err(driver::DriverError::Config(e)) => return Err(Failure::usage(e)),
        Err(e) => return Err(Failure::run(e)),
    };
    report.engine = match (&d.data_dir, d.durability) {
        (Some(dir), Durability::Async | Durability::Sync) => serde_json::json!({
            "epoch_ms": c.epoch_ms,
            "data_dir": dir.display().to_string(),
            "loggers": d.loggers,
            "checkpoint_secs": d.checkpoint_secs,
        }),
        _ => serde_json::json!({ "epoch_ms": c.epoch_ms }),
    };
    if matches!(cc, Protocol::Rocc | Protocol::Gwv | Protocol::Mvrcc) {
        report.engine["rocc_range_size"] =
            c.rocc_range_size.unwrap_or(tessera::ROCC_RANGE_SIZE).into();
    }
    if matches!(cc, Protocol::Rocc | Protocol::Gwv) {
        report.engine["rocc_slots"] = c.rocc_slots.unwrap_or(tessera::ROCC_SLOTS).into();
        report.engine["rocc_registration"] = c.rocc_registration.unwrap_or_default().name().into();
    }
    if cc == Protocol::Silo {
        report.engine["scan_validation"] = c.scan_validation.unwrap_or_default().name().into();
    }
    if let Some(secs) = prefault_secs {
        report.engine["prefault_bytes"] = c.prefault.into();
        report.engine["prefault_seconds"] = secs.into();
    }
    Ok((db, report))
}

/// Print the output (one JSON object or the table) produced by `text`.
fn emit(c: &Common, text: Result<String, serde_json::Error>) -> ExitCode {
    match text {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(c, Failure::run(e)),
    }
}
