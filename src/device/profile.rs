//! Stage timing of the decoder: while a thread profiles ([`profile_begin`]), every named stage
//! it runs ([`timed`], and each waited kernel launch as `kernel <name>`) records its wall time;
//! [`profile_end`] sums them per name. Off, a stage costs one thread-local check.

use std::cell::RefCell;
use std::time::{Duration, Instant};

thread_local! {
    static PROFILE: RefCell<Option<Vec<(String, Duration)>>> = const { RefCell::new(None) };
}

/// Starts recording the wall time of each decoding stage run on this thread (every launch
/// waits for its kernel, so a kernel's stage is its run time plus the launch).
pub(crate) fn profile_begin() {
    PROFILE.with(|p| *p.borrow_mut() = Some(Vec::new()));
}

/// Stops recording; the stages in first-seen order, times summed per name.
pub(crate) fn profile_end() -> Vec<(String, Duration)> {
    let raw = PROFILE.with(|p| p.borrow_mut().take()).unwrap_or_default();
    let mut out: Vec<(String, Duration)> = Vec::new();
    for (name, d) in raw {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += d,
            None => out.push((name, d)),
        }
    }
    out
}

/// Adds `stages` (recorded on a helper thread) to this thread's record, when it profiles.
pub(crate) fn profile_absorb(stages: Vec<(String, Duration)>) {
    PROFILE.with(|p| {
        if let Some(v) = p.borrow_mut().as_mut() {
            v.extend(stages);
        }
    });
}

/// Whether this thread records stages.
pub(crate) fn profiling() -> bool {
    PROFILE.with(|p| p.borrow().is_some())
}

/// Runs `f`, recording its wall time under `name` when this thread profiles.
pub(crate) fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    if !profiling() {
        return f();
    }
    let t = Instant::now();
    let r = f();
    since(name, t);
    r
}

/// While profiling, records stage `name` as running from `start` until now.
pub(crate) fn since(name: &str, start: Instant) {
    if !profiling() {
        return;
    }
    let d = start.elapsed();
    PROFILE.with(|p| {
        if let Some(v) = p.borrow_mut().as_mut() {
            v.push((name.to_string(), d));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_summed_in_first_seen_order_only_while_profiling() {
        assert_eq!(timed("off", || 7), 7);
        assert!(profile_end().is_empty());
        profile_begin();
        timed("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        timed("b", || ());
        timed("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        let p = profile_end();
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(p[0].1 >= std::time::Duration::from_millis(4));
        timed("after", || ());
        assert!(profile_end().is_empty());
    }
}
