//! The shopping cart: lazy evaluation's blind-write test (Faleiro's thesis
//! §4.4.3, Fig. 4.6; digest section 3, "Blind writes").
//!
//! Each client fills a cart with `adds` items, one transaction per item
//! (it reads the item's INVENTORY row and appends the item to its CART
//! row), then checks out:
//!
//! * **purchase** (type 1): read the cart, take one unit of each item's
//!   stock, empty the cart;
//! * **clear** (type 2): empty the cart without reading it, a *blind
//!   write* (declared with [`KeySet::blind_write`]).
//!
//! `blind_pct` percent of checkouts clear. Under `--cc lazy` an addition
//! ends its now-phase at once (nothing decides its commit), leaving its cart
//! row sticky; checkouts run eagerly ("checkouts are evaluated
//! immediately"). A purchase substantiates the cart's chain of additions; a
//! clear overwrites it unread, so the additions never run at all and still
//! count as committed: lazy's throughput rises with the blind fraction,
//! eager execution's does not.
//!
//! Tables: INVENTORY (`item u64` big-endian to `stock u64 | price u64`,
//! padded to `item_bytes`), CART (`client u32 | slot u32` big-endian to
//! `n u32 | n x item u64`). Client thread `c` uses carts `(c, 0..carts)` in
//! turn, one session each, so a cart is only ever one client's.
//!
//! Check after a run: every unit of stock taken is one that a committed
//! purchase took (the run's tally), and no cart holds more than `adds`
//! items.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Error, KeySet, Request, TableId, Transaction, TxError, TxResult, Worker};

use crate::driver::Workload;

/// Stock of every item at load: far more than a run can take.
pub const INITIAL_STOCK: u64 = 1 << 40;

/// Rows per load transaction.
const LOAD_BATCH: u64 = 1_000;

/// The knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CartConfig {
    /// INVENTORY rows.
    pub items: u64,
    /// Bytes of an INVENTORY row (at least 16).
    pub item_bytes: usize,
    /// Carts per client thread, used in turn.
    pub carts: u32,
    /// Items added per cart before its checkout (the thesis: 20).
    pub adds: u32,
    /// Percentage of checkouts that clear the cart (a blind write).
    pub blind_pct: u32,
}

impl Default for CartConfig {
    fn default() -> Self {
        CartConfig {
            items: 100_000,
            item_bytes: 100,
            carts: 1_000,
            adds: 20,
            blind_pct: 50,
        }
    }
}

impl CartConfig {
    /// Refuse knobs that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.items == 0 {
            return Err("--items must be at least 1".into());
        }
        if self.item_bytes < 16 {
            return Err("--item-bytes must be at least 16".into());
        }
        if self.carts == 0 {
            return Err("--carts must be at least 1".into());
        }
        if !(1..=1_000).contains(&self.adds) {
            return Err("--adds must be in 1..=1000".into());
        }
        if self.blind_pct > 100 {
            return Err("--blind-pct must be in 0..=100".into());
        }
        Ok(())
    }
}

/// The tables' ids.
#[derive(Clone, Copy, Debug)]
pub struct CartTables {
    /// INVENTORY.
    pub inventory: TableId,
    /// CART.
    pub cart: TableId,
}

/// One transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CartOp {
    /// Read `item`'s INVENTORY row, append `item` to the cart.
    Add {
        /// The cart.
        cart: u64,
        /// The item.
        item: u64,
    },
    /// Take one unit of each item in the cart, empty it; `items` are the
    /// ones the client added (its declared writes).
    Purchase {
        /// The cart.
        cart: u64,
        /// The items added since the last checkout.
        items: Vec<u64>,
    },
    /// Empty the cart without reading it.
    Clear {
        /// The cart.
        cart: u64,
    },
}

