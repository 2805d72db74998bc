//! The split write path: format pins and the equivalence of writer-assembled file state.

use std::path::Path;

use super::tests::{Model, model, model_entries, open, scan_forward, write_table};
use super::*;
use crate::compression::CompressionType;
use crate::filter::{BloomFilterBuilder, hash64};
use crate::key::{ValueKind, parse_internal_key, user_key};
use crate::properties::{TableProperties, value_size_bucket};

/// S4 over `entries` on the calling thread, sealing a block early after entry `i` whenever
/// `seal_after(i)` (a sub-task boundary or file cut), then S5/S6 with [`encode_block`].
fn encode_run(
    entries: &[(&[u8], &[u8])],
    opts: &TableOptions,
    seal_after: impl Fn(usize) -> bool,
) -> Vec<EncodedBlock> {
    let mut content = TableContentBuilder::new(opts);
    let mut out = Vec::new();
    for (i, &(k, v)) in entries.iter().enumerate() {
        content.add(k, v);
        if seal_after(i) {
            content.seal_current();
        }
        out.extend(std::iter::from_fn(|| content.take_sealed()).map(|s| encode_block(s, opts)));
    }
    content.seal_current();
    out.extend(std::iter::from_fn(|| content.take_sealed()).map(|s| encode_block(s, opts)));
    out
}

/// S7: appends `blocks` in order to a new table at `path`.
fn write_blocks(path: &Path, opts: &TableOptions, blocks: &[EncodedBlock]) -> TableSummary {
    let mut writer = TableFileWriter::create(&crate::fs::Storage::default(), path, opts).unwrap();
    for b in blocks {
        writer.append_data_block(b).unwrap();
    }
    assert_eq!(
        writer.num_entries(),
        blocks.iter().map(|b| b.meta.num_entries).sum::<u64>()
    );
    let summary = writer.finish().unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(summary.file_size, bytes.len() as u64);
    assert_eq!(
        summary.file_checksum,
        crc32c::crc32c(&bytes),
        "the file checksum covers every byte written"
    );
    let opened = super::Table::open(path, 1, super::TableReadOptions::default()).unwrap();
    assert_eq!(
        opened.identity(),
        summary.identity,
        "an open reads the identity the writer recorded"
    );
    assert_eq!(
        opened.verify_all().unwrap().file_crc32c,
        Some(summary.file_checksum),
        "a full verification computes the whole-file checksum as it reads"
    );
    summary
}

fn entries_of(m: &Model) -> Vec<(&[u8], &[u8])> {
    m.iter().map(|(k, v)| (k.encoded(), v.as_slice())).collect()
}

/// Writes `m` through the split steps, sealing a block early every `seal_every` entries.
fn write_split(path: &Path, m: &Model, opts: &TableOptions, seal_every: usize) -> TableSummary {
    let blocks = encode_run(&entries_of(m), opts, |i| (i + 1) % seal_every == 0);
    write_blocks(path, opts, &blocks)
}

/// The filter block's contents, read straight from the file.
fn filter_bytes(path: &Path) -> Vec<u8> {
    let t = open(path, None);
    let h = t.footer().filter.unwrap();
    std::fs::read(path).unwrap()[h.offset as usize..(h.offset + h.size) as usize].to_vec()
}

/// (hash64 of the file, file length) per case, as of the prefix-compressed, compressed index
/// block. A mismatch means the table format changed: existing files would no longer be what
/// new code writes (`tests/old_formats.rs` keeps the files older code wrote readable).
#[test]
fn table_bytes_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(1500, 3);
    let small = TableOptions {
        block_size: 512,
        restart_interval: 4,
        compression: CompressionType::None,
        ..TableOptions::default()
    };
    let cases = [
        TableOptions {
            compression: CompressionType::None,
            ..TableOptions::default()
        },
        TableOptions {
            bloom_bits_per_key: 0,
            ..small.clone()
        },
        // lz4_flex is pure Rust and locked by Cargo.lock; a version bump could move this pin.
        TableOptions::default(),
    ];
    let mut got = Vec::new();
    for (i, opts) in cases.iter().enumerate() {
        let (path, _) = write_table(dir.path(), &format!("{i}.sst"), &m, opts);
        let bytes = std::fs::read(&path).unwrap();
        got.push((hash64(&bytes), bytes.len()));
    }
    let path = dir.path().join("split.sst");
    write_split(&path, &m, &small, 37);
    let bytes = std::fs::read(&path).unwrap();
    got.push((hash64(&bytes), bytes.len()));
    let want: [(u64, usize); 4] = [
        (0xa7444704463c13fd, 5843329),
        (0xd07d8bcec7752172, 5856999),
        (0xf0edb2359d02b795, 104624),
        (0x9493ce960acbae23, 5859452),
    ];
    assert_eq!(got, want, "got {got:#x?}");
}

/// The entry-level properties and filter of `m`, computed in one pass over the whole table, as
/// the content builder did before file-level state moved to the writer.
fn whole_table_reference(m: &Model, bits_per_key: u32) -> (TableProperties, Vec<u8>) {
    let mut p = TableProperties {
        smallest_seq: u64::MAX,
        ..TableProperties::default()
    };
    let mut filter = BloomFilterBuilder::new(bits_per_key);
    for (k, v) in m {
        let ik = k.encoded();
        filter.add_key(user_key(ik));
        let parsed = parse_internal_key(ik).unwrap();
        p.num_entries += 1;
        p.num_deletions += u64::from(parsed.kind == ValueKind::Deletion);
        p.raw_key_bytes += ik.len() as u64;
        p.raw_value_bytes += v.len() as u64;
        p.value_size_histogram[value_size_bucket(v.len() as u64)] += 1;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        let digest = p.entry_digest.unwrap_or_default();
        p.entry_digest = Some(digest.wrapping_add(crate::digest::entry_hash(ik, v)));
    }
    p.smallest_key = m.keys().next().unwrap().0.clone();
    p.largest_key = m.keys().next_back().unwrap().0.clone();
    (p, filter.finish())
}

