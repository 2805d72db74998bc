//! Damage to a closed database's files, and the check that it is never hidden.
//!
//! Each damage round copies the database aside, applies one class of damage, opens the
//! database read-only (which changes nothing on disk), scans it and runs `check`. The
//! engine's promise (docs/format/wal.md section 4, manifest.md sections 3 and 5b): after a
//! clean close every acknowledged write is synced, so the outcome must be `Corruption` naming
//! a file (reported), or exactly the expected data (then the damage hit nothing needed, or
//! the recovery report lists what it dropped). Anything else, fewer keys or other values
//! without an error, is hidden damage: a failure. The copy is then put back.
//!
//! The orphan class is not damage but litter: a copy of a live table under a new, higher
//! number. The next read-write open must sweep it and keep the data intact.
//!
//! Blob files (values of 256 bytes or more, [`super::engine`]) get bits flipped like tables.
//!
//! Keyspaces' files are damaged like the default keyspace's: a table is drawn from every
//! table directory and its `keyspaces/<id>/` subdirectories, a MANIFEST from the database's
//! and each keyspace's (the WALs are the database's, shared by all keyspaces).

use std::path::{Path, PathBuf};

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use sluice::internals::filename::{parse_file_name, table_file_name};
use sluice::keyspace::options::KEYSPACES_DIR;
use sluice::{Db, Error};

use super::Run;
use super::tally::Answer;
use super::verify::{VerifyError, compare, verify_and_settle};

/// Bytes zeroed in a WAL: one page.
const PAGE_BYTES: u64 = 4096;

/// The classes of damage, by the name counted in the report.
const CLASSES: [&str; 7] = [
    "wal-zero-page",
    "manifest-flip-byte",
    "manifest-truncate",
    "table-flip-byte",
    "blob-flip-byte",
    "wal-delete",
    "orphan-table",
];

/// One damage round; see the module docs.
pub fn round(run: &Run<'_>, round: u64, rng: &mut StdRng) {
    let class = CLASSES[rng.gen_range(0..CLASSES.len())];
    let (db, backup) = (&run.paths.db, &run.paths.backup);
    let copied = remove_tree(backup).and_then(|()| copy_tree(db, backup));
    if let Err(e) = copied {
        return run.fail(round, format!("copying the database aside: {e}"));
    }
    let dirs = run.engine.table_dirs();
    let applied = match apply(class, db, &dirs, rng) {
        Ok(Some(applied)) => Some(applied),
        // Nothing of that kind to damage (an empty WAL): damage a table instead.
        Ok(None) => apply("table-flip-byte", db, &dirs, rng).ok().flatten(),
        Err(e) => return run.fail(round, format!("applying {class}: {e}")),
    };
    let Some((class, what)) = applied else {
        return; // No table yet either: nothing to damage.
    };
    if class == "orphan-table" {
        sweep(run, round, &what);
        return;
    }
    let answer = examine(run, round, &what);
    run.tally.damage(class, answer);
    let restored = remove_tree(db).and_then(|()| std::fs::rename(backup, db));
    if let Err(e) = restored {
        run.fail(round, format!("restoring the database after {what}: {e}"));
    }
}

/// Applies `class`; returns the class applied and what was done, or `None` if the database
/// has no file of the kind.
fn apply(
    class: &'static str,
    db: &Path,
    dirs: &[PathBuf],
    rng: &mut StdRng,
) -> std::io::Result<Option<(&'static str, String)>> {
    let wals = files_ending(&[db.to_path_buf()], ".log")?;
    let dirs = &with_keyspaces(dirs)?;
    let tables = files_ending(dirs, ".sst")?;
    let blobs = files_ending(dirs, ".blob")?;
    let manifests: Vec<PathBuf> = with_keyspaces(&[db.to_path_buf()])?
        .iter()
        .filter_map(|dir| {
            let name = std::fs::read_to_string(dir.join("CURRENT")).ok()?;
            Some(dir.join(name.trim())).filter(|p| p.exists())
        })
        .collect();
    let manifest = manifests.choose(rng).cloned();
    let done = |what: String| Ok(Some((class, what)));
    match class {
        "wal-zero-page" => {
            let non_empty: Vec<_> = wals.iter().filter(|(_, len)| *len > 0).collect();
            let Some((path, len)) = non_empty.choose(rng) else {
                return Ok(None);
            };
            let offset = rng.gen_range(0..len.div_ceil(PAGE_BYTES)) * PAGE_BYTES;
            let n = PAGE_BYTES.min(len - offset);
            write_at(path, offset, &vec![0; n as usize])?;
            done(format!(
                "zeroed {n} bytes at {offset} of {}",
                path.display()
            ))
        }
        "manifest-flip-byte" | "table-flip-byte" | "blob-flip-byte" => {
            let target = match class {
                "table-flip-byte" => tables.choose(rng).cloned(),
                "blob-flip-byte" => blobs.choose(rng).cloned(),
                _ => manifest.map(|p| (p.clone(), std::fs::metadata(&p).map_or(0, |m| m.len()))),
            };
            let Some((path, len)) = target.filter(|(_, len)| *len > 0) else {
                return Ok(None);
            };
            let offset = rng.gen_range(0..len);
            let mut byte = [0u8];
            std::os::unix::fs::FileExt::read_exact_at(
                &std::fs::File::open(&path)?,
                &mut byte,
                offset,
            )?;
            let flip = rng.gen_range(1..=255u8);
            write_at(&path, offset, &[byte[0] ^ flip])?;
            done(format!(
                "flipped bits {flip:#04x} of byte {offset} of {}",
                path.display()
            ))
        }
        "manifest-truncate" => {
            let Some(path) = manifest else {
                return Ok(None);
            };
            let len = std::fs::metadata(&path)?.len();
            let at = rng.gen_range(0..len.max(1));
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)?
                .set_len(at)?;
            done(format!(
                "truncated {} from {len} to {at} bytes",
                path.display()
            ))
        }
        "wal-delete" => {
            let Some((path, len)) = wals.choose(rng) else {
                return Ok(None);
            };
            std::fs::remove_file(path)?;
            done(format!("deleted {} ({len} bytes)", path.display()))
        }
        "orphan-table" => {
            let Some((path, _)) = tables.choose(rng) else {
                return Ok(None);
            };
            // Above every number in use, as a table a crashed flush or compaction left.
            let highest = dirs
                .iter()
                .filter_map(|d| std::fs::read_dir(d).ok())
                .flatten()
                .filter_map(|e| e.ok()?.file_name().to_str().and_then(parse_file_name))
                .map(|(_, n)| n)
                .max()
                .unwrap_or(0);
            let orphan = table_file_name(path.parent().unwrap_or(db), highest + 100);
            std::fs::copy(path, &orphan)?;
            done(orphan.display().to_string())
        }
        _ => Ok(None),
    }
}

