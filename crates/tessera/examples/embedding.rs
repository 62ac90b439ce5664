//! The README's "Embedding Tessera" example, compiled and run by
//! `cargo run -p tessera --example embedding` (and built by `cargo test`,
//! so the README's code stays true). It works in a temporary directory.

use tessera::{Database, Options};

fn main() -> Result<(), tessera::Error> {
    let root = tempfile::tempdir().expect("a temporary directory");
    let (data, backup) = (root.path().join("data"), root.path().join("backup"));

    let db = Database::open(Options::durable(&data))?; // recovers what `data` holds
                                                       // Options::durable: Silo; Durability::Sync (run returns once the commit is
                                                       // durable: about one epoch, 40 ms, plus an fdatasync, shared by every commit
                                                       // of the epoch); a background checkpoint every 30 s, which deletes the log
                                                       // it covers (.checkpoint_interval(d), or .no_background_checkpoints()).
    let users = db.open_table("users")?; // created the first time, found on a reopen
    let mut w = db.worker()?;
    w.run(|tx| tx.put(users, b"user001", b"ada"))?; // durable when it returns
                                                    // Iterators over any Rust range of byte-like keys, or a prefix; .rev() too.
    let names = w.run(|tx| {
        tx.prefix(users, "user")
            .map(|row| row.map(|(_key, value)| value))
            .collect::<Result<Vec<_>, _>>()
    })?;
    assert_eq!(names, [b"ada".to_vec()]);
    let info = db.backup_to(&backup)?; // a verified copy, while it runs
    drop(w);
    db.close()?; // shutdown errors are returned, not logged

    // A copy opens read-only (even on read-only media), changing nothing.
    let copy = Database::open(Options::durable(&backup).read_only(true))?;
    let users = copy.table("users")?;
    let v = copy
        .worker()?
        .run(|tx| Ok(tx.get(users, b"user001")?.map(|v| v.to_vec())))?;
    assert_eq!(v.as_deref(), Some(&b"ada"[..]));
    println!(
        "wrote, backed up ({} files, {} bytes) and reopened the copy read-only",
        info.files, info.bytes
    );
    Ok(())
}
