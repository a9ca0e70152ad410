//! Projection: column names and dotted paths → leaf (primitive) column indices.
//!
//! A name is a top-level column (`a`) or a dotted path to a nested field (`a.b.c`). A segment
//! that contains dots is written in backquotes: `` `a.b` `` is one column named `a.b`. Paths
//! follow the Arrow view of the schema: the synthetic repeated group of a LIST or MAP may be
//! left out (`tags.element`, `m.key`), or written as the file has it (`tags.list.element`).
//! Selecting a group selects every leaf under it.

use parquet::basic::{ConvertedType, LogicalType};
use parquet::schema::types::{SchemaDescriptor, Type};

/// Splits a comma-separated list of column names (`a, s.b`): commas inside backquotes belong
/// to a name, blanks around names go, empty names are dropped. The CLI's `--columns`
/// and the C API's `columns` argument are read this way.
pub fn split_column_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out.retain(|c| !c.is_empty());
    out
}

/// Splits a column name into path segments: dots separate, backquotes protect.
/// Returns `None` for an empty segment or an unterminated backquote.
pub(crate) fn parse_path(name: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    for c in name.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                if cur.is_empty() && !was_quoted {
                    return None;
                }
                parts.push(std::mem::take(&mut cur));
                was_quoted = false;
            }
            c => cur.push(c),
        }
    }
    if quoted || (cur.is_empty() && !was_quoted) {
        return None;
    }
    parts.push(cur);
    Some(parts)
}

fn is_list_or_map(t: &Type) -> bool {
    let info = t.get_basic_info();
    matches!(
        info.logical_type_ref(),
        Some(LogicalType::List | LogicalType::Map)
    ) || matches!(
        info.converted_type(),
        ConvertedType::LIST | ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE
    )
}

fn is_map(t: &Type) -> bool {
    let info = t.get_basic_info();
    matches!(info.logical_type_ref(), Some(LogicalType::Map))
        || matches!(
            info.converted_type(),
            ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE
        )
}

/// Finds the node at `segs` below `node`; returns its full path from the root.
fn find(node: &Type, segs: &[String], path: &mut Vec<String>) -> bool {
    let Some((first, rest)) = segs.split_first() else {
        return true;
    };
    if !node.is_group() {
        return false;
    }
    let fields = node.get_fields();
    if let Some(child) = fields.iter().find(|f| f.name() == first) {
        path.push(child.name().to_string());
        if find(child, rest, path) {
            return true;
        }
        path.pop();
    }
    // Arrow paths leave out the repeated group that a LIST or MAP wraps its items in.
    if is_list_or_map(node) && fields.len() == 1 && fields[0].is_group() {
        let wrapper = &fields[0];
        path.push(wrapper.name().to_string());
        if find(wrapper, segs, path) {
            return true;
        }
        path.pop();
    }
    false
}

/// Leaf indices under the node that `segs` names, in schema order; `None` when nothing
/// matches.
pub(crate) fn resolve_leaves(schema: &SchemaDescriptor, segs: &[String]) -> Option<Vec<usize>> {
    if segs.is_empty() {
        return None;
    }
    let mut path = Vec::new();
    if !find(schema.root_schema(), segs, &mut path) {
        return None;
    }
    // a path into a MAP takes the whole map: Arrow reads a map's keys and values together
    let mut node = schema.root_schema();
    for k in 0..path.len() {
        let Some(child) = node.get_fields().iter().find(|f| f.name() == path[k]) else {
            break;
        };
        if is_map(child) && k + 1 < path.len() {
            path.truncate(k + 1);
            break;
        }
        if !child.is_group() {
            break;
        }
        node = child;
    }
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| {
            let col = schema.column(i);
            let parts = col.path().parts();
            parts.len() >= path.len() && parts[..path.len()] == path[..]
        })
        .collect();
    (!leaves.is_empty()).then_some(leaves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(parse_path("a").unwrap(), vec!["a"]);
        assert_eq!(parse_path("a.b.c").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(parse_path("`a.b`").unwrap(), vec!["a.b"]);
        assert_eq!(parse_path("s.`x.y`.z").unwrap(), vec!["s", "x.y", "z"]);
        assert_eq!(parse_path("``").unwrap(), vec![""]);
        assert!(parse_path("").is_none());
        assert!(parse_path("a..b").is_none());
        assert!(parse_path("a.").is_none());
        assert!(parse_path("`a").is_none());
    }
}
