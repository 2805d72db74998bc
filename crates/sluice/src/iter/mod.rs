//! Iterators over the database: the per-level concatenation, the user-facing cursor, and the
//! Rust iterator over it.

pub mod db_iter;
pub mod level;
pub mod range;

pub use db_iter::DbIterator;
pub use range::Range;
