//! The backup description decoder from arbitrary bytes: every failure is an error, never a
//! panic, and whatever decodes re-encodes to the same description, naming only files inside
//! the backup directory.
//!
//! The first byte picks the input: the bytes as a whole description, or the bytes as its body
//! with a correct `crc` line appended, so that the fuzzer reaches the line parser behind the
//! checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::backup::BackupMeta;
use sluice_sst::checksum::crc32c;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut input = rest.to_vec();
    if mode % 2 == 1 {
        input.extend_from_slice(format!("crc {:08x}\n", crc32c(rest)).as_bytes());
    }
    if let Ok(meta) = BackupMeta::decode(&input) {
        let again =
            BackupMeta::decode(meta.encode().as_bytes()).expect("a re-encoded description decodes");
        assert!(again == meta, "re-encoding changed the description");
        for f in &meta.files {
            let inside = f.stored.split('/').all(|part| part != ".." && part != ".");
            assert!(inside && !f.name.contains('/') && f.name != "..", "{f:?}");
        }
    }
});
