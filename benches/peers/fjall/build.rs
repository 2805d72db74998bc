//! Records the fjall version Cargo.lock resolved, for the JSON's `engine_version`.

use std::fs;

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut version = "unknown".to_string();
    let mut in_fjall = false;
    for line in lock.lines() {
        if line.starts_with("[[package]]") {
            in_fjall = false;
        } else if line == "name = \"fjall\"" {
            in_fjall = true;
        } else if in_fjall && let Some(v) = line.strip_prefix("version = ") {
            version = v.trim_matches('"').to_string();
        }
    }
    println!("cargo:rustc-env=FJALL_VERSION={version}");
}
