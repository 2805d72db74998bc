//! Keyspaces (RocksDB's column families, fjall's partitions): separate trees in one database,
//! each with its own options, written atomically together. Here an order log with large,
//! compressed blocks sits beside a table of counters with the `u64_add` merge operator; one
//! batch records an order and bumps its customer's counter, and a snapshot sees both or
//! neither.
//!
//! Run it with `cargo run -p sluicedb --example keyspaces`. It works in a fresh temporary
//! directory, deleted at the end.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice::merge_operator::U64Add;
use sluice::{
    CompressionType, Db, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions,
};

/// The keyspaces' settings, given at every open as RocksDB's column family options are. The
/// first open creates them (`create_missing_keyspaces`); a name the database lacks is an
/// error otherwise, so a typo cannot open a keyspace with the default options.
fn keyspaces() -> BTreeMap<String, KeyspaceOptions> {
    let mut orders = KeyspaceOptions::default();
    orders.table.block_size = 64 << 10;
    orders.table.compression = CompressionType::Zstd;
    let counters = KeyspaceOptions {
        merge_operator: Some(Arc::new(U64Add)),
        ..KeyspaceOptions::default()
    };
    BTreeMap::from([
        ("orders".to_string(), orders),
        ("counters".to_string(), counters),
    ])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let options = || Options {
        keyspaces: keyspaces(),
        create_missing_keyspaces: true,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), options())?;
        let orders = db.keyspace("orders").expect("created by the open");
        let counters = db.keyspace("counters").expect("created by the open");
        let before = db.snapshot();
        for (order, customer) in [("o-1", "ada"), ("o-2", "alan"), ("o-3", "ada")] {
            // One WAL record: after a crash, both writes are there or neither is.
            let mut batch = WriteBatch::new();
            batch.put_in(&orders, order.as_bytes(), customer.as_bytes());
            batch.merge_in(&counters, customer.as_bytes(), 1u64.to_le_bytes());
            db.write(&WriteOptions::default(), batch)?;
        }
        let ada = counters.get(b"ada")?.expect("ada ordered");
        assert_eq!(u64::from_le_bytes(ada.as_slice().try_into()?), 2);
        // A snapshot is one point in time in every keyspace.
        let then = ReadOptions {
            snapshot: Some(&before),
            ..ReadOptions::default()
        };
        assert_eq!(orders.get_opt(&then, b"o-1")?, None);
        assert_eq!(counters.get_opt(&then, b"ada")?, None);
        // The default keyspace is the database itself, and holds none of this.
        assert_eq!(db.get(b"o-1")?, None);
        orders.flush()?;
        db.close()?;
    }
    let db = Db::open(dir.path(), options())?;
    println!("keyspaces: {:?}", db.keyspace_names());
    let orders = db.keyspace("orders").expect("created above");
    for entry in orders.range(..) {
        let (order, customer) = entry?;
        println!(
            "{} -> {}",
            String::from_utf8_lossy(&order),
            String::from_utf8_lossy(&customer)
        );
    }
    db.drop_keyspace("counters")?;
    assert_eq!(db.keyspace_names(), ["default", "orders"]);
    Ok(())
}
