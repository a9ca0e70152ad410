//! With `CUPARQUET_PROFILE` set: when each wave of a pipelined device load was read and decoded,
//! and each wave's decode stages, printed to stderr at the end of the load.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether `CUPARQUET_PROFILE` asks for stage times ([`crate::config::env::profile`]; a bad
/// value was refused where the load was built).
pub(in crate::scan) fn profile_requested() -> bool {
    crate::config::env::profile().unwrap_or(false)
}

/// With `CUPARQUET_PROFILE` set: spans of a pipelined load (what, start, end), printed to
/// stderr relative to its start.
pub(in crate::scan) struct Timeline {
    t0: Instant,
    spans: Option<Mutex<Vec<(String, Duration, Duration)>>>,
    notes: Option<Mutex<Vec<(usize, String)>>>,
}

impl Timeline {
    pub(in crate::scan) fn from_env() -> Self {
        let on = profile_requested();
        Timeline {
            t0: Instant::now(),
            spans: on.then(|| Mutex::new(Vec::new())),
            notes: on.then(|| Mutex::new(Vec::new())),
        }
    }

    /// Records `what()` as running from `start` until now (named only when recording).
    pub(in crate::scan) fn add(&self, what: impl FnOnce() -> String, start: Instant) {
        if let Some(v) = &self.spans {
            let span = (what(), start - self.t0, self.t0.elapsed());
            v.lock().unwrap_or_else(|p| p.into_inner()).push(span);
        }
    }

    /// Records wave `i`'s decode stages (seconds each), printed after the spans.
    pub(in crate::scan) fn note(&self, i: usize, stages: &[(String, f64)]) {
        if let Some(v) = &self.notes {
            let st: Vec<String> = stages
                .iter()
                .map(|(n, s)| format!("{n} {:.2}", s * 1e3))
                .collect();
            let note = format!("wave {i} stages (ms): {}", st.join(", "));
            v.lock().unwrap_or_else(|p| p.into_inner()).push((i, note));
        }
    }

    pub(in crate::scan) fn print(&self) {
        if let Some(v) = &self.spans {
            let mut v = v.lock().unwrap_or_else(|p| p.into_inner());
            v.sort_by_key(|s| s.1);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let line: Vec<String> = v
                .iter()
                .map(|(w, a, b)| format!("{w} {:.1}-{:.1}", ms(*a), ms(*b)))
                .collect();
            eprintln!("timeline (ms): {}", line.join(", "));
        }
        if let Some(v) = &self.notes {
            let mut v = v.lock().unwrap_or_else(|p| p.into_inner());
            v.sort();
            for (_, note) in v.iter() {
                eprintln!("  {note}");
            }
        }
    }
}