/// A cart transaction as a request and a loggable procedure. Its output is
/// the units of stock it took (a purchase's items; 0 otherwise).
#[derive(Clone, Debug)]
pub struct CartProc {
    t: CartTables,
    op: CartOp,
}

impl CartProc {
    /// `op` on tables `t`.
    pub fn new(t: CartTables, op: CartOp) -> CartProc {
        CartProc { t, op }
    }

    /// The transaction.
    pub fn op(&self) -> &CartOp {
        &self.op
    }
}

fn key8(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

/// A cart's key: client and slot.
pub fn cart_key(client: u32, slot: u32) -> u64 {
    (u64::from(client) << 32) | u64::from(slot)
}

/// The items of a CART row.
fn cart_items(v: Option<&[u8]>) -> TxResult<Vec<u64>> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let bad = || {
        TxError::Error(Error::Corrupt(format!(
            "cart row of {} bytes is malformed",
            v.len()
        )))
    };
    let n = u32::from_le_bytes(v.get(..4).ok_or_else(bad)?.try_into().expect("4 bytes")) as usize;
    let body = v.get(4..).filter(|b| b.len() == n * 8).ok_or_else(bad)?;
    Ok(body
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

fn cart_row(items: &[u64]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + 8 * items.len());
    v.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for i in items {
        v.extend_from_slice(&i.to_le_bytes());
    }
    v
}

impl Request for CartProc {
    type Output = i64;

    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        let t = self.t;
        match &self.op {
            CartOp::Add { cart, item } => {
                if tx.get(t.inventory, &key8(*item))?.is_none() {
                    return Err(TxError::Error(Error::InvalidArgument(format!(
                        "cart: item {item} is not in the inventory"
                    ))));
                }
                let mut items = cart_items(tx.get(t.cart, &key8(*cart))?)?;
                items.push(*item);
                tx.put(t.cart, &key8(*cart), &cart_row(&items))?;
                Ok(0)
            }
            CartOp::Purchase {
                cart,
                items: declared,
            } => {
                let items = cart_items(tx.get(t.cart, &key8(*cart))?)?;
                // The writes are declared from what the client added; a
                // cart that holds anything else is refused, deterministically.
                if items.iter().any(|i| !declared.contains(i)) {
                    return Err(TxError::Error(Error::UserAbort));
                }
                for i in &items {
                    let k = key8(*i);
                    let mut row = match tx.get(t.inventory, &k)? {
                        Some(v) if v.len() >= 16 => v.to_vec(),
                        _ => {
                            return Err(TxError::Error(Error::Corrupt(format!(
                                "inventory row of item {i} is missing or short"
                            ))))
                        }
                    };
                    let stock = u64::from_le_bytes(row[..8].try_into().expect("8 bytes"));
                    row[..8].copy_from_slice(&stock.saturating_sub(1).to_le_bytes());
                    tx.put(t.inventory, &k, &row)?;
                }
                tx.put(t.cart, &key8(*cart), &cart_row(&[]))?;
                Ok(items.len() as i64)
            }
            CartOp::Clear { cart } => {
                tx.put(t.cart, &key8(*cart), &cart_row(&[]))?;
                Ok(0)
            }
        }
    }

    fn declare(&self, keys: &mut KeySet) -> bool {
        let t = self.t;
        match &self.op {
            CartOp::Add { cart, item } => {
                keys.read(t.inventory, &key8(*item));
                keys.write(t.cart, &key8(*cart));
            }
            CartOp::Purchase { cart, items } => {
                keys.write(t.cart, &key8(*cart));
                for i in items {
                    keys.write(t.inventory, &key8(*i));
                }
            }
            CartOp::Clear { cart } => keys.blind_write(t.cart, &key8(*cart)),
        }
        true
    }
}

