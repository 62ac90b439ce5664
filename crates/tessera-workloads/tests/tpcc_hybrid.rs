//! TPC-C-hybrid end to end: the extra tables and the stock-to-supplier
//! mapping after a load, one Q2* against an expectation computed here from
//! the raw tables (not with the workload's own mapping code), and a short
//! two-thread Silo run in which every type commits and the TPC-C
//! consistency conditions hold.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use tessera::{Database, Options, Protocol, ScanOptions, Worker};
use tessera_workloads::driver::{self, RunConfig, Workload};
use tessera_workloads::tpcc::check_consistency;
use tessera_workloads::tpcc::hybrid::{
    self, HybridConfig, HybridTxn, Q2Input, Q2Scratch, TpccHybrid, SUPPLIERS,
};
use tessera_workloads::tpcc::schema::{Nation, Region, Row, Stock, Supplier};
use tessera_workloads::tpcc::ITEMS;

fn run_config(threads: usize, seconds: f64) -> RunConfig {
    RunConfig {
        threads,
        load_threads: 2,
        seconds,
        warmup: 0.0,
        quiet: true,
        seed: 13,
        backoff: true,
        retry: true,
        durability: tessera::Durability::None,
        declared: false,
        txns: None,
    }
}

/// Every row of table `t`, decoded, in key order.
fn all_rows<R: Row>(w: &mut Worker, t: tessera::TableId) -> Vec<R> {
    w.run(|tx| {
        let mut out = Vec::new();
        tx.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new(),
            |_, v| {
                out.push(R::decode(v).expect("row decodes"));
                true
            },
        )?;
        Ok(out)
    })
    .unwrap()
}

/// The S_QUANTITY of every STOCK row of warehouse 1, indexed by item id, and
/// the rows' bytes with S_QUANTITY zeroed (to check nothing else changes).
fn stock_of_w1(w: &mut Worker, stock: tessera::TableId) -> (Vec<i32>, Vec<Stock>) {
    let rows: Vec<Stock> = all_rows(w, stock);
    assert_eq!(rows.len(), ITEMS as usize);
    let mut q = vec![i32::MIN; ITEMS as usize + 1];
    let mut rest = Vec::with_capacity(rows.len());
    for mut r in rows {
        assert_eq!(r.s_w_id, 1);
        q[r.s_i_id as usize] = r.s_quantity;
        r.s_quantity = 0;
        rest.push(r);
    }
    (q, rest)
}

