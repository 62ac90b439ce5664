//! Every workload's declared key sets cover what its transactions touch:
//! short runs with `RunConfig::declared` (each request reconnoiters where
//! it must, then runs against its declaration only; an access outside it
//! fails the run, naming the key) under an optimistic and a locking
//! protocol, each ending with the workload's own check.

use tessera::{Database, Options, Protocol};
use tessera_workloads::driver::{self, RunConfig, Workload};
use tessera_workloads::smallbank::{SmallBank, SmallBankConfig};
use tessera_workloads::tpcc::hybrid::{HybridConfig, TpccHybrid};
use tessera_workloads::ycsb::{Preset, Ycsb, YcsbConfig};

fn declared(threads: usize) -> RunConfig {
    RunConfig {
        threads,
        load_threads: 2,
        seconds: 0.3,
        warmup: 0.0,
        quiet: true,
        seed: 3,
        declared: true,
        ..RunConfig::default()
    }
}

fn bench<W: Workload>(p: Protocol, wl: &W) -> (Database, driver::Report) {
    let db = Database::open(Options::in_memory().protocol(p).workers(4)).unwrap();
    let rep =
        driver::bench(&db, wl, &declared(2)).unwrap_or_else(|e| panic!("{p} {}: {e}", wl.name()));
    assert!(rep.declared);
    assert!(rep.committed > 0, "{p} {}", wl.name());
    (db, rep)
}

#[test]
fn ycsb_presets_declare_their_keys() {
    for p in [Protocol::Silo, Protocol::TwoPlWaitDie] {
        // A and F (updates, read-modify-write), D (inserts, latest reads),
        // E (scans and inserts).
        for preset in [Preset::A, Preset::D, Preset::E, Preset::F] {
            let mut cfg = YcsbConfig::preset(preset);
            cfg.records = 5_000;
            bench(p, &Ycsb::new(cfg).unwrap());
        }
    }
}

#[test]
fn smallbank_declares_its_accounts() {
    for p in [Protocol::Silo, Protocol::TwoPlNoWait, Protocol::Ssn] {
        let wl = SmallBank::new(SmallBankConfig {
            customers: 50,
            ..SmallBankConfig::default()
        })
        .unwrap();
        let (db, _) = bench(p, &wl);
        let c = wl.check(&db).unwrap();
        assert!(c.passed, "{p}: {}", c.summary());
    }
}

#[test]
fn tpcc_hybrid_declares_q2_star_coarsely() {
    for p in [Protocol::Silo, Protocol::TwoPlWaitDie] {
        let mut cfg = HybridConfig::new(1);
        cfg.mix = [35, 35, 20, 4, 3, 3];
        cfg.extra.size_pct = 5;
        let wl = TpccHybrid::new(cfg).unwrap();
        let (db, rep) = bench(p, &wl);
        assert!(
            rep.transactions.get("q2_star").unwrap().committed > 0,
            "{p}: {}",
            rep.table()
        );
        let r = tessera_workloads::tpcc::check_consistency(&db, wl.tpcc_config()).unwrap();
        assert!(r.passed, "{p}: {}", r.summary());
    }
}
