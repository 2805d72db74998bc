//! Finding a task's input files inside the worker's roots.
//!
//! A host's tables may be in any of its data directories, so each name is tried in every root
//! in order; the first root holding an entry of that name decides. The entry must be a
//! regular file itself: a symbolic link is refused, not followed, wherever it points (the
//! host never makes one, so one is either planted or a mistake), and so is a directory or a
//! device. The name itself was already checked to be bare ([`crate::task`]), so `..` and
//! absolute paths never get here.
//!
//! A symlink swapped in between this check and the open could still redirect it; roots are
//! directories only the host and worker write to, so that is out of scope (opening with
//! `O_NOFOLLOW` would need the storage layer's help).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::WorkerError;

/// Where keyspace `keyspace`'s tables are in each of a database's `roots` (each canonical):
/// the roots themselves for the default keyspace (0), else their `keyspaces/<id>/`
/// subdirectories that exist, canonical (a tree has one in every root the host created it
/// in). The id is a number, so the path cannot leave the root. With `remote` (objects in a
/// bucket, named relative to the one root) there is no directory to look for: the path names
/// the objects' prefix.
pub(crate) fn keyspace_roots(
    roots: &[PathBuf],
    keyspace: u32,
    remote: bool,
) -> Result<Vec<PathBuf>, WorkerError> {
    if keyspace == 0 {
        return Ok(roots.to_vec());
    }
    if remote {
        let id = keyspace.to_string();
        return Ok(roots
            .iter()
            .map(|r| r.join("keyspaces").join(&id))
            .collect());
    }
    let mut found = Vec::with_capacity(roots.len());
    for root in roots {
        let dir = root.join("keyspaces").join(keyspace.to_string());
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_dir() => found.push(dir),
            Ok(_) => {
                return Err(WorkerError::Invalid(format!(
                    "{} is not a directory",
                    dir.display()
                )));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(WorkerError::Internal(format!("{}: {e}", dir.display()))),
        }
    }
    if found.is_empty() {
        return Err(WorkerError::NotFound(format!(
            "no root of the database holds keyspace {keyspace}'s directory (keyspaces/{keyspace})"
        )));
    }
    Ok(found)
}

/// The one of `roots` (each canonical) that `dir` names once its symlinks are resolved: where a
/// task asked its outputs to go. Any other directory is refused with [`WorkerError::Invalid`]:
/// a host must not make a worker write outside the directories it was started with.
pub(crate) fn resolve_output_root(roots: &[PathBuf], dir: &Path) -> Result<PathBuf, WorkerError> {
    let refused = |why: String| {
        WorkerError::Invalid(format!(
            "output root {} is not one of the worker's roots{why}",
            dir.display()
        ))
    };
    let canonical = std::fs::canonicalize(dir).map_err(|e| refused(format!(" ({e})")))?;
    roots
        .iter()
        .find(|root| **root == canonical)
        .cloned()
        .ok_or_else(|| refused(String::new()))
}

