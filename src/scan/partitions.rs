//! Hive-partitioned sources: files under `key=value` directories (pyarrow's
//! `write_to_dataset`, DuckDB's `PARTITION_BY`, Spark) carry columns of their own — one per
//! key, the same value on every row of a file — appended after the files' columns.
//!
//! A key's column is typed from its values over the whole scan: `Int64` where every value is
//! an integer, else `Utf8`; `__HIVE_DEFAULT_PARTITION__` (what writers write for a null) and an
//! empty value are null. Filters on them ([`ScanBuilder::with_filter`],
//! [`with_row_filter`](ScanBuilder::with_row_filter)) are decided per file before anything is
//! read: the file's values put in, a file whose filter cannot be true is not opened, and the
//! rest of the filter goes to the file's own scan.
//!
//! [`ScanBuilder::with_filter`]: super::ScanBuilder::with_filter

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};

use super::builder::{open_builders, RowFilterExpr};
use super::{Scan, ScanBuilder};
use crate::array::LoadedBatch;
use crate::error::{Error, Result};
use crate::plan::predicate::{parse_predicate, Literal, Predicate};

/// What writers write for a null partition value.
pub(crate) const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// The `key=value` directories of `file` below `root`, outermost first (URLs and paths alike:
/// the text after `root`, cut at `/`).
pub(crate) fn hive_values(root: &str, file: &str) -> Vec<(String, String)> {
    let Some(rest) = file.strip_prefix(root) else {
        return Vec::new();
    };
    let mut parts: Vec<&str> = rest.split(['/', '\\']).filter(|s| !s.is_empty()).collect();
    parts.pop(); // the file's own name
    parts
        .into_iter()
        .filter_map(|seg| {
            let (k, v) = seg.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), percent_decoded(v)))
        })
        .collect()
}

/// `%XX` escapes decoded (writers escape `/`, `=`, `%` and other characters in values).
fn percent_decoded(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A partition value, typed.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Str(String),
}

/// The partition columns of a scan and each file's values.
#[derive(Debug)]
pub(crate) struct Partitions {
    /// The keys' fields, in order (all nullable).
    fields: Vec<FieldRef>,
    /// Per file: one value per key (`None`: null).
    values: HashMap<PathBuf, Vec<Option<Value>>>,
    /// The fields appended to batches (a projection may leave some out), as indices into
    /// `fields`.
    appended: Vec<usize>,
}

impl Partitions {
    /// The partitions of `files` (each with its `key=value` pairs): `None` when no file has
    /// one. Files must agree on the keys and their order.
    pub(crate) fn new(files: &[(PathBuf, Vec<(String, String)>)]) -> Result<Option<Self>> {
        let Some((first, keys)) = files.iter().find(|(_, kv)| !kv.is_empty()) else {
            return Ok(None);
        };
        let keys: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        for (f, kv) in files {
            let theirs: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
            if theirs != keys {
                return Err(Error::io(
                    f,
                    "list",
                    std::io::Error::other(format!(
                        "its partition directories ({}) differ from {}'s ({}): the files of a \
                         hive-partitioned source share their keys, in one order",
                        if theirs.is_empty() { "none".to_string() } else { theirs.join("/") },
                        first.display(),
                        keys.join("/")
                    )),
                ));
            }
        }
        let null = |v: &str| v.is_empty() || v == HIVE_NULL;
        let ints: Vec<bool> = (0..keys.len())
            .map(|k| {
                files
                    .iter()
                    .all(|(_, kv)| null(&kv[k].1) || kv[k].1.parse::<i64>().is_ok())
            })
            .collect();
        let fields = keys
            .iter()
            .zip(&ints)
            .map(|(k, &int)| {
                let t = if int { DataType::Int64 } else { DataType::Utf8 };
                Arc::new(Field::new(*k, t, true))
            })
            .collect();
        let values = files
            .iter()
            .map(|(f, kv)| {
                let vals = kv
                    .iter()
                    .zip(&ints)
                    .map(|((_, v), &int)| match (null(v), int) {
                        (true, _) => None,
                        (false, true) => v.parse().ok().map(Value::Int),
                        (false, false) => Some(Value::Str(v.clone())),
                    })
                    .collect();
                (f.clone(), vals)
            })
            .collect();
        Ok(Some(Partitions {
            appended: (0..keys.len()).collect(),
            fields,
            values,
        }))
    }

