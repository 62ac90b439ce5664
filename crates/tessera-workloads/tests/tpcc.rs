//! TPC-C end to end: the population satisfies every consistency condition,
//! the transactions behave as the spec says on the loaded data, and a short
//! high-contention run under Silo keeps every condition.

use std::time::Instant;

use tessera::{Database, Options, Protocol, TxError};
use tessera_workloads::driver::{self, RunConfig, Workload};
use tessera_workloads::tpcc::schema::{self, Customer, District, Row, Tables, Text};
use tessera_workloads::tpcc::txns::{self, CustomerSel, Recon, Scratch};
use tessera_workloads::tpcc::{check_consistency, random, Tpcc, TpccConfig, TxnType};

fn assert_consistent(db: &Database, cfg: &TpccConfig, when: &str) {
    let t0 = Instant::now();
    let rep = check_consistency(db, cfg).expect("consistency check runs");
    eprintln!(
        "consistency check {when}: {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        rep.passed,
        "{when}: {}\n{}",
        rep.summary(),
        serde_json::to_string_pretty(&rep).unwrap()
    );
    for (name, c) in &rep.conditions.0 {
        assert!(c.checked > 0, "{when}: condition {name} checked nothing");
    }
}

/// The transactions on freshly loaded data, one at a time: NewOrder's
/// rollback leaves nothing behind, Payment by last name picks the middle
/// customer, OrderStatus finds the latest order, Delivery delivers the
/// oldest order of every district, StockLevel counts.
fn spec_behaviour(db: &Database, wl: &Tpcc) {
    let t: Tables = wl.tables().unwrap();
    let mut w = db.worker().unwrap();
    let mut s = Scratch::default();

    let next_o_id = |w: &mut tessera::Worker, d: u8| {
        w.run(|tx| {
            let v = tx.get(t.district, &schema::district_key(1, d))?.unwrap();
            Ok(District::decode(v).unwrap().d_next_o_id)
        })
        .unwrap()
    };
    assert_eq!(next_o_id(&mut w, 3), 3001);

    // A rolled-back NewOrder (unused item id last) changes nothing.
    let mut no = txns::NewOrderInput {
        w_id: 1,
        d_id: 3,
        c_id: 42,
        o_entry_d: 1,
        ol_cnt: 5,
        ..Default::default()
    };
    for (i, l) in no.lines[..5].iter_mut().enumerate() {
        *l = txns::LineInput {
            i_id: 1000 + i as u32,
            supply_w_id: 1,
            quantity: 3,
        };
    }
    no.lines[4].i_id = tessera_workloads::tpcc::ITEMS + 1;
    let r = w.try_run(|tx| txns::new_order(tx, &t, &no, &mut s));
    assert!(
        matches!(r, Err(TxError::Error(tessera::Error::UserAbort))),
        "{r:?}"
    );
    assert_eq!(next_o_id(&mut w, 3), 3001);

    // A real one takes D_NEXT_O_ID and is the customer's latest order.
    no.lines[4].i_id = 7;
    let out = w.run(|tx| txns::new_order(tx, &t, &no, &mut s)).unwrap();
    assert_eq!(out.o_id, 3001);
    assert!(out.total_amount > 0.0);
    assert_eq!(next_o_id(&mut w, 3), 3002);
    let os = w
        .run(|tx| {
            txns::order_status(
                tx,
                &t,
                &txns::OrderStatusInput {
                    w_id: 1,
                    d_id: 3,
                    customer: CustomerSel::Id(42),
                },
                &Recon::default(),
                &mut s,
            )
        })
        .unwrap();
    assert_eq!(
        (os.c_id, os.o_id, os.o_carrier_id, os.lines),
        (42, 3001, 0, 5)
    );

    // Payment by last name: the customer at position ceil(n/2) of those
    // with that name, ordered by first name.
    let last = Text::<16>::new(random::last_name_string(7).as_bytes());
    let mut matches: Vec<(Vec<u8>, u32)> = w
        .run(|tx| {
            let mut v = Vec::new();
            tx.scan(
                t.customer,
                std::ops::Bound::Included(&schema::customer_key(1, 2, 0)[..]),
                std::ops::Bound::Included(&schema::customer_key(1, 2, u32::MAX)[..]),
                tessera::ScanOptions::new(),
                |_, val| {
                    let c = Customer::decode(val).unwrap();
                    if c.c_last == last {
                        v.push((c.c_first.as_bytes().to_vec(), c.c_id));
                    }
                    true
                },
            )?;
            Ok(v)
        })
        .unwrap();
    matches.sort();
    assert!(!matches.is_empty());
    let expect = matches[matches.len().div_ceil(2) - 1].1;
    let pay = txns::PaymentInput {
        w_id: 1,
        d_id: 2,
        c_w_id: 1,
        c_d_id: 2,
        customer: CustomerSel::LastName(last),
        h_amount: 12_345,
        h_date: 1,
        h_key: schema::history_key(u16::MAX, 0),
    };
    let p = w
        .run(|tx| txns::payment(tx, &t, &pay, &Recon::default(), &mut s))
        .unwrap();
    assert_eq!(p.c_id, expect, "{} customers named {last:?}", matches.len());

    // Delivery: the oldest undelivered order of each district (2101).
    let dl = txns::DeliveryInput {
        w_id: 1,
        carrier_id: 4,
        delivery_d: 99,
    };
    let n = w
        .run(|tx| txns::delivery(tx, &t, &dl, &Recon::default(), &mut s))
        .unwrap();
    assert_eq!(n, 10);
    let o = w
        .run(|tx| {
            let v = tx.get(t.order, &schema::order_key(1, 5, 2101))?.unwrap();
            Ok(schema::Order::decode(v).unwrap())
        })
        .unwrap();
    assert_eq!(o.o_carrier_id, 4);

    let low = w
        .run(|tx| {
            txns::stock_level(
                tx,
                &t,
                &txns::StockLevelInput {
                    w_id: 1,
                    d_id: 3,
                    threshold: 20,
                },
                &mut s,
            )
        })
        .unwrap();
    // At most the distinct items of 20 orders of at most 15 lines.
    assert!(low <= 300);
}

