//! Bloom-filter pruning: a row group whose column's split-block bloom filter does not hold the
//! literal of an equality (`x = 5`, and so every value of `x IN (…)`) holds no matching row.
//! A bloom filter answers "absent" only for values never inserted, so this is exact; it is
//! consulted for integer, date, timestamp, decimal (stored as INT32/INT64) and string columns,
//! hashing the literal as the column stores it (plain encoding: little-endian integers, the
//! string's bytes). Floats and booleans are not: their representation in a filter is not
//! unique (-0 and 0, NaNs).

use std::collections::HashMap;

use parquet::basic::Type as PhysicalType;
use parquet::bloom_filter::Sbbf;
use parquet::schema::types::SchemaDescriptor;

use super::{Bound, BoundPredicate, CmpOp, Kind, Value};

impl BoundPredicate {
    /// The leaves an equality of the predicate tests, whose bloom filters could rule a row
    /// group out (ascending).
    pub fn bloom_leaves(&self, schema: &SchemaDescriptor) -> Vec<usize> {
        let mut out = Vec::new();
        eq_leaves(&self.bound, schema, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Why a row group's bloom filters (`filters`, by leaf, where it has one) prove that no
    /// row can match; `None` when they do not.
    pub fn bloom_rules_out(
        &self,
        schema: &SchemaDescriptor,
        filters: &HashMap<usize, Sbbf>,
    ) -> Option<String> {
        rules_out(&self.bound, schema, filters)
    }
}

/// Whether leaf `leaf` of kind `kind` is hashed into a filter as this module can hash it.
fn hashable(kind: Kind, leaf: usize, schema: &SchemaDescriptor) -> bool {
    let ty = schema.column(leaf).physical_type();
    match kind {
        Kind::Signed | Kind::Unsigned | Kind::Date | Kind::Timestamp | Kind::Decimal => {
            matches!(ty, PhysicalType::INT32 | PhysicalType::INT64)
        }
        Kind::Bytes => ty == PhysicalType::BYTE_ARRAY,
        _ => false,
    }
}

fn eq_leaves(b: &Bound, schema: &SchemaDescriptor, out: &mut Vec<usize>) {
    match b {
        Bound::And(x, y) | Bound::Or(x, y) => {
            eq_leaves(x, schema, out);
            eq_leaves(y, schema, out);
        }
        Bound::Cmp {
            leaf,
            kind,
            op: CmpOp::Eq,
            ..
        } if hashable(*kind, *leaf, schema) => out.push(*leaf),
        _ => {}
    }
}

fn rules_out(
    b: &Bound,
    schema: &SchemaDescriptor,
    filter: &HashMap<usize, Sbbf>,
) -> Option<String> {
    match b {
        Bound::And(x, y) => {
            rules_out(x, schema, filter).or_else(|| rules_out(y, schema, filter))
        }
        Bound::Or(x, y) => {
            let a = rules_out(x, schema, filter)?;
            let b = rules_out(y, schema, filter)?;
            Some(format!("{a}; {b}"))
        }
        Bound::Cmp {
            leaf,
            text,
            kind,
            op: CmpOp::Eq,
            value,
        } if hashable(*kind, *leaf, schema) => {
            let sbbf = filter.get(leaf)?;
            let ty = schema.column(*leaf).physical_type();
            let present = match (value, ty) {
                (Value::Int(v), PhysicalType::INT32) => {
                    let v = match kind {
                        Kind::Unsigned => u32::try_from(*v).ok()? as i32,
                        _ => i32::try_from(*v).ok()?,
                    };
                    sbbf.check(&v)
                }
                (Value::Int(v), PhysicalType::INT64) => {
                    let v = match kind {
                        Kind::Unsigned => u64::try_from(*v).ok()? as i64,
                        _ => i64::try_from(*v).ok()?,
                    };
                    sbbf.check(&v)
                }
                (Value::Bytes(s), PhysicalType::BYTE_ARRAY) => sbbf.check(s.as_slice()),
                _ => return None,
            };
            (!present).then(|| format!("{text}: not in the column's bloom filter"))
        }
        _ => None,
    }
}
