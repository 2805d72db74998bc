//! Finding a task's input files inside the worker's roots.
//!
//! A host's tables may be in any of its data directories, so each name is tried in every root
//! in order; the first root holding an entry of that name decides. The entry must then, with
//! every symlink resolved, be a regular file *inside that root*: a symlink in a root pointing
//! out of it is refused, not followed, and so is a directory or a device. The name itself was
//! already checked to be bare ([`crate::task`]), so `..` and absolute paths never get here.
//!
//! The canonical path is what the table is then opened by. A symlink swapped in between this
//! check and the open could still redirect it; roots are directories only the host and worker
//! write to, so that is out of scope (opening with `O_NOFOLLOW` would need the storage layer's
//! help).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::WorkerError;

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

/// The canonical path of the regular file `name` in the first of `roots` (each canonical)
/// that holds an entry called `name`. Errors name the file: [`WorkerError::NotFound`] if no
/// root holds it, [`WorkerError::Invalid`] if it leads outside its root or is not a regular
/// file, [`WorkerError::Internal`] if the file system refuses to say.
pub(crate) fn resolve_input(roots: &[PathBuf], name: &str) -> Result<PathBuf, WorkerError> {
    for root in roots {
        let candidate = root.join(name);
        match std::fs::symlink_metadata(&candidate) {
            Ok(_) => return check_inside(root, &candidate, name),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(WorkerError::Internal(format!(
                    "input {}: {e}",
                    candidate.display()
                )));
            }
        }
    }
    Err(WorkerError::NotFound(format!(
        "input file {name:?} is in none of the worker's roots"
    )))
}

/// `candidate` (an entry in `root`) resolved, if it is a regular file inside `root`.
fn check_inside(root: &Path, candidate: &Path, name: &str) -> Result<PathBuf, WorkerError> {
    let canonical = std::fs::canonicalize(candidate).map_err(|e| {
        if e.kind() == ErrorKind::NotFound {
            // A dangling symlink: the entry exists but leads nowhere.
            WorkerError::NotFound(format!(
                "input file {name:?} in {} is a dangling link",
                root.display()
            ))
        } else {
            WorkerError::Internal(format!("input {}: {e}", candidate.display()))
        }
    })?;
    if !canonical.starts_with(root) {
        return Err(WorkerError::Invalid(format!(
            "input file {name:?} in {} leads outside the worker's roots (to {})",
            root.display(),
            canonical.display()
        )));
    }
    let meta = std::fs::metadata(&canonical)
        .map_err(|e| WorkerError::Internal(format!("input {}: {e}", canonical.display())))?;
    if !meta.is_file() {
        return Err(WorkerError::Invalid(format!(
            "input file {name:?} in {} is not a regular file",
            root.display()
        )));
    }
    Ok(canonical)
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
    fn symlinks_may_stay_inside_but_not_lead_out() {
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
            resolve_input(&r, "000002.sst").unwrap(),
            r[0].join("000001.sst")
        );
        let out = resolve_input(&r, "000003.sst").unwrap_err();
        assert_eq!(out.code(), Code::InvalidArgument);
        assert!(out.to_string().contains("000003.sst"), "{out}");
        assert!(out.to_string().contains("outside"), "{out}");
        let dangling = resolve_input(&r, "000004.sst").unwrap_err();
        assert_eq!(dangling.code(), Code::NotFound);
        let dir = resolve_input(&r, "000005.sst").unwrap_err();
        assert!(dir.to_string().contains("not a regular file"), "{dir}");
    }
}