/// Opens the damaged database read-only and classifies the outcome.
fn examine(run: &Run<'_>, round: u64, what: &str) -> Answer {
    let slots = match run.expected.load() {
        Ok(slots) => slots,
        Err(e) => {
            run.fail(round, e);
            return Answer::Hidden;
        }
    };
    let db = match Db::open_read_only(&run.paths.db, run.engine.check_options()) {
        Ok(db) => db,
        Err(e) => return reported(run, round, what, "open", &e),
    };
    match compare(&db, &slots) {
        Ok(_) => {}
        Err(VerifyError::Db(e)) => return reported(run, round, what, "read", &e),
        Err(VerifyError::Mismatch(m)) => {
            run.fail(
                round,
                format!("hidden damage: after {what}, the database opened and {m}"),
            );
            return Answer::Hidden;
        }
    }
    run.tally.verified(slots.len() as u64);
    match db.check() {
        Err(e) => reported(run, round, what, "check", &e),
        Ok(report) if !report.recovery.dropped.is_empty() => Answer::Reported,
        Ok(_) => Answer::Harmless,
    }
}

/// The answer when `step` failed with `e`: reported if `e` is `Corruption` naming a file,
/// else a failure (the promise is `Corruption`, not any error).
fn reported(run: &Run<'_>, round: u64, what: &str, step: &str, e: &Error) -> Answer {
    match e {
        Error::Corruption { file, .. } if !file.as_os_str().is_empty() => Answer::Reported,
        _ => {
            run.fail(
                round,
                format!("after {what}, {step} failed without Corruption: {e}"),
            );
            Answer::Hidden
        }
    }
}

/// A read-write open must delete the orphan table at `orphan` and keep every key.
fn sweep(run: &Run<'_>, round: u64, orphan: &str) {
    let db = match Db::open(&run.paths.db, run.engine.check_options()) {
        Ok(db) => db,
        Err(e) => {
            run.tally.damage("orphan-table", Answer::Hidden);
            return run.fail(round, format!("open with the orphan {orphan}: {e}"));
        }
    };
    // The recovery report counts the orphans every keyspace's tree deleted.
    let swept = db.recovery_report().orphans_deleted > 0 && !Path::new(orphan).exists();
    let answer = if swept {
        Answer::Reported
    } else {
        Answer::Hidden
    };
    run.tally.damage("orphan-table", answer);
    if !swept {
        run.fail(
            round,
            format!("the orphan {orphan} was not swept by a read-write open"),
        );
    }
    match verify_and_settle(&db, &run.expected) {
        Ok(n) => run.tally.verified(n),
        Err(e) => run.fail(round, format!("after sweeping the orphan {orphan}: {e}")),
    }
    if let Err(e) = db.close() {
        run.fail(round, format!("close after sweeping the orphan: {e}"));
    }
}

/// `dirs`, each followed by the directories of the keyspaces' trees in it
/// (`keyspaces/<id>/`).
fn with_keyspaces(dirs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for dir in dirs {
        all.push(dir.clone());
        let mut trees = match std::fs::read_dir(dir.join(KEYSPACES_DIR)) {
            Ok(entries) => entries
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<Vec<_>>>()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        trees.sort();
        all.extend(trees);
    }
    Ok(all)
}

/// `(path, length)` of every file in `dirs` whose name ends with `suffix`, sorted.
fn files_ending(dirs: &[PathBuf], suffix: &str) -> std::io::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().ends_with(suffix) {
                files.push((entry.path(), entry.metadata()?.len()));
            }
        }
    }
    files.sort();
    Ok(files)
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    std::os::unix::fs::FileExt::write_all_at(&file, bytes, offset)
}

/// Copies the directory tree `from` to `to` (which must not exist).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Removes the directory tree at `path`, if there is one.
fn remove_tree(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
