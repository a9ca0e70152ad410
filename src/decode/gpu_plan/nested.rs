//! Nested fields on the GPU: how a struct, list or map field's Arrow shape lies over the Parquet
//! schema, as the repetition and definition levels that build it.
//!
//! Every leaf of a nested field is decoded like a flat column, one value slot per *level entry*
//! (a page's `num_values`) instead of per row: its values sit at the entries whose definition
//! level is the leaf's maximum. From the leaves' levels the GPU then builds the nesting
//! (`crate::decode::gpu::nested`). A node at list depth `k` (`k` lists above it) has one slot
//! per entry `i` with `rep[i] <= k` and `def[i] >= elem_def[k]` (`elem_def[0] = 0`: every row
//! has a slot at depth 0); its slots are numbered in entry order. A list at depth `k` gives
//! slot `j` (entry `i`) the offset "slots at depth `k + 1` before entry `i`"; a nullable node
//! is valid where `def[i]` reaches its own level. The leaf's values move from its entries to
//! its slots at its depth.
//!
//! The walk follows arrow-rs's reading of the schema (`parquet::arrow::schema`): LIST groups
//! in their three-level form and the legacy two-level forms (a repeated primitive, a repeated
//! group of several fields, one named `array` or `<list>_tuple`), unannotated repeated fields
//! as lists of required elements, MAP groups. Whatever it does not recognise, and any field
//! whose levels it cannot account for, stays on the host with the reason.

use arrow::datatypes::{DataType, Field};
use parquet::basic::Repetition;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::Type;

use super::{gpu_leaf, GpuColumn};

/// The deepest list nesting the GPU builds (levels 0..=`MAX_DEPTH` of slots).
pub(super) const MAX_DEPTH: usize = 7;

/// A nested field the GPU decodes: its leaves (each a [`GpuColumn`] with `nested` set, in the
/// projection's leaf order) and its shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NestedColumn {
    /// Index of the top-level field in the projected schema.
    pub field: usize,
    /// Its leaves.
    pub leaves: Vec<GpuColumn>,
    /// How they nest.
    pub shape: Shape,
}

/// One node of a nested field's Arrow shape. Definition levels are the thresholds an entry's
/// level must reach; `depth` is the number of lists (and maps) above the node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Shape {
    /// A leaf: `leaf` indexes [`NestedColumn::leaves`].
    Leaf {
        /// Index into the leaves.
        leaf: usize,
        /// Lists above it.
        depth: usize,
    },
    /// A struct.
    Struct {
        /// Valid where the definition level reaches this (`None`: never null).
        valid_def: Option<i16>,
        /// Lists above it.
        depth: usize,
        /// Its fields.
        children: Vec<Shape>,
        /// Its Arrow type.
        #[serde(skip)]
        data_type: DataType,
    },
    /// A list (`List`, `LargeList`) or a map (`Map`; its child is the entries struct).
    List {
        /// Valid where the definition level reaches this (`None`: never null).
        null_def: Option<i16>,
        /// An element exists where the definition level reaches this.
        elem_def: i16,
        /// Lists above it: its slots are at `depth`, its elements at `depth + 1`.
        depth: usize,
        /// 64-bit offsets.
        large: bool,
        /// The element (for a map, its entries struct).
        child: Box<Shape>,
        /// Its Arrow type.
        #[serde(skip)]
        data_type: DataType,
    },
}

impl Shape {
    /// The first leaf under the node (its levels give the node's slots).
    pub fn first_leaf(&self) -> usize {
        match self {
            Shape::Leaf { leaf, .. } => *leaf,
            Shape::Struct { children, .. } => children.first().map_or(0, Shape::first_leaf),
            Shape::List { child, .. } => child.first_leaf(),
        }
    }

    /// Lists above the node.
    pub fn depth(&self) -> usize {
        match self {
            Shape::Leaf { depth, .. } | Shape::Struct { depth, .. } | Shape::List { depth, .. } => {
                *depth
            }
        }
    }
}

/// The GPU placement of nested field `field` (index `fi`) with leaf columns `leaves`, or why it
/// decodes on the host.
pub(super) fn place_nested(
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    fi: usize,
    field: &Field,
    leaves: &[usize],
) -> Result<NestedColumn, String> {
    let name = field.name();
    let on_host = |why: String| format!("'{name}' is nested ({}): {why}", field.data_type());
    let schema = metadata.file_metadata().schema_descr();
    let root = schema.root_schema();
    let node = root
        .get_fields()
        .iter()
        .find(|n| n.name() == name)
        .ok_or_else(|| on_host("no such field in the Parquet schema".into()))?;
    let mut walk = Walk {
        metadata,
        row_groups,
        fi,
        name,
        leaves,
        out: Vec::new(),
    };
    let shape = walk
        .node(field.data_type(), node, 0, 0, 0, false)
        .map_err(on_host)?;
    if walk.out.len() != leaves.len() {
        return Err(on_host(format!(
            "its Arrow type reaches {} of its {} leaves",
            walk.out.len(),
            leaves.len()
        )));
    }
    Ok(NestedColumn {
        field: fi,
        leaves: walk.out,
        shape,
    })
}

struct Walk<'a> {
    metadata: &'a ParquetMetaData,
    row_groups: &'a [usize],
    fi: usize,
    name: &'a str,
    leaves: &'a [usize],
    out: Vec<GpuColumn>,
}