#[test]
fn load_check_run_check() {
    let cfg = TpccConfig::new(1);
    let wl = Tpcc::new(cfg.clone()).unwrap();
    let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(8)).unwrap();
    let run = RunConfig {
        threads: 4,
        load_threads: 2,
        seconds: 2.0,
        warmup: 0.0,
        quiet: true,
        seed: 7,
        backoff: true,
        retry: true,
        durability: tessera::Durability::None,
        declared: false,
        txns: None,
    };
    let t0 = Instant::now();
    let load = driver::load(&db, &wl, &run).unwrap();
    eprintln!(
        "loaded 1 warehouse ({} rows) in {:.2} s",
        load.records,
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(load.records, wl.rows_to_load());
    assert_consistent(&db, &cfg, "after the load");

    spec_behaviour(&db, &wl);
    assert_consistent(&db, &cfg, "after single transactions");

    // 4 terminals on one warehouse: maximal contention.
    let rep = driver::run(&db, &wl, &run, load).unwrap();
    eprintln!("{}", rep.table());
    for ty in TxnType::ALL {
        let r = rep.transactions.get(ty.name()).unwrap();
        assert!(r.committed > 0, "no {} committed", ty.name());
    }
    // About 1% of NewOrders roll back.
    let no = rep.transactions.get("new_order").unwrap();
    assert!(no.user_aborts > 0 || no.committed < 300, "{no:?}");
    assert_consistent(&db, &cfg, "after the run");
}

/// Load `cfg`, run `threads` terminals for `seconds` under `protocol`, check.
fn run_and_check(cfg: TpccConfig, protocol: Protocol, threads: usize, seconds: f64) {
    let wl = Tpcc::new(cfg.clone()).unwrap();
    let db = Database::open(Options::in_memory().protocol(protocol).workers(4)).unwrap();
    let run = RunConfig {
        threads,
        load_threads: 2,
        seconds,
        warmup: 0.0,
        quiet: true,
        seed: 11,
        backoff: true,
        retry: true,
        durability: tessera::Durability::None,
        declared: false,
        txns: None,
    };
    let rep = driver::bench(&db, &wl, &run).unwrap();
    assert!(rep.committed > 0);
    assert_consistent(
        &db,
        &cfg,
        &format!("{protocol} x{threads}, {} warehouses", cfg.warehouses),
    );
}

