//! Keyspaces (RocksDB's column families): `keyspace list`, `keyspace create` and `keyspace
//! drop` (ldb's list_column_families, create_column_family and drop_column_family), and the
//! `--keyspace NAME` flag with which the key-value commands, `compact` and `stats` act on one
//! keyspace instead of the default one.
//!
//! A keyspace's settings are not stored: every command opens every keyspace with the engine
//! flags it is given (see `open_with`), and `keyspace create` and `--create-keyspace` create
//! one with them.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};
use sluice::internals::filename::current_file_name;
use sluice::keyspace::DEFAULT_KEYSPACE;
use sluice::{Db, Keyspace, KeyspaceOptions, Options};

use super::{Access, OpenArgs, open, open_with};
use crate::failure::{CmdResult, Failure};

/// `sluice keyspace`.
#[derive(Debug, Subcommand)]
pub enum KeyspaceCommand {
    /// Print the database's keyspaces, one name per line, `default` first (ldb's
    /// list_column_families). Never changes the database.
    List(KeyspaceListArgs),
    /// Create keyspace NAME, with the engine flags as its settings (ldb's
    /// create_column_family). Creates the database if needed.
    Create(KeyspaceNameArgs),
    /// Drop keyspace NAME and delete every key in it (ldb's drop_column_family).
    Drop(KeyspaceNameArgs),
}

/// `sluice keyspace list`.
#[derive(Debug, Args)]
pub struct KeyspaceListArgs {
    #[command(flatten)]
    pub db: OpenArgs,
}

/// `sluice keyspace create` and `sluice keyspace drop`.
#[derive(Debug, Args)]
pub struct KeyspaceNameArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    /// The keyspace's name: 1 to 255 bytes, not `default` (the database's own keyspace, which
    /// always exists).
    pub name: String,
}

/// `--keyspace`: the keyspace a command reads, deletes from or maintains.
#[derive(Debug, Args)]
pub struct KeyspaceArg {
    /// The keyspace to act on (RocksDB's column family): `default` is the database's own; any
    /// other must exist (`sluice keyspace list` names them, `sluice keyspace create` makes one).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
}

/// `--keyspace` and `--create-keyspace`: the keyspace a command adds data to.
#[derive(Debug, Args)]
pub struct WriteKeyspaceArg {
    /// The keyspace to write to (RocksDB's column family): `default` is the database's own; any
    /// other must exist, unless --create-keyspace is given.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
    /// Create the --keyspace if the database has none of that name (and the database if there
    /// is none), with the engine flags as its settings.
    #[arg(long)]
    pub create_keyspace: bool,
}

impl KeyspaceArg {
    /// Opens the database `target` names with its engine flags, adjusted for `access`, for
    /// this keyspace; one the database does not have is an error naming it.
    pub(super) fn open(&self, target: &OpenArgs, access: Access) -> Result<InKeyspace, Failure> {
        self.open_with(target, access, target.engine.options())
    }

    /// As [`KeyspaceArg::open`], with `base` options instead of the engine flags' own.
    pub(super) fn open_with(
        &self,
        target: &OpenArgs,
        access: Access,
        base: Options,
    ) -> Result<InKeyspace, Failure> {
        open_keyspace(target, access, base, &self.keyspace, None)
    }
}

impl WriteKeyspaceArg {
    /// Opens the database `target` names for writing (creating it if needed) with its engine
    /// flags, for this keyspace, created with `--create-keyspace`.
    pub(super) fn open(&self, target: &OpenArgs) -> Result<InKeyspace, Failure> {
        open_keyspace(
            target,
            Access::Create,
            target.engine.options(),
            &self.keyspace,
            Some(self.create_keyspace),
        )
    }
}