    /// The keys.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name().as_str())
    }

    /// Whether `name` is a partition key.
    pub(crate) fn is_key(&self, name: &str) -> bool {
        self.keys().any(|k| k == name)
    }

    /// Only the keys in `asked` appended (a projection naming some of them).
    pub(crate) fn project(&mut self, asked: &[String]) {
        self.appended = (0..self.fields.len())
            .filter(|&i| asked.iter().any(|a| a == self.fields[i].name()))
            .collect();
    }

    /// `schema` (the files' merged) with the appended partition fields after its own; a file
    /// column of a key's name is an error.
    pub(crate) fn schema(&self, schema: &SchemaRef, first: &Path) -> Result<SchemaRef> {
        if let Some(k) = self.keys().find(|k| schema.field_with_name(k).is_ok()) {
            return Err(Error::io(
                first,
                "list",
                std::io::Error::other(format!(
                    "column '{k}' is both a column of the files and a partition key of their \
                     directories"
                )),
            ));
        }
        let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
        fields.extend(self.appended.iter().map(|&i| Arc::clone(&self.fields[i])));
        Ok(Arc::new(Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        )))
    }

    /// `batch` with its file's partition columns appended, taking `schema` (the scan's).
    pub(crate) fn append(&self, batch: LoadedBatch, schema: &SchemaRef) -> Result<LoadedBatch> {
        let Some(vals) = self.values.get(batch.file()) else {
            return Ok(batch);
        };
        let n = batch.num_rows();
        let arrays: Vec<ArrayRef> = (self.appended.iter())
            .map(|&i| -> ArrayRef {
                match (&vals[i], self.fields[i].data_type()) {
                    (Some(Value::Int(v)), _) => Arc::new(Int64Array::from_value(*v, n)),
                    (Some(Value::Str(s)), _) => {
                        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(s, n)))
                    }
                    (None, t) => arrow::array::new_null_array(t, n),
                }
            })
            .collect();
        if let Some(h) = batch.as_host() {
            let mut cols = h.columns().to_vec();
            cols.extend(arrays);
            let opts = RecordBatchOptions::new().with_row_count(Some(n));
            let b = RecordBatch::try_new_with_options(Arc::clone(schema), cols, &opts).map_err(
                |e| Error::Decode {
                    path: batch.file().to_path_buf(),
                    row_group: None,
                    column: None,
                    reason: format!("appending the partition columns: {e}"),
                },
            )?;
            return Ok(batch.replace_host(b));
        }
        let schema = Arc::clone(schema);
        batch.map_device(move |mut d, ordinal| {
            let gpu = crate::device::gpu(ordinal)?;
            for a in &arrays {
                d.columns
                    .push(crate::array::DeviceArray::upload(&gpu, a.as_ref())?);
            }
            d.schema = schema;
            Ok(d)
        })
    }

    /// `pred` for `file`: its partition columns' comparisons decided with the file's values.
    /// `Ok(None)`: the file cannot match (skip it); `Ok(Some(None))`: every row can (no filter
    /// left); `Ok(Some(Some(p)))`: `p` is left for the file's own columns.
    pub(crate) fn decide(
        &self,
        pred: &Predicate,
        expr: &str,
        file: &Path,
    ) -> Result<Option<Option<Predicate>>> {
        let vals = match self.values.get(file) {
            Some(v) => v,
            None => return Ok(Some(Some(pred.clone()))),
        };
        Ok(match self.fold(pred, false, vals, expr)? {
            Folded::True => Some(None),
            Folded::False => None,
            Folded::Rest(p) => Some(Some(p)),
        })
    }

    /// `pred` (negated when `not`: NOT pushed down through AND and OR, so that an unknown and
    /// a false drop the same rows) with the partition columns' tests decided.
    fn fold(&self, pred: &Predicate, not: bool, vals: &[Option<Value>], expr: &str) -> Result<Folded> {
        let and = |a: Folded, b: Folded| match (a, b) {
            (Folded::False, _) | (_, Folded::False) => Folded::False,
            (Folded::True, x) | (x, Folded::True) => x,
            (Folded::Rest(a), Folded::Rest(b)) => Folded::Rest(Predicate::And(Box::new(a), Box::new(b))),
        };
        let or = |a: Folded, b: Folded| match (a, b) {
            (Folded::True, _) | (_, Folded::True) => Folded::True,
            (Folded::False, x) | (x, Folded::False) => x,
            (Folded::Rest(a), Folded::Rest(b)) => Folded::Rest(Predicate::Or(Box::new(a), Box::new(b))),
        };
        Ok(match pred {
            Predicate::And(a, b) | Predicate::Or(a, b) => {
                let (x, y) = (self.fold(a, not, vals, expr)?, self.fold(b, not, vals, expr)?);
                // NOT (a AND b) = NOT a OR NOT b
                match (matches!(pred, Predicate::And(..)), not) {
                    (true, false) | (false, true) => and(x, y),
                    _ => or(x, y),
                }
            }
            Predicate::Not(p) => self.fold(p, !not, vals, expr)?,
            leaf => match self.leaf(leaf, vals, expr)? {
                // a null test drops the row either way (NOT NULL is NULL)
                Some(None) => Folded::False,
                Some(Some(b)) => if b != not { Folded::True } else { Folded::False },
                None if not => Folded::Rest(Predicate::Not(Box::new(leaf.clone()))),
                None => Folded::Rest(leaf.clone()),
            },
        })
    }

    /// A leaf test on a partition column: `Some(Some(b))` its value for the file,
    /// `Some(None)` unknown (a null compared); `None` for a test of the files' own columns.
    fn leaf(&self, leaf: &Predicate, vals: &[Option<Value>], expr: &str) -> Result<Option<Option<bool>>> {
        let key = |column: &[String]| match column {
            [name] => self.fields.iter().position(|f| f.name() == name),
            _ => None,
        };
        let ferr = |reason: String| Error::Filter {
            expr: expr.to_string(),
            reason,
        };
        Ok(match leaf {
            Predicate::IsNull { column, negated } => {
                key(column).map(|k| Some(vals[k].is_none() != *negated))
            }
            Predicate::Cmp { column, op, value } => match key(column) {
                None => None,
                Some(k) => {
                    let name = self.fields[k].name();
                    let ord = match (&vals[k], value) {
                        (None, _) => return Ok(Some(None)),
                        (Some(Value::Int(v)), Literal::Int(l)) => Some(i128::from(*v).cmp(l)),
                        (Some(Value::Int(v)), Literal::Float(l)) => (*v as f64).partial_cmp(l),
                        (Some(Value::Str(v)), Literal::Str(l)) => Some(v.as_str().cmp(l.as_str())),
                        (Some(v), l) => {
                            return Err(ferr(format!(
                                "partition column '{name}' holds {}; it does not compare with {l}",
                                match v {
                                    Value::Int(_) => "integers",
                                    Value::Str(_) => "strings",
                                }
                            )))
                        }
                    };
                    Some(ord.map(|o| op.holds(o)))
                }
            },
            Predicate::Like {
                column,
                pattern,
                negated,
            } => match key(column) {
                None => None,
                Some(k) => match &vals[k] {
                    None => Some(None),
                    Some(Value::Str(v)) => Some(Some(pattern.matches(v.as_bytes()) != *negated)),
                    Some(Value::Int(_)) => {
                        return Err(ferr(format!(
                            "LIKE takes a string column; partition column '{}' holds integers",
                            self.fields[k].name()
                        )))
                    }
                },
            },
            Predicate::CmpColumns { left, right, .. } => {
                if key(left).is_some() || key(right).is_some() {
                    return Err(ferr(
                        "a partition column compares with literals, not with another column"
                            .into(),
                    ));
                }
                None
            }
            _ => None,
        })
    }
}

