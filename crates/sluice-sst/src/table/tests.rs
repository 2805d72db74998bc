//! Table round trips against a `BTreeMap` model, corruption handling and decoder fuzzing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::cache::BlockCache;
use crate::compression::CompressionType;
use crate::format::FOOTER_LEN;
use crate::key::{InternalKey, ValueKind, make_internal_key, seek_key};
use crate::{Error, InternalIterator};

pub(super) type Model = BTreeMap<InternalKey, Vec<u8>>;

/// A deterministic xorshift generator (tests must be reproducible).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys sharing long prefixes, several versions and tombstones, empty to 64 KiB values.
pub(super) fn model(n: usize, seed: u64) -> Model {
    let mut rng = Rng(seed | 1);
    let mut m = Model::new();
    while m.len() < n {
        let user = format!("shared/prefix/{:08}", rng.below(n as u64 * 2)).into_bytes();
        let seq = rng.below(1000) + 1;
        let kind = if rng.below(10) == 0 {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let value = match rng.below(20) {
            0 => vec![],
            1 => vec![b'x'; 64 * 1024],
            2..=5 => (0..rng.below(3000)).map(|i| (i % 251) as u8).collect(),
            _ => format!("value-{}", rng.next()).into_bytes(),
        };
        m.insert(InternalKey::new(&user, seq, kind), value);
    }
    m
}

pub(super) fn write_table(
    dir: &Path,
    name: &str,
    m: &Model,
    opts: &TableOptions,
) -> (PathBuf, TableSummary) {
    let path = dir.join(name);
    let mut b = TableBuilder::create(&path, opts).unwrap();
    for (k, v) in m {
        b.add(k.encoded(), v).unwrap();
    }
    assert_eq!(b.num_entries(), m.len() as u64);
    (path.clone(), b.finish().unwrap())
}

pub(super) fn open(path: &Path, cache: Option<Arc<BlockCache>>) -> Arc<Table> {
    Table::open(
        path,
        7,
        TableReadOptions {
            cache,
            ..TableReadOptions::default()
        },
    )
    .unwrap()
}

pub(super) fn scan_forward(t: &Arc<Table>) -> Vec<(Vec<u8>, Vec<u8>)> {
    crate::iter::test_util::collect_forward(&mut t.iter())
}

/// Backward scan, returned in ascending order for comparison with a forward one.
fn scan_backward(t: &Arc<Table>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = crate::iter::test_util::collect_backward(&mut t.iter());
    out.reverse();
    out
}

pub(super) fn model_entries(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect()
}

#[test]
fn round_trips_every_compression_type() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(3000, 42);
    let expect = model_entries(&m);
    for ctype in CompressionType::ALL {
        let opts = TableOptions {
            compression: ctype,
            ..TableOptions::default()
        };
        let (path, summary) = write_table(dir.path(), &format!("{ctype}.sst"), &m, &opts);
        let t = open(&path, None);
        assert_eq!(summary.file_size, std::fs::metadata(&path).unwrap().len());
        assert_eq!(t.file_size(), summary.file_size);
        assert_eq!(t.properties(), &summary.properties);
        assert_eq!(summary.smallest_key, expect[0].0);
        assert_eq!(summary.largest_key, expect[expect.len() - 1].0);
        let p = t.properties();
        assert_eq!(p.num_entries, m.len() as u64);
        assert_eq!(
            p.num_deletions,
            m.keys().filter(|k| k.0[k.0.len() - 8] == 0).count() as u64
        );
        assert_eq!(
            p.raw_value_bytes,
            m.values().map(|v| v.len() as u64).sum::<u64>()
        );
        assert_eq!(p.compression, ctype);
        assert_eq!(p.num_data_blocks as usize, t.index_entries().len());
        let sizes: u64 = t.index_entries().iter().map(|(_, h)| h.size + 5).sum();
        assert_eq!(p.data_bytes, sizes);
        if ctype != CompressionType::None {
            assert!(
                p.data_bytes < p.raw_key_bytes + p.raw_value_bytes,
                "{ctype} compresses"
            );
        }
        assert_eq!(scan_forward(&t), expect, "{ctype} forward");
        assert_eq!(scan_backward(&t), expect, "{ctype} backward");
        let report = t.verify_all().unwrap();
        assert_eq!(report.blocks, p.num_data_blocks + 3);
        assert_eq!(report.bytes, t.file_size());
    }
}