impl Walk<'_> {
    /// The shape of Arrow type `dt` over Parquet node `node`, reached with definition level
    /// `def`, repetition level `rep`, under `depth` lists; `element`: `node` is a repeated node
    /// already counted as the list holding it (a legacy list's element).
    fn node(
        &mut self,
        dt: &DataType,
        node: &Type,
        def: i16,
        rep: i16,
        depth: usize,
        element: bool,
    ) -> Result<Shape, String> {
        let repetition = node.get_basic_info().repetition();
        if repetition == Repetition::REPEATED && !element {
            // an unannotated repeated field: a list of required elements
            let (DataType::List(e) | DataType::LargeList(e)) = dt else {
                return Err(format!("repeated '{}' read as {dt}", node.name()));
            };
            if depth >= MAX_DEPTH {
                return Err(format!("lists nest deeper than {MAX_DEPTH}"));
            }
            let child = self.node(e.data_type(), node, def + 1, rep + 1, depth + 1, true)?;
            return Ok(Shape::List {
                null_def: None,
                elem_def: def + 1,
                depth,
                large: matches!(dt, DataType::LargeList(_)),
                child: Box::new(child),
                data_type: dt.clone(),
            });
        }
        let optional = repetition == Repetition::OPTIONAL && !element;
        let d = def + i16::from(optional);
        let own = optional.then_some(d);
        match dt {
            DataType::List(e) | DataType::LargeList(e) => {
                let [inner] = node_fields(node)? else {
                    return Err(format!("list '{}' is not a group of one field", node.name()));
                };
                if inner.get_basic_info().repetition() != Repetition::REPEATED {
                    return Err(format!("list '{}' holds no repeated field", node.name()));
                }
                if depth >= MAX_DEPTH {
                    return Err(format!("lists nest deeper than {MAX_DEPTH}"));
                }
                // arrow-rs's rules: the repeated field is the element when it is primitive,
                // a group of several fields, or named `array` / `<list>_tuple`
                let legacy = !inner.is_group()
                    || inner.get_fields().len() != 1
                    || inner.name() == "array"
                    || inner.name() == format!("{}_tuple", node.name());
                let child = if legacy {
                    self.node(e.data_type(), inner, d + 1, rep + 1, depth + 1, true)?
                } else {
                    let element = &inner.get_fields()[0];
                    self.node(e.data_type(), element, d + 1, rep + 1, depth + 1, false)?
                };
                Ok(Shape::List {
                    null_def: own,
                    elem_def: d + 1,
                    depth,
                    large: matches!(dt, DataType::LargeList(_)),
                    child: Box::new(child),
                    data_type: dt.clone(),
                })
            }
            DataType::Map(entries, _) => {
                let [kv] = node_fields(node)? else {
                    return Err(format!("map '{}' is not a group of one field", node.name()));
                };
                if kv.get_basic_info().repetition() != Repetition::REPEATED || !kv.is_group() {
                    return Err(format!("map '{}' holds no repeated group", node.name()));
                }
                if depth >= MAX_DEPTH {
                    return Err(format!("lists nest deeper than {MAX_DEPTH}"));
                }
                let DataType::Struct(kv_fields) = entries.data_type() else {
                    return Err("map entries are not a struct".into());
                };
                if kv_fields.len() != kv.get_fields().len() {
                    return Err(format!("map '{}' entries differ", node.name()));
                }
                let mut children = Vec::with_capacity(kv_fields.len());
                for (f, n) in kv_fields.iter().zip(kv.get_fields()) {
                    children.push(self.node(f.data_type(), n, d + 1, rep + 1, depth + 1, false)?);
                }
                let entries = Shape::Struct {
                    valid_def: None,
                    depth: depth + 1,
                    children,
                    data_type: entries.data_type().clone(),
                };
                Ok(Shape::List {
                    null_def: own,
                    elem_def: d + 1,
                    depth,
                    large: false,
                    child: Box::new(entries),
                    data_type: dt.clone(),
                })
            }
            DataType::Struct(fields) => {
                let kids = node_fields(node)?;
                let mut children = Vec::with_capacity(fields.len());
                for f in fields {
                    let n = kids
                        .iter()
                        .find(|n| n.name() == f.name())
                        .ok_or_else(|| format!("struct field '{}' not in the schema", f.name()))?;
                    children.push(self.node(f.data_type(), n, d, rep, depth, false)?);
                }
                if children.is_empty() {
                    return Err("a struct without fields".into());
                }
                Ok(Shape::Struct {
                    valid_def: own,
                    depth,
                    children,
                    data_type: dt.clone(),
                })
            }
            _ if node.is_group() => Err(format!("group '{}' read as {dt}", node.name())),
            _ => {
                let k = self.out.len();
                let &leaf = self
                    .leaves
                    .get(k)
                    .ok_or_else(|| "more leaves than the projection holds".to_string())?;
                let col = self.metadata.file_metadata().schema_descr().column(leaf);
                if col.max_def_level() != d || col.max_rep_level() != rep {
                    return Err(format!(
                        "leaf {leaf}: levels ({d}, {rep}) found, ({}, {}) in the schema",
                        col.max_def_level(),
                        col.max_rep_level()
                    ));
                }
                if d > 255 {
                    // the device keeps a byte per level
                    return Err(format!("leaf {leaf}: definition levels up to {d}, over 255"));
                }
                if col.name() != node.name() {
                    return Err(format!("leaf {leaf} is '{}', not '{}'", col.name(), node.name()));
                }
                let mut c = gpu_leaf(self.metadata, self.row_groups, self.fi, self.name, dt, leaf)?;
                c.nested = true;
                self.out.push(c);
                Ok(Shape::Leaf { leaf: k, depth })
            }
        }
    }
}

fn node_fields(node: &Type) -> Result<&[parquet::schema::types::TypePtr], String> {
    if node.is_group() {
        Ok(node.get_fields())
    } else {
        Err(format!("'{}' is not a group", node.name()))
    }
}