/// The isolated protocols of the list (every protocol but one that
/// applies writes without concurrency control): a newly listed protocol is
/// checked by being listed.
fn isolated() -> impl Iterator<Item = Protocol> {
    Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().serializable || p.caps().snapshot_reads)
}

/// Two warehouses: remote order lines and remote payments cross them. Under
/// snapshot isolation too: TPC-C has no write skew that breaks its
/// conditions (every transaction that reads a row it depends on also writes
/// it, or only reads).
#[test]
fn every_protocol_two_warehouses_with_remote_accesses_stays_consistent() {
    for p in isolated() {
        let mut cfg = TpccConfig::new(2);
        // More remote work than the spec's, to exercise it in a short run.
        cfg.remote_item_pct = 20;
        cfg.remote_payment_pct = 50;
        run_and_check(cfg, p, 2, 0.7);
    }
}

/// More terminals than warehouses (contention).
#[test]
fn every_protocol_contended_warehouse_stays_consistent() {
    for p in isolated() {
        run_and_check(TpccConfig::new(1), p, 3, 0.7);
    }
}

/// Without concurrency control a single terminal is still consistent: the
/// rolled-back NewOrders write nothing before they abort.
#[test]
fn nocc_single_thread_stays_consistent() {
    run_and_check(TpccConfig::new(1), Protocol::NoCc, 1, 1.0);
}

/// One warehouse loaded into an in-memory database under `p`.
fn loaded_one_warehouse(p: Protocol) -> (Tpcc, Database) {
    let wl = Tpcc::new(TpccConfig::new(1)).unwrap();
    let db = Database::open(Options::in_memory().protocol(p).workers(4)).unwrap();
    let run = RunConfig {
        load_threads: 2,
        quiet: true,
        ..RunConfig::default()
    };
    driver::load(&db, &wl, &run).unwrap();
    (wl, db)
}

/// The batch entry point: every transaction of the mix declares its key
/// sets (after a reconnaissance for Payment by last name, OrderStatus and
/// Delivery), runs checked against them (an access outside them would be an
/// error, failing this test), and the database stays consistent, under every
/// isolated protocol, with two terminals on one warehouse making some
/// reconnaissance stale.
#[test]
fn every_protocol_runs_declared_batches_consistently() {
    for p in isolated() {
        let cfg = TpccConfig::new(1);
        let (wl, db) = loaded_one_warehouse(p);
        let t = wl.tables().unwrap();
        let (done, stale) = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|th| {
                    let (db, wl) = (&db, &wl);
                    s.spawn(move || {
                        let mut st = wl.thread_state(th, 2, 100 + th as u64);
                        let mut w = db.worker().unwrap();
                        let mut n = [0u32; 5];
                        let t0 = Instant::now();
                        while t0.elapsed().as_secs_f64() < 0.6 {
                            let mut txns: Vec<_> = (0..40)
                                .map(|_| (wl.draw_txn(&mut st), Scratch::default()))
                                .collect();
                            let kinds: Vec<_> = txns.iter().map(|(x, _)| x.kind).collect();
                            let mut reqs: Vec<_> = txns
                                .iter_mut()
                                .map(|(x, s)| tessera_workloads::tpcc::TpccRequest::new(&t, x, s))
                                .collect();
                            for (r, k) in w.execute_batch(&mut reqs).into_iter().zip(kinds) {
                                match r {
                                    Ok(()) => n[k as usize] += 1,
                                    // NewOrder's 1% rollback.
                                    Err(tessera::Error::UserAbort) => {
                                        assert_eq!(k, TxnType::NewOrder)
                                    }
                                    Err(e) => panic!("{p}: {k:?}: {e}"),
                                }
                            }
                        }
                        let stale =
                            w.stats().conflicts[tessera::ConflictReason::Reconnaissance.index()];
                        (n, stale)
                    })
                })
                .collect();
            let mut done = [0u32; 5];
            let mut stale = 0;
            for h in hs {
                let (n, s) = h.join().unwrap();
                for i in 0..5 {
                    done[i] += n[i];
                }
                stale += s;
            }
            (done, stale)
        });
        eprintln!("{p}: committed per type {done:?}, {stale} stale reconnaissances");
        for (i, ty) in TxnType::ALL.into_iter().enumerate() {
            assert!(done[i] > 0, "{p}: no {} committed in batches", ty.name());
        }
        assert_consistent(&db, &cfg, &format!("{p} after declared batches"));
    }
}