#[test]
fn writer_assembles_what_a_whole_table_pass_computes() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(400, 17);
    assert!(
        m.keys()
            .zip(m.keys().skip(1))
            .any(|(a, b)| a.user_key() == b.user_key()),
        "the model has user keys with several versions"
    );
    let opts = TableOptions {
        block_size: 1024,
        ..TableOptions::default()
    };
    let (want, want_filter) = whole_table_reference(&m, opts.bloom_bits_per_key);
    // Every entry its own block puts each multi-version user key in several blocks.
    for seal_every in [1, 2, 37, usize::MAX] {
        let path = dir.path().join(format!("{seal_every}.sst"));
        let got = write_split(&path, &m, &opts, seal_every).properties;
        let t = open(&path, None);
        assert_eq!(t.properties(), &got);
        let entry_level = TableProperties {
            num_data_blocks: 0,
            data_bytes: 0,
            index_bytes: 0,
            filter_bytes: 0,
            compression: CompressionType::None,
            ..got.clone()
        };
        assert_eq!(entry_level, want, "seal every {seal_every}");
        assert_eq!(got.num_data_blocks as usize, t.index_entries().len());
        assert_eq!(got.compression, opts.compression);
        assert_eq!(filter_bytes(&path), want_filter, "seal every {seal_every}");
        assert_eq!(got.filter_bytes, want_filter.len() as u64 + 5);
        if seal_every == 1 {
            assert_eq!(got.num_data_blocks, m.len() as u64);
        }
    }
}

#[test]
fn blocks_encoded_on_two_threads_make_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(1500, 21);
    let entries = entries_of(&m);
    // Split between two versions of one user key: its hash ends one half and starts the other.
    let split = (entries.len() / 2..entries.len())
        .find(|&i| user_key(entries[i - 1].0) == user_key(entries[i].0))
        .unwrap();
    let opts = TableOptions {
        compression: CompressionType::Zstd,
        block_size: 2048,
        ..TableOptions::default()
    };
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| encode_run(&entries[..split], &opts, |_| false));
        let second = s.spawn(|| encode_run(&entries[split..], &opts, |_| false));
        (first.join().unwrap(), second.join().unwrap())
    });
    assert_eq!(
        first.last().unwrap().meta.filter_hashes.last(),
        second[0].meta.filter_hashes.first()
    );
    let threaded = dir.path().join("threaded.sst");
    let got = write_blocks(&threaded, &opts, &[first, second].concat());
    // The same blocks built on one thread: the boundary seals a block there too.
    let single = dir.path().join("single.sst");
    let want = write_blocks(
        &single,
        &opts,
        &encode_run(&entries, &opts, |i| i + 1 == split),
    );
    assert_eq!(got, want);
    assert_eq!(
        std::fs::read(&threaded).unwrap(),
        std::fs::read(&single).unwrap()
    );
    // Block boundaries do not change the filter: it equals the one-pass builder's.
    let (builder_path, _) = write_table(dir.path(), "builder.sst", &m, &opts);
    assert_eq!(filter_bytes(&threaded), filter_bytes(&builder_path));
    assert_eq!(scan_forward(&open(&threaded, None)), model_entries(&m));
}

/// A table whose properties misstate its data (a count, a smallest key, sequence numbers, the
/// digest) or whose filter leaves keys out opens, but a full verification refuses it.
#[test]
fn verify_all_refuses_properties_that_disagree_with_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(300, 2);
    let opts = TableOptions::default();
    let entries = entries_of(&m);
    type Forge = fn(&mut EncodedBlock, &[(&[u8], &[u8])]);
    let forgeries: [(&str, Forge); 6] = [
        ("count", |b, _| b.meta.num_entries += 1),
        ("smallest key", |b, e| b.meta.first_key = e[1].0.to_vec()),
        ("digest", |b, _| b.meta.digest_sum ^= 1),
        ("sequence numbers", |b, _| b.meta.largest_seq += 1 << 40),
        ("tombstones", |b, _| b.meta.num_deletions += 1),
        ("filter", |b, _| b.meta.filter_hashes.clear()),
    ];
    for (what, forge) in forgeries {
        let mut blocks = encode_run(&entries, &opts, |_| false);
        forge(&mut blocks[0], &entries);
        let path = dir.path().join(format!("{what}.sst"));
        let mut writer =
            TableFileWriter::create(&crate::fs::Storage::default(), &path, &opts).unwrap();
        for b in &blocks {
            writer.append_data_block(b).unwrap();
        }
        writer.finish().unwrap();
        let table = Table::open(&path, 1, TableReadOptions::default()).unwrap();
        match table.verify_all() {
            Err(crate::Error::Corruption { reason, .. }) if what == "filter" => {
                assert!(
                    reason.contains("bloom filter leaves out"),
                    "{what}: {reason}"
                );
            }
            Err(crate::Error::Corruption { reason, offset, .. }) => {
                assert!(reason.contains("properties disagree"), "{what}: {reason}");
                assert_eq!(offset, table.footer().properties.offset, "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}
