//! The bloom filter decoder on arbitrary bytes, then probes with keys taken from the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_sst::filter::BloomFilter;

fuzz_target!(|data: &[u8]| {
    let Ok(filter) = BloomFilter::new(data.to_vec()) else {
        return;
    };
    for key in data.chunks(7) {
        let _ = filter.may_contain(key);
    }
    let _ = filter.may_contain(b"");
});
