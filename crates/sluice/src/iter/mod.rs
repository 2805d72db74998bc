//! Iterators over the database: the per-level concatenation, the user-facing cursor, and the
//! Rust iterator over it.

pub(crate) mod bounds;
pub(crate) mod db_iter;
pub(crate) mod level;
pub(crate) mod range;

pub use bounds::KeyBounds;
pub use db_iter::DbIterator;
pub use range::Range;
