//! `LIKE` patterns: `%` matches any run of characters (none included), `_` exactly one
//! character, `\` makes the next character literal (`\%`, `\_`, `\\`), as arrow-rs and
//! DataFusion read them; every other character matches itself, byte for byte. Matching walks
//! the value once, going back only to the last `%` (the classic wildcard matcher): linear for
//! patterns with one `%`, at worst value length × pattern length. The device kernel
//! (`pred_like` in `kernels/filter.cu`) runs the same walk over the same tokens.

use std::fmt;

/// One token of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LikeToken {
    /// This byte.
    Byte(u8),
    /// `_`: one character (a whole UTF-8 sequence).
    One,
    /// `%`: any run of characters.
    Any,
}

/// A compiled `LIKE` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikePattern {
    text: String,
    tokens: Vec<LikeToken>,
}

impl serde::Serialize for LikePattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl fmt::Display for LikePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The length of the UTF-8 sequence led by `b` (1 for a byte that leads none).
pub(crate) fn utf8_len(b: u8) -> usize {
    match b {
        0xF0..=0xF7 => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

impl LikePattern {
    /// Compiles `text`; an error names what is wrong (a `\` with nothing after it).
    pub fn new(text: &str) -> Result<Self, String> {
        let mut tokens = Vec::with_capacity(text.len());
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => {
                    let Some(&next) = b.get(i + 1) else {
                        return Err(format!(
                            "LIKE pattern '{text}' ends with the escape character '\\' \
                             (write '\\\\' for a backslash)"
                        ));
                    };
                    tokens.push(LikeToken::Byte(next));
                    i += 2;
                }
                b'%' => {
                    // `%%` is `%`
                    if tokens.last() != Some(&LikeToken::Any) {
                        tokens.push(LikeToken::Any);
                    }
                    i += 1;
                }
                b'_' => {
                    tokens.push(LikeToken::One);
                    i += 1;
                }
                c => {
                    tokens.push(LikeToken::Byte(c));
                    i += 1;
                }
            }
        }
        Ok(LikePattern {
            text: text.to_string(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The tokens.
    pub fn tokens(&self) -> &[LikeToken] {
        &self.tokens
    }

    /// The bytes every match begins with (before the first wildcard).
    pub fn prefix(&self) -> Vec<u8> {
        self.tokens
            .iter()
            .map_while(|t| match t {
                LikeToken::Byte(b) => Some(*b),
                _ => None,
            })
            .collect()
    }

    /// The one value the pattern matches, when it has no wildcard.
    pub fn exact(&self) -> Option<Vec<u8>> {
        let p = self.prefix();
        (p.len() == self.tokens.len()).then_some(p)
    }

    /// The tokens as the kernel takes them: per token a kind (0 a byte, 1 `_`, 2 `%`) and a
    /// byte (0 for the wildcards).
    pub fn kernel_form(&self) -> (Vec<u8>, Vec<u8>) {
        self.tokens
            .iter()
            .map(|t| match t {
                LikeToken::Byte(b) => (0u8, *b),
                LikeToken::One => (1, 0),
                LikeToken::Any => (2, 0),
            })
            .unzip()
    }

    /// Whether `s` matches.
    pub fn matches(&self, s: &[u8]) -> bool {
        let p = &self.tokens;
        let (mut i, mut j) = (0usize, 0usize);
        // the last `%` seen, and where in `s` its run ends so far
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match p.get(j) {
                Some(LikeToken::Byte(b)) if *b == s[i] => {
                    i += 1;
                    j += 1;
                }
                Some(LikeToken::One) => {
                    i += utf8_len(s[i]);
                    j += 1;
                }
                Some(LikeToken::Any) => {
                    star = Some((j, i));
                    j += 1;
                }
                _ => match star {
                    Some((sj, si)) => {
                        // the `%` takes one more character
                        let si = si + utf8_len(s[si]);
                        star = Some((sj, si));
                        i = si;
                        j = sj + 1;
                    }
                    None => return false,
                },
            }
        }
        while p.get(j) == Some(&LikeToken::Any) {
            j += 1;
        }
        i == s.len() && j == p.len()
    }
}

/// The least byte string greater than every string that starts with `prefix`: `None` when
/// there is none (empty, or all 0xFF).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last == 0xFF {
            end.pop();
        } else {
            *end.last_mut()? += 1;
            return Some(end);
        }
    }
    None
}
