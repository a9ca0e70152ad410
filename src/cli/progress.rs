//! The progress bar `load` draws on stderr.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A progress bar on stderr that appears only for loads that take longer than about a second.
#[derive(Clone)]
pub(crate) struct ProgressBar {
    bar: indicatif::ProgressBar,
    finished: Arc<AtomicBool>,
}

impl ProgressBar {
    pub(crate) fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::hidden(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg:>8} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        let finished = Arc::new(AtomicBool::new(false));
        let (b, f) = (bar.clone(), finished.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            if !f.load(Ordering::Relaxed) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
        });
        ProgressBar { bar, finished }
    }

    pub(crate) fn update(&self, p: cuparquet::scan::Progress) {
        self.bar.set_length(p.bytes_total.max(1));
        if p.bytes_read < p.bytes_total || p.row_groups_done == 0 {
            self.bar.set_message("reading");
            self.bar.set_position(p.bytes_read);
        } else {
            self.bar.set_message("decoding");
            let frac = p.row_groups_done as f64 / p.row_groups_total.max(1) as f64;
            self.bar.set_position((frac * p.bytes_total as f64) as u64);
        }
    }

    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
        self.bar.finish_and_clear();
    }
}
