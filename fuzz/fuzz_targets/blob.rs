//! The blob file reader on damaged files: a valid file is written from the input (values cut
//! from it, compressed or not), some of its bytes are changed as the input says, and half the
//! time every checksum is recomputed afterwards, so the reader also meets well-checksummed
//! nonsense (lengths, compression codes, compressed bytes, keys). Open, every reference and
//! every record must then either return exactly what was written or fail without panicking
//! or allocating past the file.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sluice_sst::blob::{BlobFile, BlobFileWriter, BlobRef, FOOTER_LEN, HEADER_LEN};
use sluice_sst::checksum::{crc32c, mask};
use sluice_sst::compression::CompressionType;
use sluice_sst::fs::{FileSystem, IoMode, MemFs, Storage};

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let (values, changes) = rest.split_at(rest.len() / 2);
    let fs = MemFs::new();
    let storage = Storage::new(Arc::new(fs.clone()), IoMode::Buffered);
    let path = Path::new("/000001.blob");
    let compression = CompressionType::from_u8(control & 3).unwrap_or_default();
    let Ok(mut writer) = BlobFileWriter::create(&storage, path, 1, compression, 1) else {
        return;
    };
    let mut written: Vec<(BlobRef, Vec<u8>, Vec<u8>)> = Vec::new();
    for (i, value) in values.chunks(1 + usize::from(control >> 4) * 7).enumerate() {
        let key = format!("k{i}").into_bytes();
        let Ok(blob) = writer.add(&key, value) else {
            return;
        };
        written.push((blob, key, value.to_vec()));
    }
    if writer.finish().is_err() {
        return;
    }
    let Ok(file) = storage.open_read(path) else {
        return;
    };
    let Ok(size) = file.size() else { return };
    let mut bytes = vec![0; size as usize];
    if file.read_exact_at(&mut bytes, 0).is_err() {
        return;
    }
    drop(file);
    // Each pair of change bytes: a position and the bits to flip there.
    for pair in changes.chunks(2) {
        if let [at, bits] = pair {
            let at = usize::from(*at) * bytes.len() / 256;
            bytes[at] ^= bits;
        }
    }
    if control & 4 != 0 {
        // Recompute every checksum where the written file had one.
        let n = bytes.len();
        let header = mask(crc32c(&bytes[..12]));
        bytes[12..16].copy_from_slice(&header.to_le_bytes());
        let footer_at = n - FOOTER_LEN as usize;
        let footer = mask(crc32c(&bytes[footer_at..footer_at + 16]));
        bytes[footer_at + 16..footer_at + 20].copy_from_slice(&footer.to_le_bytes());
        for (blob, _, _) in &written {
            let (start, end) = (blob.offset as usize, (blob.offset + blob.size) as usize);
            let crc = mask(crc32c(&bytes[start + 4..end]));
            bytes[start..start + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let damaged = Path::new("/000002.blob");
    let Ok(mut f) = fs.create(damaged, IoMode::Buffered) else {
        return;
    };
    if f.append(&bytes).and_then(|()| f.sync()).is_err() {
        return;
    }
    drop(f);
    let Ok(blob) = BlobFile::open(&storage, damaged, 1) else {
        return;
    };
    assert!(HEADER_LEN + FOOTER_LEN <= blob.size());
    let recomputed = control & 4 != 0;
    for (r, key, value) in &written {
        if let Ok(read) = blob.get(r, key) {
            // Under its own checksum a record is what was written: a changed byte is caught.
            // (Under a recomputed one, a changed value byte is a valid record of another
            // value: nothing can tell.)
            assert!(recomputed || &read == value);
        }
    }
    for record in blob.records_iter().flatten() {
        assert_eq!(blob.get(&record.blob, &record.key).ok(), Some(record.value));
    }
});