#[test]
fn seek_and_get_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(2000, 7);
    let opts = TableOptions {
        block_size: 1024,
        restart_interval: 4,
        ..TableOptions::default()
    };
    let (path, _) = write_table(dir.path(), "t.sst", &m, &opts);
    let t = open(&path, Some(Arc::new(BlockCache::new(1 << 20))));
    let mut it = t.iter();
    let mut rng = Rng(99);
    for _ in 0..2000 {
        let user = format!("shared/prefix/{:08}", rng.below(4000 + 10)).into_bytes();
        let target = seek_key(&user, rng.below(1100));
        it.seek(&target).unwrap();
        let expect = m.range(InternalKey(target.clone())..).next();
        match expect {
            Some((k, v)) => {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k.0[..], &v[..]));
                // Step around the position and compare with the model.
                let prev = m.range(..InternalKey(target.clone())).next_back();
                it.prev().unwrap();
                match prev {
                    Some((pk, _)) => assert_eq!(it.key(), &pk.0[..]),
                    None => assert!(!it.valid()),
                }
            }
            None => assert!(!it.valid()),
        }
        let got = t.get(&target).unwrap();
        let want = expect
            .filter(|(k, _)| k.user_key() == &user[..])
            .map(|(k, v)| (k.0.clone(), v.clone()));
        assert_eq!(got, want);
    }
    let stats = t.bloom_stats();
    assert!(stats.useful > 0, "bloom rejected absent keys: {stats:?}");
}

/// Keys `key000000..` up to `n`, all at sequence 10, all holding `value`.
fn numbered_keys(n: u64, value: &[u8]) -> Model {
    (0..n)
        .map(|i| {
            let k = InternalKey::new(format!("key{i:06}").as_bytes(), 10, ValueKind::Value);
            (k, value.to_vec())
        })
        .collect()
}

#[test]
fn bloom_filter_rejects_absent_keys_without_reading_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let m = numbered_keys(5000, &[1; 10]);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let (path, _) = write_table(dir.path(), "t.sst", &m, &TableOptions::default());
    let t = open(&path, Some(Arc::clone(&cache)));
    assert!(t.has_filter());
    for i in 0..5000u64 {
        let (k, v) = t
            .get(&seek_key(format!("key{i:06}").as_bytes(), 100))
            .unwrap()
            .unwrap();
        assert_eq!(
            k,
            make_internal_key(format!("key{i:06}").as_bytes(), 10, ValueKind::Value)
        );
        assert_eq!(v, vec![1; 10]);
    }
    // Not visible at snapshot 5: the first entry >= lookup is another user key.
    assert_eq!(t.get(&seek_key(b"key000010", 5)).unwrap(), None);
    let lookups_before = cache.hits() + cache.misses();
    for i in 0..10_000u64 {
        assert_eq!(
            t.get(&seek_key(format!("absent{i}").as_bytes(), 100))
                .unwrap(),
            None
        );
    }
    let s = t.bloom_stats();
    assert!(s.useful >= 9_800, "{s:?}");
    let block_reads = cache.hits() + cache.misses() - lookups_before;
    assert_eq!(
        block_reads,
        s.false_positives - 1,
        "only false positives read a block"
    );
    assert!(cache.hits() > 0);

    // Without a filter every lookup reads a block.
    let opts = TableOptions {
        bloom_bits_per_key: 0,
        ..TableOptions::default()
    };
    let (path, _) = write_table(dir.path(), "nofilter.sst", &m, &opts);
    let t = open(&path, None);
    assert!(!t.has_filter());
    assert_eq!(
        t.get(&seek_key(b"key000003", 100)).unwrap().map(|e| e.1),
        Some(vec![1; 10])
    );
    assert_eq!(t.get(&seek_key(b"nokey", 100)).unwrap(), None);
    assert_eq!(t.bloom_stats(), BloomStats::default());
}