impl tessera::det::Procedure for CartProc {
    const ID: tessera::det::ProcId = 0x0500;
    const NAME: &'static str = "cart";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.inventory.as_u32().to_le_bytes());
        out.extend_from_slice(&self.t.cart.as_u32().to_le_bytes());
        match &self.op {
            CartOp::Add { cart, item } => {
                out.push(0);
                out.extend_from_slice(&cart.to_le_bytes());
                out.extend_from_slice(&item.to_le_bytes());
            }
            CartOp::Purchase { cart, items } => {
                out.push(1);
                out.extend_from_slice(&cart.to_le_bytes());
                out.extend_from_slice(&(items.len() as u32).to_le_bytes());
                for i in items {
                    out.extend_from_slice(&i.to_le_bytes());
                }
            }
            CartOp::Clear { cart } => {
                out.push(2);
                out.extend_from_slice(&cart.to_le_bytes());
            }
        }
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = tessera::det::ArgReader::new("cart", b);
        let t = CartTables {
            inventory: TableId::from_u32(r.u32()?),
            cart: TableId::from_u32(r.u32()?),
        };
        let op = match r.u8()? {
            0 => CartOp::Add {
                cart: r.u64()?,
                item: r.u64()?,
            },
            1 => {
                let cart = r.u64()?;
                let n = r.u32()? as usize;
                if n > b.len() / 8 {
                    return Err(format!("cart purchase of {n} items in {} bytes", b.len()));
                }
                let items = (0..n).map(|_| r.u64()).collect::<Result<_, _>>()?;
                CartOp::Purchase { cart, items }
            }
            2 => CartOp::Clear { cart: r.u64()? },
            x => return Err(format!("cart operation {x}")),
        };
        r.finish()?;
        Ok(CartProc { t, op })
    }

    /// Lazy: an addition decides nothing (it always commits), so its
    /// now-phase ends at once and its cart row is left sticky; checkouts
    /// run eagerly.
    fn now_phase(&mut self, _tx: &mut tessera::Txn<'_>) -> TxResult<tessera::det::NowPhase<i64>> {
        Ok(match self.op {
            CartOp::Add { .. } => tessera::det::NowPhase::Ended(0),
            _ => tessera::det::NowPhase::Eager,
        })
    }

    fn later_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<()> {
        self.run(tx).map(drop)
    }
}

/// The workload.
pub struct Cart {
    cfg: CartConfig,
    tables: OnceLock<CartTables>,
    /// Units of stock committed purchases took (threads add theirs at the
    /// end of the run).
    taken: Arc<AtomicI64>,
}

/// A client thread: its carts and the session in progress.
pub struct CartThread {
    rng: SmallRng,
    client: u32,
    session: u64,
    /// Items added in this session.
    added: Vec<u64>,
    /// The current transaction.
    op: CartOp,
    taken: i64,
    total: Arc<AtomicI64>,
}

impl Drop for CartThread {
    fn drop(&mut self) {
        self.total.fetch_add(self.taken, Ordering::Relaxed);
    }
}

/// What the check found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CartCheck {
    /// INVENTORY rows.
    pub items: u64,
    /// Units of stock missing from INVENTORY.
    pub taken: u64,
    /// Units committed purchases took.
    pub purchased: i64,
    /// The largest cart.
    pub max_cart: u64,
    /// Whether it all adds up.
    pub passed: bool,
}

impl CartCheck {
    /// One line for the report.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} units taken from {} items, {} by committed purchases; largest cart {}",
            if self.passed {
                "stock adds up"
            } else {
                "STOCK DOES NOT ADD UP"
            },
            self.taken,
            self.items,
            self.purchased,
            self.max_cart
        )
    }
}

