//! Merge operators: read-modify-write without the read.
//!
//! `Db::merge(key, operand)` writes an entry of kind [`ValueKind::Merge`] instead of reading
//! the old value, changing it and writing it back. Whoever later needs the value (a read, or a
//! compaction that reaches the key's base value) combines the operands with the base using the
//! database's [`MergeOperator`], which has RocksDB's shape:
//!
//! * [`MergeOperator::full_merge`] applies operands, oldest first, to an existing value (or to
//!   nothing, when the key was absent or deleted). Reads always end here.
//! * [`MergeOperator::partial_merge`] combines two adjacent operands into one, when the
//!   operator is associative enough to do so without the base. Compactions use it to shrink a
//!   run of operands whose base lies in a level they do not read; an operator that cannot
//!   returns `None` and the operands are kept as they are.
//!
//! An operator is identified by its [`MergeOperator::name`]: a compaction worker, a separate
//! process, can only combine operands with an operator it knows by that name ([`builtin`]
//! lists the ones every worker knows), and a database must be reopened with the operator it
//! was written with. Both built-in operators are here: [`U64Add`] (`u64_add`) and
//! [`Append`] (`append`).
//!
//! [`ValueKind::Merge`]: crate::key::ValueKind::Merge

use std::sync::Arc;

/// Why operands could not be merged, in words for the error the read returns.
pub type MergeFailure = String;

/// Combines merge operands with a key's base value. See the module documentation.
///
/// It runs on reading threads and compaction threads at once, so it must be cheap, must not
/// call back into the database, and must be deterministic: the same inputs give the same
/// output on the host and on every worker, or reads after a compaction would change.
pub trait MergeOperator: Send + Sync {
    /// A stable name: it matches an operator with a worker's, and appears in errors.
    fn name(&self) -> &str;

    /// The value that results from applying `operands` (oldest first, never empty) to
    /// `existing`, the key's value before them (`None`: absent or deleted). An `Err` says the
    /// operands cannot be applied (one does not parse, say); the read that needed the value
    /// fails with it, and compactions keep the operands as they are.
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure>;

    /// One operand equivalent to applying `older` and then `newer`, without knowing the base;
    /// `None` when this operator cannot combine operands without it (the default).
    fn partial_merge(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let _ = (key, older, newer);
        None
    }

    /// Whether `operand` can ever be applied: checked when it is written (`merge`, a batch, a
    /// transaction), so that an `Err` refuses the write, with its words, instead of every
    /// later read of `key` failing. Accepts everything by default.
    fn validate_operand(&self, key: &[u8], operand: &[u8]) -> Result<(), MergeFailure> {
        let _ = (key, operand);
        Ok(())
    }
}

/// Shows the operator's name: options that hold one print, and the trait asks no `Debug` of
/// an application's type.
impl std::fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergeOperator({:?})", self.name())
    }
}

/// Adds little-endian `u64` operands to a little-endian `u64` value, wrapping on overflow
/// (RocksDB's `UInt64AddOperator`): counters without a read. Absent counts as 0. Values and
/// operands must be exactly 8 bytes; anything else is refused, never read as 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct U64Add;

impl U64Add {
    /// The operator's name.
    pub const NAME: &'static str = "u64_add";

    fn decode(what: &str, bytes: &[u8]) -> Result<u64, MergeFailure> {
        let array: [u8; 8] = bytes.try_into().map_err(|_| {
            format!(
                "{what} of {} bytes is not a little-endian u64 (8 bytes)",
                bytes.len()
            )
        })?;
        Ok(u64::from_le_bytes(array))
    }
}

impl MergeOperator for U64Add {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        let mut sum = existing.map_or(Ok(0), |v| Self::decode("value", v))?;
        for operand in operands {
            sum = sum.wrapping_add(Self::decode("operand", operand)?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let sum = Self::decode("operand", older)
            .ok()?
            .wrapping_add(Self::decode("operand", newer).ok()?);
        Some(sum.to_le_bytes().to_vec())
    }

    fn validate_operand(&self, _key: &[u8], operand: &[u8]) -> Result<(), MergeFailure> {
        Self::decode("operand", operand).map(|_| ())
    }
}

/// Appends operands to the value, separated by a delimiter (RocksDB's `StringAppendOperator`,
/// whose usual delimiter is `,`): lists and logs without a read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Append {
    delimiter: Vec<u8>,
    name: String,
}

impl Append {
    /// The name of the operator without a delimiter; with one it is `append(HEX)`, the
    /// delimiter's bytes in hex, so a worker can rebuild it from the name alone.
    pub const NAME: &'static str = "append";

    /// Appends with nothing between the parts.
    pub fn new() -> Self {
        Self::with_delimiter(b"")
    }

    /// Appends with `delimiter` between the parts.
    pub fn with_delimiter(delimiter: &[u8]) -> Self {
        let name = if delimiter.is_empty() {
            Self::NAME.to_string()
        } else {
            let hex: String = delimiter.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}({hex})", Self::NAME)
        };
        Append {
            delimiter: delimiter.to_vec(),
            name,
        }
    }

    /// The operator a name from [`Append::name`] stands for.
    fn from_name(name: &str) -> Option<Self> {
        if name == Self::NAME {
            return Some(Self::new());
        }
        let hex = name.strip_prefix("append(")?.strip_suffix(')')?;
        if hex.is_empty() || hex.len() % 2 != 0 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect();
        Some(Self::with_delimiter(&bytes?))
    }
}