#[test]
fn a_prefix_filter_rejects_absent_prefixes_and_only_for_its_own_extractor() {
    use crate::prefix::PrefixExtractor;
    let dir = tempfile::tempdir().unwrap();
    // "key000000".."key004999": 500 prefixes of 8 bytes ("key00000".."key00499").
    let m = numbered_keys(5000, &[1; 10]);
    let fixed = PrefixExtractor::Fixed(8);
    let opts = TableOptions {
        prefix_extractor: Some(fixed),
        ..TableOptions::default()
    };
    let (path, summary) = write_table(dir.path(), "p.sst", &m, &opts);
    assert_eq!(
        summary.properties.prefix_extractor.as_deref(),
        Some("fixed:8")
    );
    let t = open(&path, None);
    for i in 0..500u64 {
        assert!(t.may_contain_prefix(&fixed, format!("key{i:05}").as_bytes()));
    }
    let absent = (500..10_500u64)
        .filter(|i| !t.may_contain_prefix(&fixed, format!("key{i:05}").as_bytes()))
        .count();
    assert!(
        absent >= 9_700,
        "{absent} of 10000 absent prefixes rejected"
    );
    // Whole keys are still in the filter.
    assert!(t.get(&seek_key(b"key004321", 100)).unwrap().is_some());
    // Another extractor, or none, is never trusted with this filter.
    assert!(t.may_contain_prefix(&PrefixExtractor::Capped(8), b"zzzzzzzz"));
    let (plain, summary) = write_table(dir.path(), "plain.sst", &m, &TableOptions::default());
    assert_eq!(summary.properties.prefix_extractor, None);
    assert!(open(&plain, None).may_contain_prefix(&fixed, b"zzzzzzzz"));
    // The prefixes cost filter space: about one key in ten added a hash.
    let plain_filter = open(&plain, None).properties().filter_bytes;
    assert!(
        t.properties().filter_bytes > plain_filter,
        "prefix hashes added nothing"
    );
}

#[test]
fn a_table_opened_for_compaction_skips_its_filter() {
    let dir = tempfile::tempdir().unwrap();
    let m = numbered_keys(3000, &[2; 20]);
    let (path, _) = write_table(dir.path(), "t.sst", &m, &TableOptions::default());
    let no_filter = TableReadOptions {
        load_filter: false,
        ..TableReadOptions::default()
    };
    let t = Table::open(&path, 9, no_filter.clone()).unwrap();
    assert!(!t.has_filter());
    assert_eq!(scan_forward(&t), model_entries(&m));
    assert_eq!(
        t.get(&seek_key(b"key000042", 100)).unwrap().map(|e| e.1),
        Some(vec![2; 20])
    );
    assert_eq!(t.get(&seek_key(b"absent", 100)).unwrap(), None);
    assert_eq!(t.bloom_stats(), BloomStats::default());

    // A damaged filter fails a full open and names its offset, but is never read otherwise.
    let filter = open(&path, None).footer().filter.unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[filter.offset as usize + 3] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let full = Table::open(&path, 9, TableReadOptions::default());
    assert_corruption(full, &path, filter.offset..filter.offset + filter.size + 5);
    let t = Table::open(&path, 9, no_filter).unwrap();
    assert_eq!(scan_forward(&t), model_entries(&m));
}

#[test]
fn empty_table_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (path, summary) = write_table(dir.path(), "e.sst", &Model::new(), &TableOptions::default());
    assert!(summary.smallest_key.is_empty() && summary.largest_key.is_empty());
    let t = open(&path, None);
    assert!(scan_forward(&t).is_empty());
    assert!(scan_backward(&t).is_empty());
    assert_eq!(t.get(&seek_key(b"a", 1)).unwrap(), None);
    let mut it = t.iter();
    it.seek(&seek_key(b"a", 1)).unwrap();
    assert!(!it.valid());
}