/// The path of the regular file `name` in the first of `roots` (each canonical) that holds an
/// entry called `name`. Errors name the file: [`WorkerError::NotFound`] if no root holds it,
/// [`WorkerError::Invalid`] if it is a link or not a regular file, [`WorkerError::Internal`]
/// if the file system refuses to say.
pub(crate) fn resolve_input(roots: &[PathBuf], name: &str) -> Result<PathBuf, WorkerError> {
    for root in roots {
        let candidate = root.join(name);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(WorkerError::Internal(format!(
                    "input {}: {e}",
                    candidate.display()
                )));
            }
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(WorkerError::Invalid(format!(
                "input file {name:?} in {} is a symbolic link; inputs are never followed \
                 through links",
                root.display()
            )));
        }
        if !kind.is_file() {
            return Err(WorkerError::Invalid(format!(
                "input file {name:?} in {} is not a regular file",
                root.display()
            )));
        }
        return Ok(candidate);
    }
    Err(WorkerError::NotFound(format!(
        "input file {name:?} is in none of the worker's roots"
    )))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use tonic::Code;

    use super::*;

    fn roots(dirs: &[&Path]) -> Vec<PathBuf> {
        dirs.iter()
            .map(|d| std::fs::canonicalize(d).unwrap())
            .collect()
    }

    #[test]
    fn outputs_go_only_to_a_root() {
        let (a, b, outside) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let r = roots(&[a.path(), b.path()]);
        assert_eq!(resolve_output_root(&r, b.path()).unwrap(), r[1]);
        // A symlink to a root names that root.
        let link = outside.path().join("to-a");
        symlink(a.path(), &link).unwrap();
        assert_eq!(resolve_output_root(&r, &link).unwrap(), r[0]);
        for bad in [
            outside.path().to_path_buf(),
            a.path().join("missing"),
            b.path().join(".."),
        ] {
            let e = resolve_output_root(&r, &bad).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_keyspace_is_found_in_its_subdirectory_of_each_root() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = roots(&[a.path(), b.path()]);
        assert_eq!(keyspace_roots(&r, 0, false).unwrap(), r);
        let e = keyspace_roots(&r, 3, false).unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e}");
        std::fs::create_dir_all(b.path().join("keyspaces/3")).unwrap();
        let found = keyspace_roots(&r, 3, false).unwrap();
        assert_eq!(found, vec![r[1].join("keyspaces/3")]);
        std::fs::write(found[0].join("000007.sst"), b"t").unwrap();
        assert!(resolve_input(&found, "000007.sst").is_ok());
        assert!(
            resolve_input(&r, "000007.sst").is_err(),
            "not the default keyspace's"
        );
        // Outputs may go to the keyspace's directory, not to the root above it.
        assert!(resolve_output_root(&found, &b.path().join("keyspaces/3")).is_ok());
        assert!(resolve_output_root(&found, b.path()).is_err());
        std::fs::write(a.path().join("keyspaces"), b"not a directory").unwrap();
        assert!(keyspace_roots(&r, 3, false).is_err());
    }

    #[test]
    fn tries_every_root_in_order() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(b.path().join("000002.sst"), b"b").unwrap();
        std::fs::write(a.path().join("000003.sst"), b"a").unwrap();
        std::fs::write(b.path().join("000003.sst"), b"b").unwrap();
        let r = roots(&[a.path(), b.path()]);
        assert_eq!(
            resolve_input(&r, "000002.sst").unwrap(),
            r[1].join("000002.sst")
        );
        // The first root holding the name wins.
        assert_eq!(
            resolve_input(&r, "000003.sst").unwrap(),
            r[0].join("000003.sst")
        );
        let missing = resolve_input(&r, "000004.sst").unwrap_err();
        assert_eq!(missing.code(), Code::NotFound);
        assert!(missing.to_string().contains("000004.sst"), "{missing}");
    }

    #[test]
    fn links_are_refused_wherever_they_lead() {
        let (root, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(root.path().join("000001.sst"), b"in").unwrap();
        std::fs::write(outside.path().join("secret"), b"out").unwrap();
        symlink(
            root.path().join("000001.sst"),
            root.path().join("000002.sst"),
        )
        .unwrap();
        symlink(
            outside.path().join("secret"),
            root.path().join("000003.sst"),
        )
        .unwrap();
        symlink(root.path().join("gone"), root.path().join("000004.sst")).unwrap();
        std::fs::create_dir(root.path().join("000005.sst")).unwrap();
        let r = roots(&[root.path()]);
        assert_eq!(
            resolve_input(&r, "000001.sst").unwrap(),
            r[0].join("000001.sst")
        );
        for name in ["000002.sst", "000003.sst", "000004.sst"] {
            let e = resolve_input(&r, name).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{name}: {e}");
            assert!(e.to_string().contains(name), "{e}");
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        let dir = resolve_input(&r, "000005.sst").unwrap_err();
        assert!(dir.to_string().contains("not a regular file"), "{dir}");
    }
}
