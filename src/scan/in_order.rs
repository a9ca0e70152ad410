//! Several workers, one ordered stream: the scheduling half of spreading a load over several
//! devices ([`crate::plan::devices`] decides which device takes each pass).
//!
//! [`InOrder`] runs each worker's passes on a thread of its own, in load order, and yields
//! every pass's output in load order. A worker runs ahead of the caller by at most `ahead` of
//! its own passes: an output the caller has not taken yet still holds its device's memory, so
//! a worker waits (rather than decode a further pass) while `ahead` of its outputs are waiting.
//! A pass that fails is yielded as its error, in its place; nothing after it is yielded: the
//! workers still run the passes before it (the caller takes them first) and start none after
//! it. Dropping the stream stops the workers the
//! same way and waits for them.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::error::Result;

struct State<T> {
    /// Outputs done and not yet taken, by pass.
    done: BTreeMap<usize, Result<T>>,
    /// Per worker: its outputs waiting in `done`.
    waiting: Vec<usize>,
    /// The caller stopped: workers start nothing more.
    stop: bool,
    /// The first pass that failed: workers start no pass after it (those before it still
    /// run: the caller takes them first).
    failed: Option<usize>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    cv: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// See the [module docs](self).
pub(crate) struct InOrder<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    /// Per pass, its worker.
    worker_of: Vec<usize>,
    next: usize,
    finished: bool,
    threads: Vec<JoinHandle<()>>,
}