#[test]
fn split_steps_write_the_same_bytes_as_the_builder() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(1500, 3);
    let opts = TableOptions {
        compression: CompressionType::Zstd,
        ..TableOptions::default()
    };
    let (a, sa) = write_table(dir.path(), "a.sst", &m, &opts);
    // S4 on "one thread", S5/S6 and S7 by hand, cutting a block early like a sub-task boundary
    // would not (to keep bytes identical we only drain at the end).
    let b = dir.path().join("b.sst");
    let mut content = TableContentBuilder::new(&opts);
    let mut writer = TableFileWriter::create(&crate::fs::Storage::default(), &b, &opts).unwrap();
    let mut pending = Vec::new();
    for (k, v) in &m {
        content.add(k.encoded(), v);
        while let Some(s) = content.take_sealed() {
            pending.push(s);
        }
        assert_eq!(content.pending_bytes(), content.current_block_size());
    }
    content.seal_current();
    pending.extend(content.take_sealed());
    for s in pending {
        let mut out = Vec::new();
        let used = compress_block(&s.contents, opts.compression, opts.zstd_level, &mut out);
        writer
            .append_data_block(&seal_block_trailer(s, out, used))
            .unwrap();
    }
    let sb = writer.finish().unwrap();
    assert_eq!(sa, sb);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn builder_rejects_bad_input_and_abandon_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.sst");
    assert!(matches!(
        TableBuilder::create(
            &path,
            &TableOptions {
                block_size: 0,
                ..TableOptions::default()
            }
        ),
        Err(Error::InvalidArgument(_))
    ));
    let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
    assert!(matches!(
        b.add(b"short", b""),
        Err(Error::InvalidArgument(_))
    ));
    let before = b.estimated_file_size();
    b.add(&make_internal_key(b"k", 1, ValueKind::Value), &[0; 100])
        .unwrap();
    assert!(b.estimated_file_size() > before);
    assert!(path.exists());
    b.abandon();
    assert!(!path.exists());
}

/// Expects `Error::Corruption` naming `path` at an offset in `offsets`.
fn assert_corruption<T: std::fmt::Debug>(
    r: crate::Result<T>,
    path: &Path,
    offsets: std::ops::Range<u64>,
) {
    match r {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, path, "{reason}");
            assert!(
                offsets.contains(&offset),
                "offset {offset} not in {offsets:?}: {reason}"
            );
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn flipped_data_block_byte_is_corruption_at_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(800, 5);
    for ctype in [CompressionType::None, CompressionType::Lz4] {
        let opts = TableOptions {
            compression: ctype,
            ..TableOptions::default()
        };
        let (path, _) = write_table(dir.path(), &format!("{ctype}.sst"), &m, &opts);
        let (_, h) = open(&path, None).index_entries()[2];
        flip(&path, h.offset + h.size / 2);
        let t = open(&path, None); // data blocks are not read at open
        let r = (|| {
            let mut it = t.iter();
            it.seek_to_first()?;
            while it.valid() {
                it.next()?;
            }
            Ok(())
        })();
        assert_corruption(r, &path, h.offset..h.offset + 1);
        assert_corruption(t.verify_all(), &path, h.offset..h.offset + 1);
        assert_corruption(t.read_block(h), &path, h.offset..h.offset + 1);
        // Without verification the damage may go unnoticed, but never panics.
        let t = Table::open(
            &path,
            8,
            TableReadOptions {
                cache: None,
                verify_checksums: false,
                ..TableReadOptions::default()
            },
        )
        .unwrap();
        let mut it = t.iter();
        if it.seek_to_first().is_ok() {
            while it.valid() && it.next().is_ok() {}
        }
    }
}

#[test]
fn flipped_index_or_footer_byte_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(500, 11);
    let (path, _) = write_table(dir.path(), "t.sst", &m, &TableOptions::default());
    let pristine = std::fs::read(&path).unwrap();
    let footer = *open(&path, None).footer();
    let size = pristine.len() as u64;
    let footer_at = size - FOOTER_LEN as u64;
    let cases = [
        (
            footer.index.offset + 3,
            footer.index.offset..footer.index.offset + 1,
        ),
        (
            footer.properties.offset + 1,
            footer.properties.offset..footer.properties.offset + 1,
        ),
        (
            footer.filter.unwrap().offset + 10,
            footer.filter.unwrap().offset..footer.filter.unwrap().offset + 1,
        ),
        (footer_at + 4, footer_at..size),
        (size - 1, footer_at..size),
    ];
    for (at, expect) in cases {
        std::fs::write(&path, &pristine).unwrap();
        flip(&path, at);
        assert_corruption(
            Table::open(&path, 1, TableReadOptions::default()),
            &path,
            expect,
        );
    }
}

