//! The shared secret that authenticates a host to a worker. Both read it from a file
//! (`--secret-file`, `Options::workers`); every call carries it in the `authorization`
//! metadata as `Bearer <secret>`, and the worker refuses a call without it before reading
//! the request.
//!
//! The secret travels in clear text: workers are meant for a private link (or 127.0.0.1), as
//! a device on the host's PCIe bus is. TLS would be added in front, not in here.

use std::path::Path;

/// The gRPC metadata key that carries the secret.
pub const METADATA_KEY: &str = "authorization";
/// Shortest secret accepted, in bytes: long enough not to be guessed by trying.
pub const MIN_SECRET_BYTES: usize = 16;

/// A shared secret: printable ASCII, at least [`MIN_SECRET_BYTES`] long. Its `Debug` output
/// does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Checks `text` (surrounding whitespace ignored) and makes it a secret.
    pub fn new(text: &str) -> Result<Secret, String> {
        let text = text.trim();
        if text.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the secret must be at least {MIN_SECRET_BYTES} bytes (got {})",
                text.len()
            ));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the secret must be printable ASCII without spaces".into());
        }
        Ok(Secret(text.to_string()))
    }

    /// Reads a secret from `path`.
    pub fn from_file(path: &Path) -> Result<Secret, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?;
        check_private(path)?;
        Secret::new(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The metadata value a call carries.
    pub fn header_value(&self) -> String {
        format!("Bearer {}", self.0)
    }

    /// True if `header` (the received metadata value) carries this secret. Takes the same
    /// time wherever the first difference is, so timing does not reveal a prefix.
    pub fn accepts(&self, header: &str) -> bool {
        let Some(given) = header.strip_prefix("Bearer ") else {
            return false;
        };
        let (a, b) = (given.as_bytes(), self.0.as_bytes());
        let mut diff = u8::from(a.len() != b.len());
        for i in 0..a.len().max(b.len()) {
            diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
        }
        diff == 0
    }
}

/// Refuses a secret file that its group or others may access, as ssh refuses such a key:
/// whoever can read the secret can command the worker (or impersonate the host).
#[cfg(unix)]
fn check_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "secret file {} is accessible by its group or others (mode {:03o}): anyone who can \
             read it can command the worker; make it private with `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_same_secret() {
        let s = Secret::new("  0123456789abcdef-secret\n").unwrap();
        assert!(s.accepts(&s.header_value()));
        assert!(s.accepts("Bearer 0123456789abcdef-secret"));
        for bad in [
            "",
            "0123456789abcdef-secret",
            "Bearer 0123456789abcdef-secreT",
            "Bearer 0123456789abcdef-secret2",
            "Bearer 0123456789abcdef-secre",
        ] {
            assert!(!s.accepts(bad), "{bad:?} was accepted");
        }
        assert_eq!(format!("{s:?}"), "Secret(..)");
    }

    #[test]
    fn weak_secrets_are_refused() {
        assert!(Secret::new("short").is_err());
        assert!(Secret::new("has a space in it, long").is_err());
        assert!(Secret::new("tab\tinside-the-secret").is_err());
    }

    #[test]
    fn reads_a_private_secret_file_and_refuses_a_shared_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "abcdefghijklmnopqrstuvwxyz\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o601] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = Secret::from_file(&path).unwrap_err();
            assert!(
                err.contains("chmod 600") && err.contains("secret"),
                "{mode:o}: {err}"
            );
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(Secret::from_file(&path).is_ok(), "{mode:o}");
        }
        let missing = Secret::from_file(&dir.path().join("none")).unwrap_err();
        assert!(missing.contains("none"), "{missing}");
    }
}
