//! Iterators over the database: the per-level concatenation and the user-facing cursor.

pub mod db_iter;
pub mod level;

pub use db_iter::{DbIterator, Entries};