/// Opens the database `target` names with `base` options (as [`open_with`]) for keyspace
/// `name`. `create` is `Some` for a command with `--create-keyspace`, and says whether it was
/// given; a keyspace the database does not have is created then, and an error naming it
/// otherwise.
fn open_keyspace(
    target: &OpenArgs,
    access: Access,
    base: Options,
    name: &str,
    create: Option<bool>,
) -> Result<InKeyspace, Failure> {
    let dir = &target.at.db;
    let creating = create == Some(true);
    if name != DEFAULT_KEYSPACE
        && !creating
        && access == Access::Create
        && !current_file_name(dir).exists()
    {
        // Not a new database made only to say that it lacks the keyspace.
        return Err(missing(name, dir, &[], create_hint(create)));
    }
    let flag = base.merge_operator.clone();
    let db = open_with(target, access, base, name)?;
    let keyspace = match db.keyspace(name) {
        Some(keyspace) => keyspace,
        None if creating => {
            // The engine flags', with the merge operator --merge-operator gives this keyspace.
            let options = KeyspaceOptions {
                merge_operator: flag,
                ..KeyspaceOptions::of_default(db.options())
            };
            db.create_keyspace(name, &options)?
        }
        None => {
            let names = db.keyspace_names();
            db.close()?;
            return Err(missing(name, dir, &names, create_hint(create)));
        }
    };
    Ok(InKeyspace { keyspace, db })
}

/// How to create a missing keyspace, for a command that has `--create-keyspace` (`Some`) or
/// not (`None`).
fn create_hint(create: Option<bool>) -> &'static str {
    match create {
        Some(_) => "; pass --create-keyspace to create it, or use `sluice keyspace create`",
        None => "; `sluice keyspace create` creates one",
    }
}

/// The error for keyspace `name`, which the database in `dir` (with keyspaces `names`; none if
/// there is no database) does not have, followed by `hint`.
fn missing(name: &str, dir: &Path, names: &[String], hint: &str) -> Failure {
    let has = if names.is_empty() {
        "which holds no database yet".to_string()
    } else {
        format!("whose keyspaces are {}", names.join(", "))
    };
    Failure::Error(format!(
        "no keyspace {name:?} in {} ({has}){hint}",
        dir.display()
    ))
}

/// A database a command opened and the keyspace it acts on (the database's own for
/// `default`): it derefs to the [`Keyspace`], so reads and writes go to that keyspace only.
pub struct InKeyspace {
    keyspace: Keyspace,
    db: Db,
}

impl InKeyspace {
    /// The database the keyspace is in.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Closes the database.
    pub fn close(self) -> sluice::Result<()> {
        drop(self.keyspace);
        self.db.close()
    }
}

impl std::ops::Deref for InKeyspace {
    type Target = Keyspace;

    fn deref(&self) -> &Keyspace {
        &self.keyspace
    }
}

pub fn run(command: &KeyspaceCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        KeyspaceCommand::List(args) => list(args, out),
        KeyspaceCommand::Create(args) => create(args, out),
        KeyspaceCommand::Drop(args) => drop_keyspace(args, out),
    }
}

fn list(args: &KeyspaceListArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::Read)?;
    let names = db.keyspace_names();
    db.close()?;
    for name in names {
        writeln!(out, "{name}")?;
    }
    Ok(())
}

fn create(args: &KeyspaceNameArgs, _out: &mut dyn Write) -> CmdResult {
    let base = args.db.engine.options();
    let flag = base.merge_operator.clone();
    // --merge-operator is the new keyspace's, not the database's.
    let db = open_with(&args.db, Access::Create, base, &args.name)?;
    let options = KeyspaceOptions {
        merge_operator: flag,
        ..KeyspaceOptions::of_default(db.options())
    };
    db.create_keyspace(&args.name, &options)?;
    db.close()?;
    Ok(())
}

fn drop_keyspace(args: &KeyspaceNameArgs, _out: &mut dyn Write) -> CmdResult {
    if args.name == DEFAULT_KEYSPACE {
        return Err(Failure::Error(format!(
            "{DEFAULT_KEYSPACE:?} is the database's own keyspace: it cannot be dropped"
        )));
    }
    let db = open(&args.db, Access::Existing)?;
    if db.keyspace(&args.name).is_none() {
        let names = db.keyspace_names();
        db.close()?;
        return Err(missing(&args.name, &args.db.at.db, &names, ""));
    }
    db.drop_keyspace(&args.name)?;
    db.close()?;
    Ok(())
}
