//! The footer decoder on arbitrary bytes (with the magic forced half the time, so the fuzzer
//! reaches the checksum and version checks); a decoded footer must survive a re-encode.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sluice_sst::format::{FOOTER_LEN, Footer, MAGIC};

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    if bytes.len() == FOOTER_LEN && bytes[0] & 1 == 1 {
        bytes[FOOTER_LEN - MAGIC.len()..].copy_from_slice(&MAGIC);
    }
    if let Ok(f) = Footer::decode(&bytes, Path::new("fuzz.sst"), 0) {
        let again = Footer::decode(&f.encode(), Path::new("fuzz.sst"), 0);
        assert_eq!(again.ok(), Some(f));
    }
});
