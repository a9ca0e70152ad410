//! Just enough of a C declaration reader to check the Rust side of the kernels against their
//! sources (tests only): `extern "C" __global__` signatures, `struct` fields and the
//! `static_assert(sizeof(X) == N, ...)` sizes. Types come out in the spelling the launch layer
//! uses: `const T*`, `T*`, `T* const*`, `int`, `u64`, `i64` (for `unsigned long long` and
//! `long long`), whitespace and comments gone.

/// `src` without `//` and `/* */` comments.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// `s` from its `(` at `open` to the matching `)`: (inside, the rest after it).
fn balanced(s: &str, open: usize) -> Option<(&str, &str)> {
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[open + 1..open + i], &s[open + i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// `s` without its `__launch_bounds__(...)`.
fn without_launch_bounds(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("__launch_bounds__") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        rest = match after.find('(').and_then(|o| balanced(after, o)) {
            Some((_, tail)) => tail,
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// A declaration `decl` ("const long long* page_start", "int pad[3]") as (normalised type,
/// name).
pub(crate) fn declaration(decl: &str) -> (String, String) {
    let decl = decl
        .replace("unsigned long long", "u64")
        .replace("long long", "i64")
        .replace("unsigned int", "u32")
        .replace("unsigned char", "u8");
    let (decl, array) = match decl.find('[') {
        Some(i) => (&decl[..i], decl[i..].replace(char::is_whitespace, "")),
        None => (decl.as_str(), String::new()),
    };
    let mut tokens: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in decl.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if c == '*' {
            tokens.push("*".into());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let name = tokens.pop().unwrap_or_default();
    let mut ty = String::new();
    for t in tokens {
        if t != "*" && !ty.is_empty() {
            ty.push(' ');
        }
        ty.push_str(&t);
    }
    (ty + &array, name)
}

/// (name, parameter types) of every `extern "C" __global__` function of `src`, in order.
pub(crate) fn kernel_signatures(src: &str) -> Vec<(String, Vec<String>)> {
    let src = without_launch_bounds(&strip_comments(src));
    let mut out = Vec::new();
    let mut rest = src.as_str();
    while let Some(i) = rest.find("extern \"C\" __global__") {
        let after = &rest[i + "extern \"C\" __global__".len()..];
        let Some(open) = after.find('(') else { break };
        let name = after[..open].split_whitespace().last().unwrap_or_default();
        let Some((params, tail)) = balanced(after, open) else {
            break;
        };
        let types = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "void")
            .map(|p| declaration(p).0)
            .collect();
        out.push((name.to_string(), types));
        rest = tail;
    }
    out
}

/// The fields (name, type) of the first `struct name { ... };` of `src`.
pub(crate) fn struct_fields(src: &str, name: &str) -> Option<Vec<(String, String)>> {
    let src = strip_comments(src);
    let key = format!("struct {name}");
    let mut from = 0;
    while let Some(i) = src[from..].find(&key) {
        let at = from + i;
        let before = src[..at].chars().next_back();
        let after = src[at + key.len()..].trim_start();
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) && after.starts_with('{') {
            let body = &after[1..after.find('}')?];
            return Some(
                body.split(';')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|d| {
                        let (ty, name) = declaration(d);
                        (name, ty)
                    })
                    .collect(),
            );
        }
        from = at + key.len();
    }
    None
}

/// `src` with every run of whitespace one space.
fn squeezed(src: &str) -> String {
    src.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// N of the first `static_assert(sizeof(name) == N` of `src`.
pub(crate) fn asserted_size(src: &str, name: &str) -> Option<usize> {
    let src = squeezed(&strip_comments(src))
        .replace("( ", "(")
        .replace(" )", ")");
    let key = format!("static_assert(sizeof({name}) == ");
    let rest = &src[src.find(&key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The names of the structures whose size `src` asserts (`static_assert(sizeof(X) ...`).
pub(crate) fn asserted_structs(src: &str) -> Vec<String> {
    let src = squeezed(&strip_comments(src))
        .replace("( ", "(")
        .replace(" )", ")");
    let mut out: Vec<String> = Vec::new();
    for part in src.split("static_assert(sizeof(").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_normalised() {
        let d = |s: &str| declaration(s).0;
        assert_eq!(d("const long long*  page_start"), "const i64*");
        assert_eq!(d("unsigned long long *first_bad"), "u64*");
        assert_eq!(d("u64* const* entries_out"), "u64* const*");
        assert_eq!(d("u64 * const * entries_out"), "u64* const*");
        assert_eq!(d("int num_chunks"), "int");
        assert_eq!(declaration("int pad[3]"), ("int[3]".into(), "pad".into()));
    }

    #[test]
    fn signatures_structs_and_sizes_are_read() {
        let src = "// a kernel\nextern \"C\" __global__ void __launch_bounds__(MAX(2, 3)) k(\n\
                   const PageJob* pages, /* in */ int n, // count\n    u32* errors)\n{ }\n\
                   struct S {   // 16 bytes\n    u64 a; // first\n int b;\n int pad[1];\n};\n\
                   static_assert( sizeof(S) == 16, \"S\");\n\
                   extern \"C\" __global__ void none(void) {}";
        assert_eq!(
            kernel_signatures(src),
            [
                (
                    "k".to_string(),
                    vec!["const PageJob*".to_string(), "int".into(), "u32*".into()]
                ),
                ("none".to_string(), vec![])
            ]
        );
        let f = struct_fields(src, "S").unwrap();
        assert_eq!(
            f,
            [
                ("a".to_string(), "u64".to_string()),
                ("b".into(), "int".into()),
                ("pad".into(), "int[1]".into())
            ]
        );
        assert_eq!(asserted_size(src, "S"), Some(16));
        assert_eq!(asserted_structs(src), ["S"]);
        assert_eq!(struct_fields(src, "T"), None);
    }
}
