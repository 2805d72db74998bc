//! A worker request from arbitrary bytes: the envelope is decoded, its version, kind and
//! checksum checked, the task decoded and then checked field by field, as a worker does before
//! touching any file. Every step must return an error or a value, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use sluice_rpc::envelope::open;
use sluice_rpc::proto::{CompactionTask, Envelope, MessageKind};
use sluice_worker::task::CheckedTask;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses: the bytes are an envelope, or a task payload put into a valid
    // envelope (so the fuzzer reaches the task checks past the checksum).
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let task = if mode % 2 == 0 {
        let Ok(envelope) = Envelope::decode(rest) else {
            return;
        };
        open::<CompactionTask>(&envelope, MessageKind::CompactionTask).ok()
    } else {
        CompactionTask::decode(rest).ok()
    };
    if let Some(task) = task {
        let _ = CheckedTask::from_wire(&task);
    }
});
