//! The Thrift compact protocol, read without the parquet crate: page headers
//! (the decoder's `page_header` module) and the fields of the footer the parquet crate
//! does not keep (the column metadata's own physical type). Every length is checked against
//! the bytes given; malformed input is an error naming the byte offset, never a panic.

use std::fmt;

/// Nesting deeper than this (structs in structs, lists of lists) is refused.
pub(crate) const MAX_DEPTH: usize = 16;

/// What was wrong with Thrift-encoded bytes, and where (byte offset from the start of the bytes given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThriftError {
    /// Byte offset where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for ThriftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for ThriftError {}

impl From<Box<ThriftError>> for ThriftError {
    fn from(e: Box<ThriftError>) -> Self {
        *e
    }
}

/// The reader's results: the error boxed, so that a result of the per-field calls (a skip, a
/// field header) fits a register (a 32-byte error made every call return through memory;
/// the footer's second walk took longer than the parquet crate's whole parse).
type R<T> = std::result::Result<T, Box<ThriftError>>;

/// Compact-protocol field types.
pub(crate) mod ty {
    pub(crate) const STOP: u8 = 0;
    pub(crate) const TRUE: u8 = 1;
    pub(crate) const FALSE: u8 = 2;
    pub(crate) const BYTE: u8 = 3;
    pub(crate) const I16: u8 = 4;
    pub(crate) const I32: u8 = 5;
    pub(crate) const I64: u8 = 6;
    pub(crate) const DOUBLE: u8 = 7;
    pub(crate) const BINARY: u8 = 8;
    pub(crate) const LIST: u8 = 9;
    pub(crate) const SET: u8 = 10;
    pub(crate) const MAP: u8 = 11;
    pub(crate) const STRUCT: u8 = 12;
}

pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
    /// What the bytes are, for errors ("the header", "the footer").
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    pub(crate) fn err<T>(&self, reason: impl Into<String>) -> R<T> {
        Err(Box::new(ThriftError {
            offset: self.pos,
            reason: reason.into(),
        }))
    }

    #[inline]
    pub(crate) fn byte(&mut self) -> R<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.err(format!("{} ends early", self.what)),
        }
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> R<u64> {
        let start = self.pos;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.pos = start;
        self.err("a varint longer than 10 bytes")
    }

    pub(crate) fn zigzag(&mut self) -> R<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    pub(crate) fn i32(&mut self) -> R<i32> {
        let at = self.pos;
        let v = self.zigzag()?;
        i32::try_from(v).map_err(|_| {
            Box::new(ThriftError {
                offset: at,
                reason: format!("{v} does not fit a 32-bit field"),
            })
        })
    }

    pub(crate) fn skip_bytes(&mut self, n: u64) -> R<()> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            return self.err(format!(
                "a {n}-byte field with only {left} bytes left in {}",
                self.what
            ));
        }
        self.pos += n as usize;
        Ok(())
    }

    /// Steps over a varint without building its value (what skipping does for every integer).
    #[inline]
    fn skip_varint(&mut self) -> R<()> {
        let rest = &self.buf[self.pos..];
        match rest.iter().take(10).position(|b| b & 0x80 == 0) {
            Some(i) => {
                self.pos += i + 1;
                Ok(())
            }
            None if rest.len() < 10 => {
                self.pos = self.buf.len();
                self.err(format!("{} ends early", self.what))
            }
            None => self.err("a varint longer than 10 bytes"),
        }
    }

    /// Reads a field header: (field id, type), or None at STOP.
    #[inline]
    pub(crate) fn field(&mut self, last_id: &mut i16) -> R<Option<(i16, u8)>> {
        let b = self.byte()?;
        let t = b & 0x0f;
        if t == ty::STOP {
            return Ok(None);
        }
        let delta = b >> 4;
        let id = if delta == 0 {
            let at = self.pos;
            let v = self.zigzag()?;
            i16::try_from(v).map_err(|_| {
                Box::new(ThriftError {
                    offset: at,
                    reason: format!("field id {v} out of range"),
                })
            })?
        } else {
            // (the error built only when it happens: this runs for every field)
            last_id
                .checked_add(i16::from(delta))
                .ok_or_else(|| {
                    Box::new(ThriftError {
                        offset: self.pos,
                        reason: "field id overflows".into(),
                    })
                })?
        };
        *last_id = id;
        Ok(Some((id, t)))
    }

    pub(crate) fn bool_of(&self, t: u8) -> R<bool> {
        match t {
            ty::TRUE => Ok(true),
            ty::FALSE => Ok(false),
            _ => self.err(format!("expected a boolean field, found type {t}")),
        }
    }

    pub(crate) fn expect(&self, t: u8, want: u8, what: &str) -> R<()> {
        if t == want {
            Ok(())
        } else {
            self.err(format!("{what} has type {t}, expected {want}"))
        }
    }

    /// Skips a value of type `t`.
    pub(crate) fn skip(&mut self, t: u8, depth: usize) -> R<()> {
        if depth > MAX_DEPTH {
            return self.err(format!("nesting deeper than {MAX_DEPTH}"));
        }
        match t {
            ty::TRUE | ty::FALSE => Ok(()),
            ty::BYTE => self.byte().map(|_| ()),
            ty::I16 | ty::I32 | ty::I64 => self.skip_varint(),
            ty::DOUBLE => self.skip_bytes(8),
            ty::BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            ty::LIST | ty::SET => {
                let h = self.byte()?;
                let et = h & 0x0f;
                let n = match h >> 4 {
                    15 => self.varint()?,
                    k => u64::from(k),
                };
                // every element takes a byte at least: a longer count cannot be true
                if n > (self.buf.len() - self.pos) as u64 {
                    return self.err(format!("a list of {n} elements in fewer bytes"));
                }
                match et {
                    // element booleans are one byte each in lists
                    ty::TRUE | ty::FALSE | ty::BYTE => self.skip_bytes(n)?,
                    ty::I16 | ty::I32 | ty::I64 => {
                        for _ in 0..n {
                            self.skip_varint()?;
                        }
                    }
                    _ => {
                        for _ in 0..n {
                            self.skip(et, depth + 1)?;
                        }
                    }
                }
                Ok(())
            }
            ty::MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                // an entry takes two bytes at least; booleans are a byte each in a map, as in
                // a list (skipped as field booleans, which take none, a count of 2^50 looped
                // over nothing: a hang, found by fuzzing)
                if n > (self.buf.len() - self.pos) as u64 / 2 {
                    return self.err(format!("a map of {n} entries in fewer bytes"));
                }
                for _ in 0..n {
                    for t in [kv >> 4, kv & 0x0f] {
                        if t == ty::TRUE || t == ty::FALSE {
                            self.byte()?;
                        } else {
                            self.skip(t, depth + 1)?;
                        }
                    }
                }
                Ok(())
            }
            ty::STRUCT => {
                let mut last = 0i16;
                while let Some((_, ft)) = self.field(&mut last)? {
                    self.skip(ft, depth + 1)?;
                }
                Ok(())
            }
            _ => self.err(format!("unknown compact type {t}")),
        }
    }

    /// A list header whose elements must be of type `want`: the element count.
    pub(crate) fn list_len(&mut self, want: u8) -> R<u64> {
        let h = self.byte()?;
        self.expect(h & 0x0f, want, "a list's elements")?;
        let n = match h >> 4 {
            15 => self.varint()?,
            k => u64::from(k),
        };
        // every element takes a byte at least
        if n > (self.buf.len() - self.pos) as u64 {
            return self.err(format!("a list of {n} elements in fewer bytes"));
        }
        Ok(n)
    }
}
