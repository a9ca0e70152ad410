//! A generic Thrift compact-protocol reader and writer: any struct read as a tree of fields and
//! written back byte for byte (the way parquet writers encode it: field-id deltas, short list
//! headers), so that one field can be changed and everything else left as it was.

/// One Thrift value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    Binary(Vec<u8>),
    /// Element type (compact code) and elements; sets are read as lists.
    List(u8, Vec<Value>),
    /// Key and value types (compact codes) and entries.
    Map(u8, u8, Vec<(Value, Value)>),
    Struct(Struct),
}

/// A struct's fields in the order they were written: (field id, value).
pub type Struct = Vec<(i16, Value)>;

const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

/// Reads a compact-protocol struct.
pub struct Reader<'a> {
    buf: &'a [u8],
    pub pos: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn value(&mut self, t: u8) -> Option<Value> {
        Some(match t {
            T_TRUE => Value::Bool(true),
            T_FALSE => Value::Bool(false),
            T_BYTE => Value::Byte(self.byte()? as i8),
            T_I16 => Value::I16(self.zigzag()? as i16),
            T_I32 => Value::I32(self.zigzag()? as i32),
            T_I64 => Value::I64(self.zigzag()?),
            T_DOUBLE => {
                let b = self.buf.get(self.pos..self.pos + 8)?;
                self.pos += 8;
                Value::Double(f64::from_le_bytes(b.try_into().ok()?))
            }
            T_BINARY => {
                let n = self.varint()? as usize;
                let b = self.buf.get(self.pos..self.pos.checked_add(n)?)?.to_vec();
                self.pos += n;
                Value::Binary(b)
            }
            T_LIST | T_SET => {
                let h = self.byte()?;
                let et = h & 0x0f;
                let n = if h >> 4 == 15 {
                    self.varint()? as usize
                } else {
                    (h >> 4) as usize
                };
                if n > self.buf.len() {
                    return None;
                }
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.element(et)?);
                }
                Value::List(et, v)
            }
            T_MAP => {
                let n = self.varint()? as usize;
                if n > self.buf.len() {
                    return None;
                }
                let (kt, vt) = if n > 0 {
                    let b = self.byte()?;
                    (b >> 4, b & 0x0f)
                } else {
                    (0, 0)
                };
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.element(kt)?;
                    v.push((k, self.element(vt)?));
                }
                Value::Map(kt, vt, v)
            }
            T_STRUCT => Value::Struct(self.read_struct()?),
            _ => return None,
        })
    }

    /// A list, set or map element: booleans are a byte there.
    fn element(&mut self, t: u8) -> Option<Value> {
        if t == T_TRUE || t == T_FALSE {
            return Some(Value::Bool(self.byte()? == T_TRUE));
        }
        self.value(t)
    }

    /// A struct, up to and including its stop byte.
    pub fn read_struct(&mut self) -> Option<Struct> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let mut fields = Vec::new();
        let mut last = 0i16;
        loop {
            let h = self.byte()?;
            if h == 0 {
                break;
            }
            let t = h & 0x0f;
            let id = if h >> 4 == 0 {
                self.zigzag()? as i16
            } else {
                last.checked_add((h >> 4) as i16)?
            };
            last = id;
            fields.push((id, self.value(t)?));
        }
        self.depth -= 1;
        Some(fields)
    }
}

/// Reads one struct from the start of `buf`: the struct and the bytes it took.
pub fn read(buf: &[u8]) -> Option<(Struct, usize)> {
    let mut r = Reader::new(buf);
    let s = r.read_struct()?;
    Some((s, r.pos))
}