impl Cart {
    /// The workload for these knobs (validated).
    pub fn new(cfg: CartConfig) -> Result<Cart, String> {
        cfg.validate()?;
        Ok(Cart {
            cfg,
            tables: OnceLock::new(),
            taken: Arc::default(),
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &CartConfig {
        &self.cfg
    }

    /// The tables, once loaded.
    pub fn tables(&self) -> Option<CartTables> {
        self.tables.get().copied()
    }

    /// The current transaction of `st` as an owned, loggable request.
    pub fn procedure(&self, st: &CartThread) -> CartProc {
        CartProc {
            t: self
                .tables()
                .expect("the cart workload run before it was loaded"),
            op: st.op.clone(),
        }
    }

    /// Units committed purchases took (every thread's, once they ended).
    pub fn purchased(&self) -> i64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// The check over the rows of INVENTORY and CART (however they were
    /// read: deterministic engines dump theirs), given the units committed
    /// purchases took.
    pub fn check_rows<V: AsRef<[u8]>>(
        &self,
        inventory: &[V],
        carts: &[V],
        purchased: i64,
    ) -> Result<CartCheck, Error> {
        let mut taken = 0u64;
        for v in inventory {
            let v = v.as_ref();
            let stock = v
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .ok_or_else(|| Error::Corrupt("cart: a short inventory row".into()))?;
            taken += INITIAL_STOCK.saturating_sub(stock);
        }
        let mut max_cart = 0;
        for v in carts {
            let n = cart_items(Some(v.as_ref())).map_err(|e| match e {
                TxError::Error(e) => e,
                e => Error::Corrupt(format!("cart: {e}")),
            })?;
            max_cart = max_cart.max(n.len() as u64);
        }
        let items = inventory.len() as u64;
        Ok(CartCheck {
            items,
            taken,
            purchased,
            max_cart,
            passed: items == self.cfg.items
                && taken as i64 == purchased
                && max_cart <= u64::from(self.cfg.adds),
        })
    }

    /// The check on an interactive database after a run.
    pub fn check(&self, db: &Database) -> Result<CartCheck, Error> {
        let t = self
            .tables()
            .ok_or_else(|| Error::InvalidArgument("cart checked before it was loaded".into()))?;
        let mut w = db.worker()?;
        let inv = crate::driver::table_values(&mut w, t.inventory)?;
        let carts = crate::driver::table_values(&mut w, t.cart)?;
        self.check_rows(&inv, &carts, self.purchased())
    }
}

impl Workload for Cart {
    type Thread = CartThread;

    fn name(&self) -> &'static str {
        "cart"
    }

    fn txn_types(&self) -> &[&'static str] {
        &["add", "purchase", "clear"]
    }

    fn rows_to_load(&self) -> u64 {
        self.cfg.items
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
        let t = CartTables {
            inventory: get("inventory")?,
            cart: get("cart")?,
        };
        let t = *self.tables.get_or_init(|| t);
        let n = self.cfg.items;
        let size = self.cfg.item_bytes;
        crate::driver::load_rows(
            db,
            n,
            threads,
            LOAD_BATCH,
            progress,
            |tx, item, row| {
                row.resize(size, 0);
                row[..8].copy_from_slice(&INITIAL_STOCK.to_le_bytes());
                row[8..16].copy_from_slice(&(100 + item % 900).to_le_bytes());
                tx.insert(t.inventory, &key8(item), row)
            },
            &|item| format!("cart: item {item} exists already: load into an empty database"),
        )?;
        Ok(n)
    }

    fn thread_state(&self, thread: usize, _threads: usize, seed: u64) -> CartThread {
        CartThread {
            rng: SmallRng::seed_from_u64(seed),
            client: thread as u32,
            session: 0,
            added: Vec::with_capacity(self.cfg.adds as usize),
            op: CartOp::Clear { cart: 0 },
            taken: 0,
            total: Arc::clone(&self.taken),
        }
    }

    fn next(&self, st: &mut CartThread) -> usize {
        let cart = cart_key(st.client, (st.session % u64::from(self.cfg.carts)) as u32);
        if st.added.len() < self.cfg.adds as usize {
            let item = st.rng.gen_range(0..self.cfg.items);
            st.added.push(item);
            st.op = CartOp::Add { cart, item };
            return 0;
        }
        st.session += 1;
        let items = std::mem::take(&mut st.added);
        if st.rng.gen_range(0..100) < self.cfg.blind_pct {
            st.op = CartOp::Clear { cart };
            2
        } else {
            st.op = CartOp::Purchase { cart, items };
            1
        }
    }

    fn execute(&self, st: &mut CartThread, w: &mut Worker) -> TxResult<()> {
        let t = self
            .tables()
            .expect("the cart workload run before it was loaded");
        let mut p = CartProc {
            t,
            op: st.op.clone(),
        };
        st.taken += w.try_execute(&mut p)?;
        Ok(())
    }

    fn config(&self) -> serde_json::Value {
        let c = &self.cfg;
        serde_json::json!({
            "items": c.items,
            "item_bytes": c.item_bytes,
            "carts_per_client": c.carts,
            "adds_per_checkout": c.adds,
            "blind_pct": c.blind_pct,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::det::Procedure;
    use tessera::Options;

    fn small() -> Cart {
        Cart::new(CartConfig {
            items: 500,
            carts: 4,
            adds: 5,
            blind_pct: 50,
            ..CartConfig::default()
        })
        .unwrap()
    }

    /// Sessions of additions then a checkout; the stock taken is what the
    /// purchases took; procedures round-trip their encoding.
    #[test]
    fn sessions_check_out_and_the_stock_adds_up() {
        let wl = small();
        let db = Database::open(Options::in_memory()).unwrap();
        wl.load(&db, 2, &|_| {}).unwrap();
        let mut w = db.worker().unwrap();
        {
            let mut st = wl.thread_state(3, 4, 7);
            let mut kinds = [0; 3];
            for _ in 0..600 {
                let k = wl.next(&mut st);
                kinds[k] += 1;
                let p = wl.procedure(&st);
                let mut b = Vec::new();
                p.encode(&mut b);
                let q = CartProc::decode(&b).unwrap();
                assert_eq!(q.op(), p.op());
                assert!(CartProc::decode(&b[..b.len() - 1]).is_err());
                wl.execute(&mut st, &mut w).unwrap();
            }
            assert_eq!(kinds[0], 500, "{kinds:?}");
            assert!(kinds[1] > 20 && kinds[2] > 20, "{kinds:?}");
        }
        let c = wl.check(&db).unwrap();
        assert!(c.passed, "{c:?}");
        assert!(c.taken > 0 && c.max_cart <= 5, "{c:?}");
        // The check catches stock taken outside a purchase.
        let t = wl.tables().unwrap();
        w.run(|tx| tx.put(t.inventory, &key8(3), &[0u8; 16]))
            .unwrap();
        assert!(!wl.check(&db).unwrap().passed);
    }

    /// A clear is declared as a blind write, an addition reads the cart.
    #[test]
    fn a_clear_is_a_blind_write() {
        let t = CartTables {
            inventory: TableId::from_u32(0),
            cart: TableId::from_u32(1),
        };
        let mut ks = KeySet::new();
        CartProc::new(t, CartOp::Clear { cart: 9 }).declare(&mut ks);
        assert!(ks.iter().all(|d| d.blind));
        assert!(!ks.covers(t.cart, tessera::Access::Read, &key8(9)));
        let mut ks = KeySet::new();
        CartProc::new(t, CartOp::Add { cart: 9, item: 1 }).declare(&mut ks);
        assert!(ks.covers(t.cart, tessera::Access::Read, &key8(9)));
    }

    #[test]
    fn bad_knobs_are_refused() {
        for c in [
            CartConfig {
                items: 0,
                ..CartConfig::default()
            },
            CartConfig {
                blind_pct: 101,
                ..CartConfig::default()
            },
            CartConfig {
                adds: 0,
                ..CartConfig::default()
            },
        ] {
            assert!(Cart::new(c).is_err());
        }
    }
}
