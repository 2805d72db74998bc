//! Which file names a task may carry. A worker serves only the directories it was started
//! with (its roots): every name in a task is a bare file name, resolved inside a root, so a
//! name can never reach outside them. (Symlinks inside a root are the worker's to check when
//! it resolves a name: see `sluice-worker`.)

use crate::RpcError;

/// Longest file name accepted, in bytes (Linux's NAME_MAX).
pub const MAX_NAME_BYTES: usize = 255;

/// Checks that `name` is a bare file name: not empty, no `/` or NUL, not `.` or `..`, at most
/// [`MAX_NAME_BYTES`] bytes. Absolute paths and `a/../b` fail because they contain `/`.
pub fn check_file_name(name: &str) -> Result<(), RpcError> {
    let bad = |why: &str| Err(RpcError::Invalid(format!("file name {name:?} {why}")));
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad("is too long");
    }
    if name.contains('/') || name.contains('\0') {
        return bad("is not a bare file name");
    }
    if name == "." || name == ".." {
        return bad("names a directory");
    }
    Ok(())
}

/// Longest database name a task may carry.
pub const MAX_DATABASE_NAME: usize = 64;

/// Checks a database name (a task's `database`, a worker's `--root NAME=DIR`): at most
/// [`MAX_DATABASE_NAME`] ASCII letters, digits, `_`, `-` or `.`; empty names the unnamed
/// database.
pub fn check_database_name(name: &str) -> Result<(), RpcError> {
    let ok = name.len() <= MAX_DATABASE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        return Ok(());
    }
    Err(RpcError::Invalid(format!(
        "database name {name:?} must be at most {MAX_DATABASE_NAME} ASCII letters, digits, \
         '_', '-' or '.'"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_short_and_plain() {
        for good in ["", "db0", "ok_name-1.2", &"n".repeat(64)] {
            assert!(check_database_name(good).is_ok(), "{good:?}");
        }
        for bad in ["../x", "a b", "a/b", &"n".repeat(65)] {
            assert!(check_database_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_bare_names_pass() {
        assert!(check_file_name("000123.sst").is_ok());
        for bad in [
            "",
            "/etc/passwd",
            "../000001.sst",
            "a/b.sst",
            "..",
            ".",
            "x\0y",
        ] {
            assert!(check_file_name(bad).is_err(), "{bad:?} passed");
        }
        assert!(check_file_name(&"a".repeat(256)).is_err());
    }
}
