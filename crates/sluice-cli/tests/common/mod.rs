//! What the end-to-end experiment tests share.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::Path;
use std::process::Command;

/// Asserts the experiment left `scratch` (the `TMPDIR` it was given) empty and no process
/// whose command line names it (its workers) running.
pub fn assert_cleaned_up(scratch: &Path) {
    let ps = Command::new("pgrep")
        .arg("-f")
        .arg(scratch.as_os_str())
        .output()
        .unwrap();
    assert_eq!(std::fs::read_dir(scratch).unwrap().count(), 0);
    assert!(
        ps.stdout.is_empty(),
        "workers left running: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

/// Asserts `dir` holds `<stem>.png` and `<stem>.svg` for every stem.
pub fn assert_charts(dir: &Path, stems: &[&str]) {
    for stem in stems {
        for ext in ["png", "svg"] {
            assert!(dir.join(format!("{stem}.{ext}")).exists(), "{stem}.{ext}");
        }
    }
}
