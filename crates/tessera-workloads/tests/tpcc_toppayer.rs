//! The top-payer TPC-C (Cai et al.) end to end: one top payer against an
//! expectation set up here (payments that make a known customer the top
//! payer of a range, a tie, a larger payer outside the range), the reward's
//! effects on every row it touches, and a short two-thread run under every
//! isolated protocol in which every type commits and the TPC-C consistency
//! conditions hold.

use tessera::{Database, Options, Protocol, Worker};
use tessera_workloads::driver::{self, RunConfig};
use tessera_workloads::tpcc::check_consistency;
use tessera_workloads::tpcc::schema::{
    customer_key, district_key, history_key, warehouse_key, Customer, District, History, Row,
    Tables, Warehouse,
};
use tessera_workloads::tpcc::toppayer::{
    self, TopPayerConfig, TopPayerInput, TopPayerTxn, TpccTopPayer, REWARD_CENTS,
};
use tessera_workloads::tpcc::txns::{self, CustomerSel, PaymentInput, Recon, Scratch};

fn run_config(threads: usize, seconds: f64) -> RunConfig {
    RunConfig {
        threads,
        load_threads: 2,
        seconds,
        warmup: 0.0,
        quiet: true,
        seed: 17,
        backoff: true,
        retry: true,
        durability: tessera::Durability::None,
        declared: false,
        txns: None,
    }
}

fn row<R: Row>(w: &mut Worker, t: tessera::TableId, key: &[u8]) -> R {
    w.run(|tx| Ok(tx.get(t, key)?.map(|v| R::decode(v).expect("row decodes"))))
        .unwrap()
        .expect("row exists")
}

/// A Payment of `cents` by customer `c` of district 3, warehouse 1.
fn pay(w: &mut Worker, t: &Tables, c: u32, cents: i64, seq: u64) {
    let inp = PaymentInput {
        w_id: 1,
        d_id: 3,
        c_w_id: 1,
        c_d_id: 3,
        customer: CustomerSel::Id(c),
        h_amount: cents,
        h_date: 1,
        h_key: history_key(9_000, seq),
    };
    let mut s = Scratch::default();
    w.run(|tx| txns::payment(tx, t, &inp, &Recon::default(), &mut s))
        .unwrap();
}

#[test]
fn one_top_payer_rewards_the_largest_payer_of_its_range() {
    let wl = TpccTopPayer::new(TopPayerConfig::new(1)).unwrap();
    let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(4)).unwrap();
    driver::load(&db, &wl, &run_config(2, 1.0)).unwrap();
    let t = wl.tables().unwrap();
    let mut w = db.worker().unwrap();

    // Customers 300 and 450 pay the same amount (a tie: 300 wins), 299 and
    // 701 just outside the range 300..=699 pay more.
    pay(&mut w, &t, 450, 5_000, 1);
    pay(&mut w, &t, 300, 5_000, 2);
    pay(&mut w, &t, 299, 90_000, 3);
    pay(&mut w, &t, 700, 90_000, 4);
    let before: Customer = row(&mut w, t.customer, &customer_key(1, 3, 300));
    let wh: Warehouse = row(&mut w, t.warehouse, &warehouse_key(1));
    let dist: District = row(&mut w, t.district, &district_key(1, 3));

    let inp = TopPayerInput {
        w_id: 1,
        d_id: 3,
        first: 300,
        count: 400,
        h_date: 77,
        h_key: history_key(9_001, 0),
    };
    let mut s = Scratch::default();
    let out = w
        .run(|tx| toppayer::top_payer(tx, &t, &inp, &mut s))
        .unwrap();
    assert_eq!(out.c_id, 300, "the tie goes to the smaller id");
    assert_eq!(out.ytd_payment, before.c_ytd_payment);
    assert_eq!(out.payment.c_id, 300);

    let after: Customer = row(&mut w, t.customer, &customer_key(1, 3, 300));
    assert_eq!(after.c_balance, before.c_balance - REWARD_CENTS);
    assert_eq!(after.c_ytd_payment, before.c_ytd_payment + REWARD_CENTS);
    assert_eq!(after.c_payment_cnt, before.c_payment_cnt + 1);
    let wh2: Warehouse = row(&mut w, t.warehouse, &warehouse_key(1));
    let dist2: District = row(&mut w, t.district, &district_key(1, 3));
    assert_eq!(wh2.w_ytd, wh.w_ytd + REWARD_CENTS);
    assert_eq!(dist2.d_ytd, dist.d_ytd + REWARD_CENTS);
    let h: History = row(&mut w, t.history, &inp.h_key);
    assert_eq!(
        (h.h_c_id, h.h_c_d_id, h.h_c_w_id, h.h_amount, h.h_date),
        (300, 3, 1, REWARD_CENTS, 77)
    );

    // Now 300 is ahead of 450 by the reward: a range without 300 finds 450.
    let inp = TopPayerInput {
        first: 301,
        count: 399,
        h_key: history_key(9_001, 1),
        ..inp
    };
    let out = w
        .run(|tx| toppayer::top_payer(tx, &t, &inp, &mut s))
        .unwrap();
    assert_eq!(out.c_id, 450);

    let rep = check_consistency(&db, wl.tpcc_config()).unwrap();
    assert!(rep.passed, "{}", rep.summary());
}

/// Every isolated protocol of the list.
#[test]
fn two_threads_under_every_protocol_commit_every_type_and_stay_consistent() {
    for p in Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().serializable || p.caps().snapshot_reads)
    {
        let wl = TpccTopPayer::new(TopPayerConfig::new(2)).unwrap();
        let db = Database::open(Options::in_memory().protocol(p).workers(4)).unwrap();
        let rep = driver::bench(&db, &wl, &run_config(2, 1.0)).unwrap();
        let names: Vec<&str> = rep.transactions.iter().map(|(n, _)| n).collect();
        assert_eq!(names, TopPayerTxn::ALL.map(TopPayerTxn::name), "{p}");
        for (name, r) in rep.transactions.iter() {
            assert!(r.committed > 0, "{p}: no {name} committed: {r:?}");
        }
        assert_eq!(rep.workload, "tpcc-toppayer");
        assert_eq!(rep.config["top_payer_scan"], toppayer::DEFAULT_SCAN);
        let cons = check_consistency(&db, wl.tpcc_config()).unwrap();
        assert!(cons.passed, "{p}: {}", cons.summary());
    }
}
