//! The filter language's lexer and parser ([`parse_predicate`]); the grammar is in the
//! [module docs](super).

use super::{CmpOp, LikePattern, Literal, Predicate};
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Dot,
    Int(i128),
    Float(f64),
    Str(String),
    Op(CmpOp),
    LParen,
    RParen,
    And,
    Or,
    Not,
    In,
    Is,
    Between,
    Like,
    Null,
    Comma,
    True,
    False,
}

fn lex(expr: &str) -> Result<Vec<(usize, Tok)>> {
    let err = |pos: usize, msg: &str| Error::Filter {
        expr: expr.to_string(),
        reason: format!("{msg} at position {}", pos + 1),
    };
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push((start, Tok::LParen));
                i += 1
            }
            b')' => {
                out.push((start, Tok::RParen));
                i += 1
            }
            b',' => {
                out.push((start, Tok::Comma));
                i += 1
            }
            b'.' if !b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => {
                out.push((start, Tok::Dot));
                i += 1
            }
            b'<' | b'>' | b'=' | b'!' => {
                let two = b.get(i + 1).copied();
                let (op, n) = match (c, two) {
                    (b'<', Some(b'=')) => (CmpOp::Le, 2),
                    (b'<', Some(b'>')) => (CmpOp::Ne, 2),
                    (b'<', _) => (CmpOp::Lt, 1),
                    (b'>', Some(b'=')) => (CmpOp::Ge, 2),
                    (b'>', _) => (CmpOp::Gt, 1),
                    (b'=', Some(b'=')) => (CmpOp::Eq, 2),
                    (b'=', _) => (CmpOp::Eq, 1),
                    (b'!', Some(b'=')) => (CmpOp::Ne, 2),
                    _ => return Err(err(start, "expected '!='")),
                };
                out.push((start, Tok::Op(op)));
                i += n;
            }
            b'\'' => {
                let mut s = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(err(start, "unterminated string literal")),
                        Some(b'\'') if b.get(i + 1) == Some(&b'\'') => {
                            s.push(b'\'');
                            i += 2;
                        }
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                // The input is a &str and quotes are ASCII, so the bytes between are UTF-8.
                out.push((start, Tok::Str(String::from_utf8_lossy(&s).into_owned())));
            }
            b'`' => {
                let end = expr[i + 1..]
                    .find('`')
                    .ok_or_else(|| err(start, "unterminated `quoted` name"))?;
                out.push((start, Tok::Ident(expr[i + 1..i + 1 + end].to_string())));
                i += end + 2;
            }
            b'0'..=b'9' | b'-' | b'+' | b'.' => {
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'.'
                        || ((b[i] == b'-' || b[i] == b'+') && matches!(b[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
                let text = &expr[start..i];
                let tok = if let Ok(v) = text.parse::<i128>() {
                    Tok::Int(v)
                } else if let Ok(v) = text.parse::<f64>() {
                    if !v.is_finite() {
                        return Err(err(start, "number out of range"));
                    }
                    Tok::Float(v)
                } else {
                    return Err(err(start, &format!("invalid number '{text}'")));
                };
                out.push((start, tok));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &expr[start..i];
                let tok = match word.to_ascii_lowercase().as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "in" => Tok::In,
                    "is" => Tok::Is,
                    "between" => Tok::Between,
                    "like" => Tok::Like,
                    "null" => Tok::Null,
                    "true" => Tok::True,
                    "false" => Tok::False,
                    _ => Tok::Ident(word.to_string()),
                };
                out.push((start, tok));
            }
            _ => {
                let ch = expr[start..].chars().next().unwrap_or('?');
                return Err(err(start, &format!("unexpected character '{ch}'")));
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    expr: &'a str,
    toks: Vec<(usize, Tok)>,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, msg: &str) -> Error {
        let at = match self.toks.get(self.pos) {
            Some((p, _)) => format!("at position {}", p + 1),
            None => "at the end".to_string(),
        };
        Error::Filter {
            expr: self.expr.to_string(),
            reason: format!("{msg} {at}"),
        }
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }
    fn bump(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }
    fn expr(&mut self, depth: usize) -> Result<Predicate> {
        if depth > 64 {
            return Err(self.err("expression nested too deeply"));
        }
        let mut left = self.and(depth)?;
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            let right = self.and(depth)?;
            left = Predicate::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }
    fn and(&mut self, depth: usize) -> Result<Predicate> {
        let mut left = self.atom(depth)?;
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            let right = self.atom(depth)?;
            left = Predicate::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }
    fn atom(&mut self, depth: usize) -> Result<Predicate> {
        if depth > 64 {
            return Err(self.err("expression nested too deeply"));
        }
        if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            let p = self.atom(depth + 1)?;
            return Ok(Predicate::Not(Box::new(p)));
        }
        if self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            let e = self.expr(depth + 1)?;
            if self.bump() != Some(Tok::RParen) {
                self.pos -= 1;
                return Err(self.err("expected ')'"));
            }
            return Ok(e);
        }
        if matches!(self.peek(), Some(Tok::Ident(_))) && !self.typed_literal_ahead() {
            let column = self.column()?;
            if self.peek() == Some(&Tok::Is) {
                self.pos += 1;
                let negated = self.peek() == Some(&Tok::Not);
                if negated {
                    self.pos += 1;
                }
                if self.bump() != Some(Tok::Null) {
                    self.pos -= 1;
                    return Err(self.err("expected NULL after IS / IS NOT"));
                }
                return Ok(Predicate::IsNull { column, negated });
            }
            // `[NOT] IN`, `[NOT] BETWEEN`, `[NOT] LIKE`
            let negated = self.peek() == Some(&Tok::Not)
                && matches!(
                    self.toks.get(self.pos + 1).map(|t| &t.1),
                    Some(Tok::In | Tok::Between | Tok::Like)
                );
            if negated {
                self.pos += 1;
            }
            match self.peek() {
                Some(Tok::In) => {
                    self.pos += 1;
                    return self.in_list(column, negated);
                }
                Some(Tok::Between) => {
                    self.pos += 1;
                    let low = self.literal()?;
                    if self.bump() != Some(Tok::And) {
                        self.pos -= 1;
                        return Err(self.err("expected AND between BETWEEN's bounds"));
                    }
                    let high = self.literal()?;
                    let cmp = |op, value| Predicate::Cmp {
                        column: column.clone(),
                        op,
                        value,
                    };
                    let both = Predicate::And(
                        Box::new(cmp(CmpOp::Ge, low)),
                        Box::new(cmp(CmpOp::Le, high)),
                    );
                    return Ok(match negated {
                        true => Predicate::Not(Box::new(both)),
                        false => both,
                    });
                }
                Some(Tok::Like) => {
                    self.pos += 1;
                    let Some(Tok::Str(text)) = self.bump() else {
                        self.pos -= 1;
                        return Err(self.err("expected a 'pattern' after LIKE"));
                    };
                    let pattern = LikePattern::new(&text).map_err(|m| self.err(&m))?;
                    return Ok(Predicate::Like {
                        column,
                        pattern,
                        negated,
                    });
                }
                _ => {}
            }
            // a bare (boolean) column: `flag`, `NOT flag`, `flag AND x > 1`
            if matches!(
                self.peek(),
                None | Some(Tok::And | Tok::Or | Tok::RParen)
            ) {
                return Ok(Predicate::Cmp {
                    column,
                    op: CmpOp::Eq,
                    value: Literal::Bool(true),
                });
            }
            let op = self.op()?;
            if matches!(self.peek(), Some(Tok::Ident(_))) && !self.typed_literal_ahead() {
                let right = self.column()?;
                return Ok(Predicate::CmpColumns {
                    left: column,
                    op,
                    right,
                });
            }
            let value = self.literal()?;
            return Ok(Predicate::Cmp { column, op, value });
        }
        let value = self.literal()?;
        let op = self.op()?.flip();
        if !matches!(self.peek(), Some(Tok::Ident(_))) {
            return Err(self.err("expected a column name"));
        }
        let column = self.column()?;
        Ok(Predicate::Cmp { column, op, value })
    }
    /// Whether the next tokens are a word and a string: a typed literal (`DATE '…'`), not a
    /// column (`date`).
    fn typed_literal_ahead(&self) -> bool {
        matches!(
            (self.peek(), self.toks.get(self.pos + 1).map(|t| &t.1)),
            (Some(Tok::Ident(_)), Some(Tok::Str(_)))
        )
    }
    /// `'(' literal (',' literal)* ')'` after `column [NOT] IN`: `column = a OR …`, or
    /// `column != a AND …` for `NOT IN`.
    fn in_list(&mut self, column: Vec<String>, not_in: bool) -> Result<Predicate> {
        if self.bump() != Some(Tok::LParen) {
            self.pos -= 1;
            return Err(self.err("expected '(' after IN"));
        }
        let mut out: Option<Predicate> = None;
        loop {
            let value = self.literal()?;
            let op = if not_in { CmpOp::Ne } else { CmpOp::Eq };
            let cmp = Predicate::Cmp {
                column: column.clone(),
                op,
                value,
            };
            out = Some(match out.take() {
                None => cmp,
                Some(p) if not_in => Predicate::And(Box::new(p), Box::new(cmp)),
                Some(p) => Predicate::Or(Box::new(p), Box::new(cmp)),
            });
            match self.bump() {
                Some(Tok::Comma) => {}
                Some(Tok::RParen) => break,
                _ => {
                    self.pos -= 1;
                    return Err(self.err("expected ',' or ')' in the IN list"));
                }
            }
        }
        // one node of the tree: `a AND x IN (1, 2)` keeps its meaning
        out.ok_or_else(|| self.err("an empty IN list"))
    }

    fn column(&mut self) -> Result<Vec<String>> {
        let mut parts = Vec::new();
        loop {
            match self.bump() {
                Some(Tok::Ident(s)) => parts.push(s),
                _ => {
                    self.pos -= 1;
                    return Err(self.err("expected a column name"));
                }
            }
            if self.peek() == Some(&Tok::Dot) {
                self.pos += 1;
            } else {
                return Ok(parts);
            }
        }
    }
    fn op(&mut self) -> Result<CmpOp> {
        match self.bump() {
            Some(Tok::Op(op)) => Ok(op),
            _ => {
                self.pos -= 1;
                Err(self.err("expected a comparison (<, <=, >, >=, =, !=)"))
            }
        }
    }
    fn literal(&mut self) -> Result<Literal> {
        match self.bump() {
            Some(Tok::Int(v)) => Ok(Literal::Int(v)),
            Some(Tok::Float(v)) => Ok(Literal::Float(v)),
            Some(Tok::Str(s)) => Ok(Literal::Str(s)),
            Some(Tok::True) => Ok(Literal::Bool(true)),
            Some(Tok::False) => Ok(Literal::Bool(false)),
            Some(Tok::Ident(w)) => match self.bump() {
                Some(Tok::Str(text)) if w.eq_ignore_ascii_case("date") => Ok(Literal::Date(text)),
                Some(Tok::Str(text)) if w.eq_ignore_ascii_case("timestamp") => {
                    Ok(Literal::Timestamp(text))
                }
                Some(Tok::Str(_)) => {
                    self.pos -= 2;
                    Err(self.err(&format!(
                        "unknown typed literal {w} '…' (DATE '…' and TIMESTAMP '…' are known)"
                    )))
                }
                _ => {
                    self.pos -= 2;
                    Err(self.err(
                        "expected a literal (number, 'string', true, false, DATE '…' or \
                         TIMESTAMP '…')",
                    ))
                }
            },
            _ => {
                self.pos -= 1;
                Err(self.err(
                    "expected a literal (number, 'string', true, false, DATE '…' or TIMESTAMP '…')",
                ))
            }
        }
    }
}

/// Parses a filter expression.
pub fn parse_predicate(expr: &str) -> Result<Predicate> {
    let toks = lex(expr)?;
    if toks.is_empty() {
        return Err(Error::Filter {
            expr: expr.to_string(),
            reason: "empty expression".into(),
        });
    }
    let mut p = Parser { expr, toks, pos: 0 };
    let e = p.expr(0)?;
    if p.pos < p.toks.len() {
        return Err(p.err("unexpected input"));
    }
    Ok(e)
}