impl MergeOperator for Append {
    fn name(&self) -> &str {
        &self.name
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        let parts = existing.into_iter().chain(operands.iter().copied());
        let mut out = Vec::new();
        for (i, part) in parts.enumerate() {
            if i > 0 {
                out.extend_from_slice(&self.delimiter);
            }
            out.extend_from_slice(part);
        }
        Ok(out)
    }

    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(older.len() + self.delimiter.len() + newer.len());
        out.extend_from_slice(older);
        out.extend_from_slice(&self.delimiter);
        out.extend_from_slice(newer);
        Some(out)
    }
}

/// The built-in operator called `name`, if there is one: what every compaction worker can run.
pub fn builtin(name: &str) -> Option<Arc<dyn MergeOperator>> {
    if name == U64Add::NAME {
        return Some(Arc::new(U64Add));
    }
    Append::from_name(name).map(|a| Arc::new(a) as Arc<dyn MergeOperator>)
}

/// Applies `operands` (oldest first, not empty) to `existing` with `operator`, as a read must:
/// an error when there is no operator to apply them with, or it refuses them. `key` names the
/// key in the error.
pub fn resolve(
    operator: Option<&dyn MergeOperator>,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
) -> crate::Result<Vec<u8>> {
    let Some(operator) = operator else {
        return Err(crate::Error::InvalidArgument(format!(
            "key {} has merge operands but the database has no merge operator \
             (Options::merge_operator)",
            printable(key)
        )));
    };
    operator.full_merge(key, existing, operands).map_err(|why| {
        crate::Error::InvalidArgument(format!(
            "merge operator {} cannot merge key {}: {why}",
            operator.name(),
            printable(key)
        ))
    })
}

/// A key for an error message: escaped, and cut short if long.
fn printable(key: &[u8]) -> String {
    let shown = &key[..key.len().min(64)];
    let mut s = format!("'{}'", shown.escape_ascii());
    if key.len() > shown.len() {
        s.push_str(&format!("... ({} bytes)", key.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn u64_add_sums_wrapping_and_refuses_malformed_numbers() {
        let op = U64Add;
        let (one, two, max) = (le(1), le(2), le(u64::MAX));
        assert_eq!(op.full_merge(b"k", None, &[&one, &two]), Ok(le(3)));
        assert_eq!(op.full_merge(b"k", Some(&max), &[&two]), Ok(le(1)));
        assert_eq!(op.partial_merge(b"k", &one, &two), Some(le(3)));
        let err = op.full_merge(b"k", Some(b"abc"), &[&one]).unwrap_err();
        assert!(err.contains("3 bytes"), "{err}");
        assert!(op.full_merge(b"k", None, &[b"123456789"]).is_err());
        assert_eq!(op.partial_merge(b"k", b"x", &one), None);
    }

    #[test]
    fn append_joins_with_its_delimiter() {
        let plain = Append::new();
        assert_eq!(
            plain.full_merge(b"k", Some(b"a"), &[b"b", b"c"]),
            Ok(b"abc".to_vec())
        );
        let comma = Append::with_delimiter(b",");
        assert_eq!(comma.name(), "append(2c)");
        assert_eq!(
            comma.full_merge(b"k", None, &[b"x", b"y"]),
            Ok(b"x,y".to_vec())
        );
        assert_eq!(
            comma.full_merge(b"k", Some(b""), &[b"x"]),
            Ok(b",x".to_vec())
        );
        assert_eq!(comma.partial_merge(b"k", b"a", b"b"), Some(b"a,b".to_vec()));
    }

    #[test]
    fn partial_then_full_merge_equals_full_merge() {
        // What compaction relies on: combining adjacent operands first changes no read.
        let ops: [Arc<dyn MergeOperator>; 2] =
            [Arc::new(U64Add), Arc::new(Append::with_delimiter(b"|"))];
        for op in ops {
            let operands = [le(5), le(7), le(11)];
            let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let base = le(100);
            let whole = op.full_merge(b"k", Some(&base), &refs).unwrap();
            let combined = op.partial_merge(b"k", &operands[1], &operands[2]).unwrap();
            let staged = op
                .full_merge(b"k", Some(&base), &[&operands[0], &combined])
                .unwrap();
            assert_eq!(whole, staged, "{}", op.name());
        }
    }

    #[test]
    fn builtins_are_found_by_their_names() {
        for op in [
            Arc::new(U64Add) as Arc<dyn MergeOperator>,
            Arc::new(Append::new()),
            Arc::new(Append::with_delimiter(b", ")),
        ] {
            let found = builtin(op.name()).unwrap();
            assert_eq!(found.name(), op.name());
        }
        for unknown in [
            "",
            "u64",
            "append(",
            "append()",
            "append(2)",
            "append(zz)",
            "max",
        ] {
            assert!(builtin(unknown).is_none(), "{unknown}");
        }
    }

    #[test]
    fn resolving_without_an_operator_or_with_a_refusal_is_an_error() {
        let err = resolve(None, b"key\x01", None, &[b"x"]).unwrap_err();
        assert!(err.to_string().contains("no merge operator"), "{err}");
        assert!(err.to_string().contains("key\\x01"), "{err}");
        let err = resolve(Some(&U64Add), b"k", None, &[b"x"]).unwrap_err();
        assert!(err.to_string().contains("u64_add"), "{err}");
        assert_eq!(
            resolve(Some(&U64Add), b"k", None, &[&le(4)]).unwrap(),
            le(4)
        );
    }
}
