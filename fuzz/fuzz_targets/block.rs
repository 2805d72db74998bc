//! A data or index block from arbitrary bytes: construction validates the restart array, then
//! every cursor movement must return entries or `Corruption`, never panic or loop forever.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sluice_sst::InternalIterator;
use sluice_sst::block::Block;

fuzz_target!(|data: &[u8]| {
    // The first byte picks a seek target length; the rest is the block.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let target = &rest[..(n as usize).min(rest.len())];
    let Ok(block) = Block::new(rest.to_vec(), Arc::from(Path::new("fuzz.sst")), 0) else {
        return;
    };
    let block = Arc::new(block);
    let mut it = block.iter();
    let mut forward = 0usize;
    if it.seek_to_first().is_ok() {
        while it.valid() {
            forward += 1;
            assert!(forward <= rest.len(), "more entries than bytes");
            if it.next().is_err() {
                break;
            }
        }
    }
    let mut backward = 0usize;
    if it.seek_to_last().is_ok() {
        while it.valid() {
            backward += 1;
            assert!(backward <= rest.len(), "more entries than bytes");
            if it.prev().is_err() {
                break;
            }
        }
    }
    if it.seek(target).is_ok() && it.valid() {
        let _ = it.next();
    }
});
