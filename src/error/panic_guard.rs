//! Turning panics inside arrow-rs into errors.
//!
//! arrow-rs panics on some corrupt inputs (slice indexing in decoders, a `num_bits` assert).
//! [`contain`] runs a closure under `catch_unwind` with a quiet panic hook for the current
//! thread, so a corrupt file yields an error instead of a crash or a message on stderr. The
//! hook delegates to the previous one for every other panic.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic becomes `Err(message)`, on one line (an `assert_eq!`'s message spreads
/// its operands over several).
pub(crate) fn contain<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let was = QUIET.with(|q| q.replace(true));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(|payload| {
        let s = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "unknown panic".to_string()
        };
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn panics_become_errors() {
        let r: Result<(), String> = super::contain(|| {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            let _ = v[i];
        });
        assert!(r.unwrap_err().contains("index out of bounds"));
        assert_eq!(super::contain(|| 5).unwrap(), 5);
        // an assertion's message over several lines comes back on one
        let r: Result<(), String> = super::contain(|| assert_ne!(0, 0, "slice must not be empty"));
        let e = r.unwrap_err();
        assert!(!e.contains('\n') && e.contains("slice must not be empty") && e.contains("left: 0 right: 0"), "{e}");
    }
}
