#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::compression::CompressionType;
use crate::fs::{IoMode, MemFs, Storage};
use crate::{Error, Result};

fn storage() -> Storage {
    Storage::new(Arc::new(MemFs::new()), IoMode::Buffered)
}

fn path() -> PathBuf {
    PathBuf::from("/db/000007.blob")
}

/// Writes `values` (key `k<i>`) into blob file 7; returns their references.
fn write(storage: &Storage, values: &[Vec<u8>], compression: CompressionType) -> Vec<BlobRef> {
    storage.fs.create_dir_all(Path::new("/db")).unwrap();
    let mut w = BlobFileWriter::create(storage, &path(), 7, compression, 3).unwrap();
    let refs = values
        .iter()
        .enumerate()
        .map(|(i, v)| w.add(format!("k{i}").as_bytes(), v).unwrap())
        .collect();
    let meta = w.finish().unwrap();
    assert_eq!(meta.records, values.len() as u64);
    assert_eq!(
        meta.value_bytes,
        values.iter().map(|v| v.len() as u64).sum::<u64>()
    );
    refs
}

fn bytes_of(storage: &Storage) -> Vec<u8> {
    let file = storage.open_read(&path()).unwrap();
    let mut bytes = vec![0; file.size().unwrap() as usize];
    file.read_exact_at(&mut bytes, 0).unwrap();
    bytes
}

fn rewrite(storage: &Storage, bytes: &[u8]) {
    storage.fs.remove(&path()).unwrap();
    let mut f = storage.create(&path()).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
}

/// Everything a reader can do with the file: open, every reference, every record.
fn read_all(storage: &Storage, refs: &[BlobRef]) -> Result<Vec<Vec<u8>>> {
    let file = BlobFile::open(storage, &path(), 7)?;
    let mut values = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        values.push(file.get(r, format!("k{i}").as_bytes())?);
    }
    for record in file.records_iter() {
        record?;
    }
    Ok(values)
}

fn values() -> Vec<Vec<u8>> {
    vec![
        vec![b'a'; 5000],
        b"short".to_vec(),
        Vec::new(),
        (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect(),
    ]
}

#[test]
fn values_come_back_by_reference_and_in_order() {
    for compression in [
        CompressionType::None,
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ] {
        let storage = storage();
        let refs = write(&storage, &values(), compression);
        assert_eq!(read_all(&storage, &refs).unwrap(), values());
        let file = BlobFile::open(&storage, &path(), 7).unwrap();
        let records: Vec<_> = file.records_iter().map(Result::unwrap).collect();
        assert_eq!(records.len(), 4);
        for (i, record) in records.iter().enumerate() {
            assert_eq!(record.blob, refs[i]);
            assert_eq!(record.key, format!("k{i}").into_bytes());
            assert_eq!(record.value, values()[i]);
        }
        // A compressible value is stored compressed, so its record is smaller than it.
        if compression != CompressionType::None {
            assert!(refs[0].size < 5000, "{compression:?}: {:?}", refs[0]);
        }
    }
}

#[test]
fn every_damaged_byte_is_caught() {
    let storage = storage();
    let vals = vec![b"value one".to_vec(), vec![b'z'; 300]];
    let refs = write(&storage, &vals, CompressionType::Lz4);
    let good = bytes_of(&storage);
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        rewrite(&storage, &bad);
        match read_all(&storage, &refs) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path(), "byte {at}"),
            other => panic!("byte {at} changed, read gave {other:?}"),
        }
    }
    // Every truncation too: the footer is gone.
    for len in 0..good.len() {
        rewrite(&storage, &good[..len]);
        assert!(
            matches!(read_all(&storage, &refs), Err(Error::Corruption { .. })),
            "{len}"
        );
    }
}

#[test]
fn a_reference_that_lies_is_corruption_naming_the_file_and_offset() {
    let storage = storage();
    let refs = write(&storage, &values(), CompressionType::None);
    let file = BlobFile::open(&storage, &path(), 7).unwrap();
    let lies = [
        BlobRef {
            offset: refs[1].offset + 1,
            ..refs[1]
        },
        BlobRef {
            size: refs[1].size + 1,
            ..refs[1]
        },
        BlobRef {
            offset: u64::MAX,
            ..refs[1]
        },
        BlobRef {
            offset: 0,
            ..refs[1]
        },
        BlobRef {
            file_number: 8,
            ..refs[1]
        },
        BlobRef {
            offset: file.size(),
            size: 17,
            ..refs[1]
        },
    ];
    for lie in lies {
        match file.get(&lie, b"k1") {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (path(), lie.offset), "{lie:?}");
            }
            other => panic!("{lie:?}: {other:?}"),
        }
    }
    // The right record, asked for under another key.
    let err = file.get(&refs[1], b"k2").unwrap_err().to_string();
    assert!(err.contains("another key"), "{err}");
}

#[test]
fn a_file_without_its_footer_is_unfinished() {
    let storage = storage();
    storage.fs.create_dir_all(Path::new("/db")).unwrap();
    let mut w = BlobFileWriter::create(&storage, &path(), 7, CompressionType::None, 3).unwrap();
    w.add(b"k", b"v").unwrap();
    drop(w);
    let err = BlobFile::open(&storage, &path(), 7)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shorter") || err.contains("footer"), "{err}");
}

#[test]
fn references_encode_in_a_few_bytes() {
    let r = BlobRef {
        file_number: 123,
        offset: 1 << 33,
        size: 40_000,
    };
    let bytes = r.encode();
    assert!(bytes.len() <= 12, "{bytes:?}");
    assert_eq!(BlobRef::decode(&bytes), Some(r));
    assert_eq!(BlobRef::decode(&bytes[..bytes.len() - 1]), None);
    assert_eq!(BlobRef::decode(&[bytes.as_slice(), &[0]].concat()), None);
    // 0 as a two-byte varint: over-long, not the canonical encoding.
    assert_eq!(BlobRef::decode(&[0x80, 0x00, 0, 0]), None);
}

proptest! {
    #[test]
    fn random_values_round_trip(
        vals in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 0..20),
        compression in 0u8..4,
    ) {
        let storage = storage();
        let compression = CompressionType::from_u8(compression).unwrap();
        let refs = write(&storage, &vals, compression);
        prop_assert_eq!(read_all(&storage, &refs).unwrap(), vals);
    }

    #[test]
    fn any_bytes_decode_as_a_reference_or_not_without_panicking(
        bytes in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        if let Some(r) = BlobRef::decode(&bytes) {
            prop_assert_eq!(r.encode(), bytes);
        }
    }

    #[test]
    fn any_file_opens_and_reads_without_panicking(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        offset in 0u64..220,
        size in 0u64..220,
    ) {
        let storage = storage();
        storage.fs.create_dir_all(Path::new("/db")).unwrap();
        rewrite_new(&storage, &bytes);
        if let Ok(file) = BlobFile::open(&storage, &path(), 7) {
            let _ = file.get(&BlobRef { file_number: 7, offset, size }, b"k");
            for record in file.records_iter() {
                let _ = record;
            }
        }
    }
}

fn rewrite_new(storage: &Storage, bytes: &[u8]) {
    let mut f = storage.create(&path()).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
}