#[test]
fn load_mapping_and_one_q2_star() {
    let cfg = HybridConfig::new(1);
    let wl = TpccHybrid::new(cfg.clone()).unwrap();
    let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(4)).unwrap();
    let load = driver::load(&db, &wl, &run_config(2, 1.0)).unwrap();
    assert_eq!(load.records, wl.rows_to_load());
    let t = wl.tables().unwrap();
    let h = wl.hybrid_tables().unwrap();
    let mut w = db.worker().unwrap();

    // Row counts and references.
    let regions: Vec<Region> = all_rows(&mut w, h.region);
    let nations: Vec<Nation> = all_rows(&mut w, h.nation);
    let suppliers: Vec<Supplier> = all_rows(&mut w, h.supplier);
    assert_eq!(regions.len(), 5);
    assert_eq!(nations.len(), 62);
    assert_eq!(suppliers.len(), 10_000);
    assert_eq!(
        regions.iter().map(|r| r.r_regionkey).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(regions[3].r_name.as_bytes(), b"EUROPE");
    let region_of: HashMap<u8, u8> = nations
        .iter()
        .map(|n| (n.n_nationkey, n.n_regionkey))
        .collect();
    assert_eq!(region_of.len(), 62);
    assert!(region_of.keys().all(|k| k.is_ascii_alphanumeric()));
    assert!(region_of.values().all(|&r| r < 5));
    for (k, s) in suppliers.iter().enumerate() {
        assert_eq!(s.su_suppkey as usize, k);
        assert!(region_of.contains_key(&s.su_nationkey), "{s:?}");
        assert!(s.su_name.as_bytes().starts_with(b"Supplier#"));
    }
    // Suppliers spread over the nations (uniform: about 161 each).
    let mut per_nation: HashMap<u8, u32> = HashMap::new();
    for s in &suppliers {
        *per_nation.entry(s.su_nationkey).or_default() += 1;
    }
    assert_eq!(per_nation.len(), 62);
    assert!(per_nation.values().all(|&n| (80..260).contains(&n)));

    // The mapping of warehouse 1: supplier s supplies items i = s (mod 10000).
    let map = wl.supply_map();
    for s in [0u16, 1, 4999, 9999] {
        let items: Vec<u32> = map.items(1, s).collect();
        let expect: Vec<u32> = (1..=ITEMS).filter(|i| i % SUPPLIERS == s as u32).collect();
        assert_eq!(items, expect, "supplier {s}");
        assert_eq!(items.len(), 10);
    }

    // One Q2*: region 3, 1,000 suppliers from 9,500 (wrapping to 0..=499).
    let inp = Q2Input {
        region: 3,
        first: 9_500,
        suppliers: 1_000,
        threshold: hybrid::Q2_THRESHOLD,
        refill: hybrid::Q2_REFILL,
    };
    let chosen: HashSet<u32> = (9_500..10_000)
        .chain(0..500)
        .filter(|&s| region_of[&suppliers[s as usize].su_nationkey] == 3)
        .collect();
    let (before, rest_before) = stock_of_w1(&mut w, t.stock);
    // The expectation, straight from the rule: every stock row (1, i) with
    // (1 * i) mod 10000 a chosen supplier and S_QUANTITY below 15.
    let read: Vec<u32> = (1..=ITEMS)
        .filter(|i| chosen.contains(&(i % SUPPLIERS)))
        .collect();
    let low: HashSet<u32> = read
        .iter()
        .copied()
        .filter(|&i| before[i as usize] < 15)
        .collect();
    assert!(!low.is_empty(), "the test needs some low stock rows");

    let mut s = Q2Scratch::new();
    let out = w
        .run(|tx| hybrid::q2_star(tx, &t, &h, map, &inp, &mut s))
        .unwrap();
    assert_eq!(out.suppliers_in_region as usize, chosen.len());
    assert_eq!(out.stock_read as usize, read.len());
    assert_eq!(out.stock_updated as usize, low.len());

    let (after, rest_after) = stock_of_w1(&mut w, t.stock);
    for i in 1..=ITEMS as usize {
        let exp = if low.contains(&(i as u32)) {
            before[i] + 91
        } else {
            before[i]
        };
        assert_eq!(after[i], exp, "item {i}");
    }
    // Only S_QUANTITY changed.
    assert!(rest_before == rest_after);

    // Run again: the refilled rows are no longer low, nothing else changed.
    let again = w
        .run(|tx| hybrid::q2_star(tx, &t, &h, map, &inp, &mut s))
        .unwrap();
    assert_eq!(again.stock_read, out.stock_read);
    assert_eq!(again.stock_updated, 0);

    let rep = check_consistency(&db, wl.tpcc_config()).unwrap();
    assert!(rep.passed, "{}", rep.summary());
}

/// Every isolated protocol of the list (a newly listed one is checked by
/// being listed).
#[test]
fn two_threads_under_every_protocol_commit_every_type_and_stay_consistent() {
    for p in Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().serializable || p.caps().snapshot_reads)
    {
        every_type_commits_and_stays_consistent(p);
    }
}

fn every_type_commits_and_stays_consistent(protocol: Protocol) {
    let mut cfg = HybridConfig::new(2);
    // Q2* at 5%: large enough to conflict with NewOrder, small enough to
    // commit often in a short run of the (lightly optimised) test build.
    cfg.extra.size_pct = 5;
    let wl = TpccHybrid::new(cfg).unwrap();
    let db = Database::open(Options::in_memory().protocol(protocol).workers(4)).unwrap();
    let rep = driver::bench(&db, &wl, &run_config(2, 1.5)).unwrap();
    eprintln!("{}", rep.table());
    let names: Vec<&str> = rep.transactions.iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        HybridTxn::ALL.map(HybridTxn::name),
        "six types in mix order"
    );
    for (name, r) in rep.transactions.iter() {
        assert!(r.committed > 0, "no {name} committed: {r:?}");
    }
    assert_eq!(rep.workload, "tpcc-hybrid");
    assert_eq!(rep.config["q2_size_pct"], 5);
    let cons = check_consistency(&db, wl.tpcc_config()).unwrap();
    assert!(cons.passed, "{}", cons.summary());
}