impl ScanBuilder {
    /// [`build`](Self::build) for hive-partitioned sources ([this module](self)): the
    /// partition keys left out of each file's projection, each file's filters decided with
    /// its values (a file that cannot match is not opened), the keys' columns appended to
    /// every batch.
    pub(super) fn build_partitioned(
        self,
        mut parts: Partitions,
        files: Vec<PathBuf>,
        access: Vec<Option<Vec<crate::plan::RowGroupAccess>>>,
    ) -> Result<Scan> {
        if self.devices.is_some() {
            return Err(Error::setting(
                "devices",
                "several",
                "hive-partitioned sources are read on one device (or the host)",
            ));
        }
        let mut base = self.clone();
        if let Some(cols) = &self.selection.columns {
            parts.project(cols);
            base.selection.columns =
                Some(cols.iter().filter(|c| !parts.is_key(c)).cloned().collect());
        }
        let parse = |text: &str| parse_predicate(text).map(|p| (p, text.to_string()));
        let row = match &self.row_filter {
            None => None,
            Some(RowFilterExpr::Text(t)) => Some(parse(t)?),
            Some(RowFilterExpr::Typed(p)) => Some((p.clone(), p.to_string())),
        };
        let prune = self.selection.filter.as_deref().map(parse).transpose()?;
        let mut kept = Vec::new();
        for (f, a) in files.iter().zip(&access) {
            let mut b = base.clone();
            if let Some((p, text)) = &prune {
                match parts.decide(p, text, f)? {
                    None => continue,
                    Some(rest) => b.selection.filter = rest.map(|p| p.to_string()),
                }
            }
            if let Some((p, text)) = &row {
                match parts.decide(p, text, f)? {
                    None => continue,
                    Some(rest) => b.row_filter = rest.map(RowFilterExpr::Typed),
                }
            }
            kept.push((f.clone(), a.clone(), b));
        }
        if kept.is_empty() {
            // every file ruled out: the first file's schema, no row group read
            let mut b = base.clone().with_row_groups(Vec::<usize>::new());
            b.selection.filter = None;
            b.row_filter = None;
            kept.push((files[0].clone(), None, b));
        }
        let builders: Vec<ScanBuilder> = (kept.iter())
            .map(|(f, a, b)| {
                let mut b = b.clone().with_path(f);
                if let Some(a) = a.clone() {
                    b = b.with_access_plan(a);
                }
                b
            })
            .collect();
        let paths: Vec<PathBuf> = kept.iter().map(|(f, ..)| f.clone()).collect();
        let (opened, file_schema) = open_builders(builders, &paths)?;
        let schema = parts.schema(&file_schema, &paths[0])?;
        Ok(Scan {
            files: opened,
            file_schema,
            schema,
            spread: None,
            partitions: Some(Arc::new(parts)),
        })
    }

}

/// A filter with the partition columns' tests decided.
enum Folded {
    True,
    False,
    Rest(Predicate),
}
