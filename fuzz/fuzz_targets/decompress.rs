//! Every codec's decompressor on arbitrary bytes: it must fail or produce at most the limit,
//! never allocate beyond it or panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_sst::compression::{CompressionType, decompress};

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&t, rest)) = data.split_first() else {
        return;
    };
    let Some(ctype) = CompressionType::from_u8(t % 4) else {
        return;
    };
    let mut out = Vec::new();
    if decompress(ctype, rest, LIMIT, &mut out).is_ok() {
        assert!(out.len() <= LIMIT);
    }
});
