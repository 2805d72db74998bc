//! The properties block decoder on arbitrary bytes; whatever decodes must re-encode to bytes
//! that decode to the same properties.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sluice_sst::properties::TableProperties;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = TableProperties::decode(data, Path::new("fuzz.sst"), 0) {
        let again = TableProperties::decode(&p.encode(), Path::new("fuzz.sst"), 0);
        assert_eq!(again.ok().as_ref(), Some(&p));
        let share = p.share_of_values_larger_than(32 * 1024);
        assert!((0.0..=1.0).contains(&share), "share {share}");
    }
});
