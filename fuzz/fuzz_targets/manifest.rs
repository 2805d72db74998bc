//! The MANIFEST decoders from arbitrary bytes: the bytes as one version edit (decoded,
//! re-encoded and decoded again to the same edit, then applied to an empty version), and as a
//! whole MANIFEST file read by the strict reader and replayed. Every failure must be an error,
//! never a panic.
//!
//! The first byte picks which; the rest is the input.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice::internals::version::Version;
use sluice::internals::version::edit::VersionEdit;
use sluice::internals::version::manifest::read_manifest;

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("MANIFEST-000005");
        (dir, path)
    });
    path
}

/// Applies `edits` in order, as recovery does; stops at the first error.
fn replay(edits: &[VersionEdit]) {
    let mut version = Version::default();
    for edit in edits {
        match version.apply(edit) {
            Ok(next) => version = next,
            Err(_) => return,
        }
    }
    let _ = version.check_invariants();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let path = scratch();
    if mode % 2 == 0 {
        if let Ok(edit) = VersionEdit::decode(rest, path, 0) {
            let mut encoded = Vec::new();
            edit.encode(&mut encoded);
            let again = VersionEdit::decode(&encoded, path, 0).expect("a re-encoded edit decodes");
            assert!(again == edit, "re-encoding changed the edit");
            let _ = edit.to_string();
            replay(std::slice::from_ref(&edit));
        }
    } else {
        std::fs::write(path, rest).expect("write scratch file");
        if let Ok(contents) = read_manifest(&*sluice::fs::os_fs(), path) {
            assert!(!contents.edits.is_empty());
            replay(&contents.edits);
        }
    }
});