impl<T: Send + 'static> InOrder<T> {
    /// Starts the workers: `worker_of[k]` runs pass `k` (`run(worker, k)`), each worker its
    /// passes in load order, at most `ahead` (at least 1) of its outputs waiting for the
    /// caller at once. `names[w]` names worker `w`'s device in the error for a pass that
    /// panicked.
    pub(crate) fn start<F>(worker_of: Vec<usize>, names: Vec<String>, ahead: usize, run: F) -> Self
    where
        F: Fn(usize, usize) -> Result<T> + Send + Sync + 'static,
    {
        let workers = worker_of.iter().copied().max().map_or(0, |w| w + 1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                done: BTreeMap::new(),
                waiting: vec![0; workers],
                stop: false,
                failed: None,
            }),
            cv: Condvar::new(),
        });
        let run = Arc::new(run);
        let ahead = ahead.max(1);
        let threads = (0..workers)
            .map(|w| {
                let mine: Vec<usize> = (0..worker_of.len()).filter(|&k| worker_of[k] == w).collect();
                let (shared, run) = (Arc::clone(&shared), Arc::clone(&run));
                let name = names.get(w).cloned().unwrap_or_else(|| format!("worker {w}"));
                std::thread::spawn(move || {
                    for k in mine {
                        {
                            let mut st = shared.lock();
                            while !st.stop && st.waiting[w] >= ahead {
                                st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                            }
                            if st.stop || st.failed.is_some_and(|f| k > f) {
                                return;
                            }
                        }
                        let out = crate::error::panic_guard::contain(|| run(w, k))
                            .unwrap_or_else(|panic| {
                                Err(crate::error::Error::Device {
                                    device: name.clone(),
                                    reason: format!("pass {k} panicked: {panic}"),
                                })
                            });
                        let mut st = shared.lock();
                        if out.is_err() {
                            st.failed = Some(st.failed.map_or(k, |f| f.min(k)));
                        }
                        st.done.insert(k, out);
                        st.waiting[w] += 1;
                        shared.cv.notify_all();
                    }
                })
            })
            .collect();
        InOrder {
            shared,
            worker_of,
            next: 0,
            finished: false,
            threads,
        }
    }

    fn stop(&mut self) {
        self.finished = true;
        self.shared.lock().stop = true;
        self.shared.cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<T: Send + 'static> Iterator for InOrder<T> {
    /// (pass, its output).
    type Item = Result<(usize, T)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished || self.next >= self.worker_of.len() {
            if !self.finished {
                self.stop();
            }
            return None;
        }
        let k = self.next;
        let out = {
            let mut st = self.shared.lock();
            loop {
                if let Some(out) = st.done.remove(&k) {
                    st.waiting[self.worker_of[k]] -= 1;
                    self.shared.cv.notify_all();
                    break out;
                }
                st = self.shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        self.next += 1;
        match out {
            Ok(v) => Some(Ok((k, v))),
            Err(e) => {
                self.stop();
                Some(Err(e))
            }
        }
    }
}

impl<T: Send + 'static> Drop for InOrder<T> {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|d| format!("cuda:{d}")).collect()
    }

    #[test]
    fn outputs_come_in_load_order_from_workers_running_at_once() {
        // two workers, alternate passes, the even ones slower: still in order, and the two
        // run at once
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (r2, m2) = (Arc::clone(&running), Arc::clone(&most));
        let s = InOrder::start(vec![0, 1, 0, 1, 0, 1], names(2), 4, move |w, k| {
            let now = r2.fetch_add(1, Ordering::SeqCst) + 1;
            m2.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(if w == 0 { 30 } else { 20 }));
            r2.fetch_sub(1, Ordering::SeqCst);
            Ok((w, k * 10))
        });
        let got: Vec<(usize, (usize, usize))> = s.map(|r| r.unwrap()).collect();
        let want: Vec<(usize, (usize, usize))> = (0..6).map(|k| (k, (k % 2, k * 10))).collect();
        assert_eq!(got, want);
        assert_eq!(most.load(Ordering::SeqCst), 2, "the workers never ran at once");
    }

    #[test]
    fn a_worker_runs_at_most_ahead_passes_before_the_caller() {
        // worker 1's passes are quick; the caller waits on worker 0's slow first pass: worker 1
        // may finish `ahead` = 2 of its own and no more
        let started = Arc::new(AtomicUsize::new(0));
        let s2 = Arc::clone(&started);
        let mut s = InOrder::start(vec![0, 1, 1, 1, 1], names(2), 2, move |w, _| {
            if w == 1 {
                s2.fetch_add(1, Ordering::SeqCst);
            } else {
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(())
        });
        let t = Instant::now();
        while started.load(Ordering::SeqCst) < 2 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(started.load(Ordering::SeqCst), 2, "worker 1 ran ahead");
        assert_eq!(s.next().unwrap().unwrap().0, 0);
        let rest: Vec<usize> = s.map(|r| r.unwrap().0).collect();
        assert_eq!(rest, [1, 2, 3, 4]);
        assert_eq!(started.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_failed_pass_is_yielded_in_its_place_and_ends_the_stream() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r2 = Arc::clone(&ran);
        let s = InOrder::start(vec![0, 1, 0, 1, 0, 1, 0, 1], names(2), 1, move |w, k| {
            r2.fetch_add(1, Ordering::SeqCst);
            if k == 3 {
                return Err(Error::Device {
                    device: format!("cuda:{w}"),
                    reason: "lost".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
            Ok(k)
        });
        let got: Vec<std::result::Result<usize, String>> = s
            .map(|r| r.map(|(_, v)| v).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[..3], [Ok(0), Ok(1), Ok(2)]);
        let e = got[3].as_ref().unwrap_err();
        assert!(e.contains("cuda:1") && e.contains("lost"), "{e}");
        // the workers started no pass after the failed one but the ones already running
        assert!(ran.load(Ordering::SeqCst) <= 6, "{}", ran.load(Ordering::SeqCst));
    }

    #[test]
    fn a_panicking_pass_is_an_error_and_dropping_the_stream_stops_the_workers() {
        let s = InOrder::start(vec![0, 1], names(2), 1, |_, k| {
            if k == 1 {
                panic!("boom");
            }
            Ok(k)
        });
        let got: Vec<_> = s.collect();
        assert!(got[0].is_ok());
        let e = got[1].as_ref().err().unwrap().to_string();
        assert!(
            e.contains("cuda:1") && e.contains("pass 1") && e.contains("boom"),
            "{e}"
        );
        // dropped after one output of many: returns (the workers stop and are joined)
        let t = Instant::now();
        let mut s = InOrder::start(vec![0, 1, 0, 1, 0, 1, 0, 1], names(2), 1, |_, k| {
            std::thread::sleep(Duration::from_millis(10));
            Ok(k)
        });
        assert_eq!(s.next().unwrap().unwrap().0, 0);
        drop(s);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        // no passes at all
        let mut s = InOrder::start(Vec::new(), Vec::new(), 1, |_, k| Ok(k));
        assert!(s.next().is_none());
    }
}