/// A reconnaissance made stale by a commit in between is caught by the
/// body's re-check, not acted upon: an OrderStatus reconnoitered, then a
/// NewOrder for the same customer, then the OrderStatus body.
#[test]
fn a_stale_reconnaissance_is_caught() {
    let (wl, db) = loaded_one_warehouse(Protocol::Silo);
    let t = wl.tables().unwrap();
    let mut w = db.worker().unwrap();
    let mut s = Scratch::default();
    let os = txns::OrderStatusInput {
        w_id: 1,
        d_id: 2,
        customer: CustomerSel::Id(7),
    };
    let recon = w
        .run(|tx| txns::reconnoiter_order_status(tx, &t, &os, &mut s))
        .unwrap();
    // The reconnoitered sets cover exactly what the body touches.
    let mut keys = tessera::KeySet::new();
    assert!(txns::declare_order_status(&t, &os, &recon, &mut keys));
    assert!(!txns::declare_order_status(
        &t,
        &os,
        &Recon::default(),
        &mut keys
    ));
    let fresh = w
        .run(|tx| txns::order_status(tx, &t, &os, &recon, &mut s))
        .unwrap();
    assert_eq!((fresh.c_id, Some(fresh.o_id)), (7, recon.o_id));
    let mut no = txns::NewOrderInput {
        w_id: 1,
        d_id: 2,
        c_id: 7,
        o_entry_d: 1,
        ol_cnt: 5,
        ..Default::default()
    };
    for (i, l) in no.lines[..5].iter_mut().enumerate() {
        *l = txns::LineInput {
            i_id: 10 + i as u32,
            supply_w_id: 1,
            quantity: 1,
        };
    }
    w.run(|tx| txns::new_order(tx, &t, &no, &mut s)).unwrap();
    let r = w.try_run(|tx| txns::order_status(tx, &t, &os, &recon, &mut s));
    assert!(
        matches!(
            r,
            Err(TxError::Conflict(tessera::ConflictReason::Reconnaissance))
        ),
        "{r:?}"
    );
}

/// A backup taken in the middle of a TPC-C run (two terminals, sync
/// commits) opens as a database of its own and passes every consistency
/// condition, as `tessera check tpcc` would check it.
#[test]
fn a_backup_taken_during_a_run_is_consistent() {
    let root = tempfile::tempdir().unwrap();
    let (src, dest) = (root.path().join("db"), root.path().join("backup"));
    let cfg = TpccConfig::new(1);
    let wl = Tpcc::new(cfg.clone()).unwrap();
    let opts = |dir: &std::path::Path| {
        Options::durable(dir)
            .workers(4)
            .epoch_interval(std::time::Duration::from_millis(10))
    };
    let db = Database::open(opts(&src)).unwrap();
    let run = RunConfig {
        threads: 2,
        load_threads: 2,
        seconds: 1.5,
        quiet: true,
        seed: 5,
        durability: tessera::Durability::Sync,
        ..RunConfig::default()
    };
    let load = driver::load(&db, &wl, &run).unwrap();
    let (rep, info) = std::thread::scope(|s| {
        let running = s.spawn(|| driver::run(&db, &wl, &run, load).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(700));
        let info = db.backup_to(&dest).unwrap();
        (running.join().unwrap(), info)
    });
    assert!(rep.committed > 0);
    eprintln!("{info:?}");
    db.close().unwrap();
    let copy = Database::open(opts(&dest)).unwrap();
    let (found, report) = tessera_workloads::tpcc::check_database(&copy).unwrap();
    assert_eq!(found.warehouses, 1);
    assert!(report.passed, "{}", report.summary());
    assert_consistent(&copy, &cfg, "in the backup");
}