fn type_of(v: &Value) -> u8 {
    match v {
        Value::Bool(true) => T_TRUE,
        Value::Bool(false) => T_FALSE,
        Value::Byte(_) => T_BYTE,
        Value::I16(_) => T_I16,
        Value::I32(_) => T_I32,
        Value::I64(_) => T_I64,
        Value::Double(_) => T_DOUBLE,
        Value::Binary(_) => T_BINARY,
        Value::List(..) => T_LIST,
        Value::Map(..) => T_MAP,
        Value::Struct(_) => T_STRUCT,
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(_) => {}
        Value::Byte(b) => out.push(*b as u8),
        Value::I16(x) => put_zigzag(out, i64::from(*x)),
        Value::I32(x) => put_zigzag(out, i64::from(*x)),
        Value::I64(x) => put_zigzag(out, *x),
        Value::Double(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Binary(b) => {
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::List(et, items) => {
            if items.len() < 15 {
                out.push(((items.len() as u8) << 4) | et);
            } else {
                out.push(0xf0 | et);
                put_varint(out, items.len() as u64);
            }
            for i in items {
                put_element(out, i);
            }
        }
        Value::Map(kt, vt, entries) => {
            put_varint(out, entries.len() as u64);
            if !entries.is_empty() {
                out.push((kt << 4) | vt);
            }
            for (k, v) in entries {
                put_element(out, k);
                put_element(out, v);
            }
        }
        Value::Struct(s) => write_into(out, s),
    }
}

fn put_element(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => out.push(if *b { T_TRUE } else { T_FALSE }),
        v => put_value(out, v),
    }
}

/// Appends `s` to `out` in the compact protocol.
pub fn write_into(out: &mut Vec<u8>, s: &Struct) {
    let mut last = 0i16;
    for (id, v) in s {
        let t = type_of(v);
        let delta = i32::from(*id) - i32::from(last);
        if (1..=15).contains(&delta) {
            out.push(((delta as u8) << 4) | t);
        } else {
            out.push(t);
            put_zigzag(out, i64::from(*id));
        }
        last = *id;
        put_value(out, v);
    }
    out.push(0);
}

/// `s` in the compact protocol.
pub fn write(s: &Struct) -> Vec<u8> {
    let mut out = Vec::new();
    write_into(&mut out, s);
    out
}

/// The field `id` of `s`.
pub fn get(s: &Struct, id: i16) -> Option<&Value> {
    s.iter().find(|(i, _)| *i == id).map(|(_, v)| v)
}

/// The field `id` of `s`, mutable.
pub fn get_mut(s: &mut Struct, id: i16) -> Option<&mut Value> {
    s.iter_mut().find(|(i, _)| *i == id).map(|(_, v)| v)
}

/// An integer field's value.
pub fn int(s: &Struct, id: i16) -> Option<i64> {
    match get(s, id)? {
        Value::Byte(v) => Some(i64::from(*v)),
        Value::I16(v) => Some(i64::from(*v)),
        Value::I32(v) => Some(i64::from(*v)),
        Value::I64(v) => Some(*v),
        _ => None,
    }
}

/// Sets an integer field (keeping its width), adding it as i64 when missing.
pub fn set_int(s: &mut Struct, id: i16, x: i64) {
    match get_mut(s, id) {
        Some(Value::Byte(v)) => *v = x as i8,
        Some(Value::I16(v)) => *v = x as i16,
        Some(Value::I32(v)) => *v = x as i32,
        Some(v) => *v = Value::I64(x),
        None => {
            s.push((id, Value::I64(x)));
            s.sort_by_key(|(i, _)| *i);
        }
    }
}

/// A struct field.
pub fn child(s: &Struct, id: i16) -> Option<&Struct> {
    match get(s, id)? {
        Value::Struct(c) => Some(c),
        _ => None,
    }
}

/// A struct field, mutable.
pub fn child_mut(s: &mut Struct, id: i16) -> Option<&mut Struct> {
    match get_mut(s, id)? {
        Value::Struct(c) => Some(c),
        _ => None,
    }
}

/// A list field's items.
pub fn list(s: &Struct, id: i16) -> &[Value] {
    match get(s, id) {
        Some(Value::List(_, v)) => v,
        _ => &[],
    }
}

/// A list field's items, mutable.
pub fn list_mut(s: &mut Struct, id: i16) -> Option<&mut Vec<Value>> {
    match get_mut(s, id)? {
        Value::List(_, v) => Some(v),
        _ => None,
    }
}

/// Paths (field ids, list positions as `-1 - index`) to every leaf under `s` that `want`
/// accepts.
fn leaf_paths(s: &Struct, want: fn(&Value) -> bool) -> Vec<Vec<i32>> {
    fn walk(v: &Value, want: fn(&Value) -> bool, path: &mut Vec<i32>, out: &mut Vec<Vec<i32>>) {
        match v {
            Value::List(_, items) => {
                for (i, it) in items.iter().enumerate() {
                    path.push(-1 - i as i32);
                    walk(it, want, path, out);
                    path.pop();
                }
            }
            Value::Struct(s) => {
                for (id, f) in s {
                    path.push(i32::from(*id));
                    walk(f, want, path, out);
                    path.pop();
                }
            }
            v if want(v) => out.push(path.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&Value::Struct(s.clone()), want, &mut Vec::new(), &mut out);
    out
}

/// Paths to every integer (or boolean) leaf under `s` (see [`leaf_paths`]).
pub fn int_paths(s: &Struct) -> Vec<Vec<i32>> {
    leaf_paths(s, |v| {
        matches!(
            v,
            Value::Byte(_) | Value::I16(_) | Value::I32(_) | Value::I64(_) | Value::Bool(_)
        )
    })
}

/// Paths to every binary leaf under `s` (see [`leaf_paths`]).
pub fn binary_paths(s: &Struct) -> Vec<Vec<i32>> {
    leaf_paths(s, |v| matches!(v, Value::Binary(_)))
}

/// The value at `path` (from [`int_paths`] or [`binary_paths`]).
pub fn at_mut<'a>(s: &'a mut Struct, path: &[i32]) -> Option<&'a mut Value> {
    let (first, rest) = path.split_first()?;
    let mut v = get_mut(s, *first as i16)?;
    for p in rest {
        v = match v {
            Value::Struct(s) if *p >= 0 => get_mut(s, *p as i16)?,
            Value::List(_, items) if *p < 0 => items.get_mut((-1 - *p) as usize)?,
            _ => return None,
        };
    }
    Some(v)
}

/// A readable name for `path`.
pub fn path_name(path: &[i32]) -> String {
    path.iter()
        .map(|p| {
            if *p < 0 {
                format!("[{}]", -1 - p)
            } else {
                format!(".{p}")
            }
        })
        .collect()
}