#[test]
fn truncated_file_fails_open_with_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (path, summary) = write_table(
        dir.path(),
        "t.sst",
        &model(300, 13),
        &TableOptions::default(),
    );
    let pristine = std::fs::read(&path).unwrap();
    for len in [
        0,
        10,
        FOOTER_LEN as u64 - 1,
        summary.file_size / 2,
        summary.file_size - 1,
    ] {
        std::fs::write(&path, &pristine[..len as usize]).unwrap();
        assert_corruption(
            Table::open(&path, 1, TableReadOptions::default()),
            &path,
            0..summary.file_size,
        );
    }
}

#[test]
fn missing_file_is_io_error() {
    let r = Table::open(
        Path::new("/nonexistent/sluice/t.sst"),
        1,
        TableReadOptions::default(),
    );
    assert!(matches!(r, Err(Error::Io { .. })));
}

/// Opens `bytes` as a table and exercises every read path; must never panic.
fn exercise(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.sst");
    std::fs::write(&path, bytes).unwrap();
    for verify in [true, false] {
        let Ok(t) = Table::open(
            &path,
            1,
            TableReadOptions {
                cache: None,
                verify_checksums: verify,
                ..TableReadOptions::default()
            },
        ) else {
            continue;
        };
        let mut it = t.iter();
        let mut n = 0;
        if it.seek_to_first().is_ok() {
            while it.valid() && n < 10_000 && it.next().is_ok() {
                n += 1;
            }
        }
        if it.seek_to_last().is_ok() {
            while it.valid() && n < 20_000 && it.prev().is_ok() {
                n += 1;
            }
        }
        let _ = it.seek(&seek_key(b"k", 5));
        let _ = t.get(&seek_key(b"k", 5));
        let _ = t.verify_all();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_files_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        exercise(&bytes);
    }

    #[test]
    fn damaged_tables_never_panic(seed: u64, flips in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..6)) {
        let dir = tempfile::tempdir().unwrap();
        let opts = TableOptions { block_size: 256, ..TableOptions::default() };
        let mut m = Model::new();
        let mut rng = Rng(seed | 1);
        for _ in 0..60 {
            m.insert(InternalKey::new(format!("k{}", rng.below(100)).as_bytes(), rng.below(50), ValueKind::Value), vec![7; rng.below(40) as usize]);
        }
        let (path, _) = write_table(dir.path(), "t.sst", &m, &opts);
        let mut bytes = std::fs::read(&path).unwrap();
        let len = bytes.len();
        for (at, x) in flips {
            bytes[at as usize % len] ^= x | 1;
        }
        exercise(&bytes);
    }

    #[test]
    fn model_round_trip(
        entries in proptest::collection::btree_map(
            (proptest::collection::vec(any::<u8>(), 0..12), 0u64..20),
            proptest::collection::vec(any::<u8>(), 0..200),
            0..200,
        ),
        block_size in 64usize..2048,
        restart_interval in 1usize..8,
        ctype in 0u8..4,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let m: Model = entries.into_iter().map(|((u, s), v)| (InternalKey::new(&u, s, ValueKind::Value), v)).collect();
        let opts = TableOptions {
            block_size,
            restart_interval,
            compression: CompressionType::from_u8(ctype).unwrap(),
            ..TableOptions::default()
        };
        let (path, _) = write_table(dir.path(), "t.sst", &m, &opts);
        let t = open(&path, None);
        let expect = model_entries(&m);
        prop_assert_eq!(scan_forward(&t), expect.clone());
        prop_assert_eq!(scan_backward(&t), expect.clone());
        for (k, v) in &expect {
            prop_assert_eq!(t.get(k).unwrap(), Some((k.clone(), v.clone())));
        }
    }
}

/// A blob reference that does not decode would name no value, and the properties (which do
/// not count it) would agree with the data: the full read refuses it, naming its block.
#[test]
fn verify_all_refuses_a_blob_reference_that_does_not_decode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.sst");
    let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
    b.add(&make_internal_key(b"a", 3, ValueKind::Value), b"value")
        .unwrap();
    b.add(&make_internal_key(b"b", 2, ValueKind::BlobIndex), b"\xff")
        .unwrap();
    b.finish().unwrap();
    let t = Table::open(&path, 1, TableReadOptions::default()).unwrap();
    match t.verify_all() {
        Err(Error::Corruption { file, reason, .. }) => {
            assert_eq!(file, path);
            assert!(
                reason.contains("blob reference that does not decode"),
                "{reason}"
            );
        }
        other => panic!("accepted: {other:?}"),
    }
}