/// Damage is not silently accepted: one ORDER-LINE row deleted deep in a
/// district (past the check's first chunks of rows) fails exactly the two
/// conditions that count lines, and the per-order one names the order.
#[test]
fn a_missing_order_line_fails_the_conditions_that_count_lines() {
    let (_wl, db) = loaded_one_warehouse(Protocol::Silo);
    let cfg = TpccConfig::new(1);
    assert_consistent(&db, &cfg, "after the load");
    let t = Tables::open(&db).unwrap();
    // Order 2900 of district 5 is undelivered (orders 2101-3000 are), so
    // no delivered amount or customer balance depends on its lines; about
    // 29,000 of the district's lines sort before it.
    let mut w = db.worker().unwrap();
    let gone = w
        .run(|tx| tx.delete(t.order_line, &schema::order_line_key(1, 5, 2900, 1)))
        .unwrap();
    assert!(gone, "the line was loaded");
    drop(w);
    let rep = check_consistency(&db, &cfg).unwrap();
    assert!(!rep.passed);
    assert_eq!(rep.failed(), ["3.3.2.4", "3.3.2.6"], "{}", rep.summary());
    let per_order = rep.get("3.3.2.6").unwrap();
    assert_eq!(per_order.violations, 1);
    assert!(
        per_order.details[0].starts_with("order (1, 5, 2900)"),
        "{:?}",
        per_order.details
    );
    assert_eq!(rep.get("3.3.2.4").unwrap().violations, 1);
}

/// Payment reads a customer without C_DATA and reads C_DATA only for a
/// bad-credit customer, whose C_DATA it rewrites (clause 2.5.2.2: the
/// payment's ids and amount in front, 500 characters kept). Checked under
/// one single-version and one multi-version protocol (their column reads
/// differ): a bad-credit customer's row afterwards is the row before with
/// the payment's columns and C_DATA changed as the clause says, and a
/// good-credit customer's C_DATA is untouched.
#[test]
fn payment_rewrites_c_data_of_bad_credit_customers_only() {
    for p in [Protocol::Silo, Protocol::Si] {
        let (wl, db) = loaded_one_warehouse(p);
        let t: Tables = wl.tables().unwrap();
        let mut w = db.worker().unwrap();
        let mut s = Scratch::default();
        let customer = |w: &mut tessera::Worker, c: u32| {
            w.run(|tx| {
                let v = tx.get(t.customer, &schema::customer_key(1, 4, c))?.unwrap();
                Ok(Customer::decode(v).unwrap())
            })
            .unwrap()
        };
        let (mut bad, mut good) = (None, None);
        for c in 1..=3000 {
            let row = customer(&mut w, c);
            match row.c_credit.as_bytes() {
                b"BC" if bad.is_none() => bad = Some(c),
                b"GC" if good.is_none() => good = Some(c),
                _ => {}
            }
            if bad.is_some() && good.is_some() {
                break;
            }
        }
        for (c, is_bad) in [(bad.unwrap(), true), (good.unwrap(), false)] {
            let before = customer(&mut w, c);
            // The loader writes 300 to 500 characters of C_DATA.
            assert!(before.c_data.as_bytes().len() >= 300);
            let inp = txns::PaymentInput {
                w_id: 1,
                d_id: 2,
                c_w_id: 1,
                c_d_id: 4,
                customer: CustomerSel::Id(c),
                h_amount: 12_345,
                h_date: 7,
                h_key: schema::history_key(900, c as u64),
            };
            let out = w
                .run(|tx| txns::payment(tx, &t, &inp, &Recon::default(), &mut s))
                .unwrap();
            assert_eq!(out.c_balance, before.c_balance - 12_345);
            let after = customer(&mut w, c);
            let mut want = before.clone();
            want.c_balance -= 12_345;
            want.c_ytd_payment += 12_345;
            want.c_payment_cnt += 1;
            if is_bad {
                let mut data = format!("{c} 4 1 2 1 123.45 ").into_bytes();
                data.extend_from_slice(before.c_data.as_bytes());
                data.truncate(500);
                want.c_data = Text::new(&data);
            }
            assert_eq!(after, want, "{p:?}, customer {c}, bad credit {is_bad}");
        }
    }
}
