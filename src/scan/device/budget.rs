//! The device bytes of a load's waves under a memory budget ([`Handed`]), counted in two
//! phases so that reads need not wait for decodes:
//!
//! - a wave **read** holds its raw chunks (its read bytes) until it is decoded;
//! - a wave **decoding** holds its chunks and its decode working set (decompressed pages,
//!   decoded buffers, scratch: its footer estimate beyond the reads);
//! - a wave **decoded** holds its batches until the caller has them (the caller's from then on).
//!
//! The reader is admitted to read the next wave while its reads fit beside everything held
//! *and* the largest working set of the waves read and not yet decoding still fits after
//! them: however the decodes go, the next one can always start once those before it are done
//! and handed over, so reads run ahead of the decoders without ever blocking them. A decoder
//! waits until its wave's working set fits beside what is held.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

use crate::scan::waves::WaveCost;

/// A load's waves under a memory budget: what each costs, and what is held.
#[derive(Debug, Clone, Copy)]
pub(in crate::scan) struct Budgeted<'a> {
    pub(in crate::scan) handed: &'a Handed,
    pub(in crate::scan) costs: &'a [WaveCost],
    pub(in crate::scan) budget: u64,
}

impl Budgeted<'_> {
    /// Waits until wave `i` may be read ([`Handed::admit_read`]); false when the stream stopped.
    pub(in crate::scan) fn read(&self, i: usize) -> bool {
        let cost = self.costs.get(i).copied().unwrap_or_default();
        self.handed.admit_read(i, cost, self.budget)
    }

    /// Waits until wave `i` may decode ([`Handed::admit_decode`]); false when the stream
    /// stopped.
    pub(in crate::scan) fn decode(&self, i: usize) -> bool {
        self.handed.admit_decode(i, self.budget)
    }
}

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(in crate::scan) struct Handed {
    state: Mutex<HandedState>,
    cv: Condvar,
    /// Waves go to the caller in order ([`Handed::set`], a stream): a wave decoded before an
    /// earlier one waits for it. Otherwise each goes as it is decoded ([`Handed::release`]).
    in_order: bool,
}

#[derive(Debug, Default)]
struct HandedState {
    /// Waves whose every batch the caller holds (`usize::MAX`: the stream stopped).
    handed: usize,
    /// Bytes held by each wave admitted and not yet handed over.
    held: BTreeMap<usize, u64>,
    /// Waves read and not yet decoding: their working sets, still to come.
    pending: BTreeMap<usize, u64>,
    /// Waves decoding now.
    decoding: usize,
    /// The sum of `held`.
    in_use: u64,
}

impl HandedState {
    fn stopped(&self) -> bool {
        self.handed == usize::MAX
    }

    fn add(&mut self, i: usize, bytes: u64) {
        *self.held.entry(i).or_default() += bytes;
        self.in_use += bytes;
    }

    /// Wave `i` holds `bytes` from now on (never more than before).
    fn shrink(&mut self, i: usize, bytes: u64) {
        if let Some(c) = self.held.get_mut(&i) {
            let now = bytes.min(*c);
            self.in_use -= *c - now;
            *c = now;
        }
    }
}

impl Handed {
    /// The waves of a stream: handed over in order ([`Handed::set`]).
    pub(in crate::scan) fn in_order() -> Self {
        Handed {
            in_order: true,
            ..Handed::default()
        }
    }

    /// The caller holds every batch of the waves before `n`: their bytes are the caller's.
    pub(in crate::scan) fn set(&self, n: usize) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if n > st.handed {
            st.handed = n;
            let kept = st.held.split_off(&n);
            let freed: u64 = st.held.values().sum();
            st.held = kept;
            st.in_use -= freed;
            if n == usize::MAX {
                st.pending.clear();
            }
            self.cv.notify_all();
        }
    }

    /// Waits until wave `i` may be read (see the [module docs](self)); always when nothing is
    /// held. False when the stream stopped.
    pub(in crate::scan) fn admit_read(&self, i: usize, cost: WaveCost, budget: u64) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if st.stopped() {
                return false;
            }
            let largest = st.pending.values().copied().max().unwrap_or(0);
            let after = st.in_use + cost.read + largest.max(cost.decode);
            if st.in_use == 0 || after <= budget {
                break;
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.add(i, cost.read);
        st.pending.insert(i, cost.decode);
        true
    }

    /// Waits until wave `i`, read, may decode: its working set fits beside what is held, or
    /// waiting would free nothing — nothing else decodes, and no decoded batch waits for the
    /// caller that the caller can take before wave `i`'s (handed over in order, a wave
    /// decoded after `i` waits for `i`: counting it, `i` would wait for itself). False when
    /// the stream stopped.
    pub(in crate::scan) fn admit_decode(&self, i: usize, budget: u64) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let decode = st.pending.get(&i).copied().unwrap_or(0);
        loop {
            if st.stopped() {
                return false;
            }
            let waits_for_i = |k: usize| st.pending.contains_key(&k) || (self.in_order && k > i);
            let idle = st.decoding == 0 && st.held.keys().all(|&k| waits_for_i(k));
            if idle || st.in_use + decode <= budget {
                break;
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.pending.remove(&i);
        st.decoding += 1;
        st.add(i, decode);
        true
    }

    /// Wave `i` is decoded (or failed): what it holds until it is handed over is its batches,
    /// `bytes` of them; its reads, decompressed pages and scratch are freed.
    pub(in crate::scan) fn decoded(&self, i: usize, bytes: u64) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.pending.remove(&i).is_none() && st.held.contains_key(&i) {
            st.decoding = st.decoding.saturating_sub(1);
        }
        st.shrink(i, bytes);
        self.cv.notify_all();
    }

    /// Wave `i` handed over on its own (a load collects every wave as it is decoded).
    pub(in crate::scan) fn release(&self, i: usize) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.pending.remove(&i);
        if let Some(c) = st.held.remove(&i) {
            st.in_use -= c;
        }
        self.cv.notify_all();
    }

    #[cfg(test)]
    fn in_use(&self) -> u64 {
        self.state.lock().unwrap().in_use
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cost(read: u64, decode: u64) -> WaveCost {
        WaveCost { read, decode }
    }

    /// Runs `f` on a thread and says whether it is still waiting after 20 ms.
    fn waits<'scope, T: Send + 'scope>(
        s: &'scope std::thread::Scope<'scope, '_>,
        f: impl FnOnce() -> T + Send + 'scope,
    ) -> bool {
        let h = s.spawn(f);
        std::thread::sleep(Duration::from_millis(20));
        !h.is_finished()
    }

    #[test]
    fn reads_run_ahead_of_decodes_while_the_next_decode_still_fits() {
        let h = Handed::default();
        // wave 0: 200 read, 400 to decode; budget 1000
        assert!(h.admit_read(0, cost(200, 400), 1000));
        assert!(h.admit_decode(0, 1000));
        assert_eq!(h.in_use(), 600);
        // wave 1's reads fit beside wave 0 decoding, with its own decode still to come (200 +
        // 600 + 200 = 1000)
        assert!(h.admit_read(1, cost(200, 200), 1000));
        assert_eq!(h.in_use(), 800);
        // wave 1 cannot decode yet (800 + 200 = 1000 fits: it may)
        assert!(h.admit_decode(1, 1000));
        assert_eq!(h.in_use(), 1000);
        // wave 2 must wait: nothing left
        std::thread::scope(|s| {
            assert!(waits(s, || h.admit_read(2, cost(100, 100), 1000)));
            // wave 0 decoded into 300 bytes of batches, handed over: wave 2 goes on
            h.decoded(0, 300);
            h.set(1);
        });
        assert_eq!(h.in_use(), 400 + 100);
    }

    #[test]
    fn a_read_leaves_room_for_the_largest_working_set_to_come() {
        let h = Handed::default();
        assert!(h.admit_read(0, cost(100, 500), 1000));
        // wave 1's 300 of reads would leave 600 for wave 0's 500: fits; wave 2's 150 would
        // leave 450 < 500: it waits until wave 0 decodes and is handed over
        assert!(h.admit_read(1, cost(300, 100), 1000));
        std::thread::scope(|s| {
            assert!(waits(s, || h.admit_read(2, cost(150, 100), 1000)));
            assert!(h.admit_decode(0, 1000));
            h.decoded(0, 0);
            h.set(1);
        });
        // now held: wave 1's 300 and wave 2's 150
        assert_eq!(h.in_use(), 450);
        // and wave 1 can decode (450 + 100 <= 1000)
        assert!(h.admit_decode(1, 1000));
    }

    #[test]
    fn decodes_wait_for_room_beside_other_decodes() {
        let h = Handed::default();
        // three waves read (100 each), each checked to leave room for a 300 decode
        for i in 0..3 {
            assert!(h.admit_read(i, cost(100, 300), 1000));
        }
        assert_eq!(h.in_use(), 300);
        assert!(h.admit_decode(0, 1000));
        assert!(h.admit_decode(1, 1000));
        assert_eq!(h.in_use(), 900);
        // the third decode does not fit beside the two: it waits until wave 0 is decoded and
        // its batches are the caller's
        std::thread::scope(|s| {
            assert!(waits(s, || h.admit_decode(2, 1000)));
            h.decoded(0, 50);
            h.set(1);
        });
        assert_eq!(h.in_use(), 400 + 400);
    }

    #[test]
    fn a_decode_that_waits_on_nothing_goes_on() {
        // estimates over the budget: the first wave is always admitted, and a decode with
        // nothing else decoding or waiting for the caller starts anyway
        let h = Handed::default();
        assert!(h.admit_read(0, cost(800, 800), 1000));
        assert!(h.admit_decode(0, 1000));
        assert_eq!(h.in_use(), 1600);
        h.decoded(0, 100);
        h.set(1);
        assert!(h.admit_read(1, cost(50, 2000), 1000));
        assert!(h.admit_decode(1, 1000));
        assert_eq!(h.in_use(), 2050);
    }

    #[test]
    fn a_wave_decoded_ahead_of_an_earlier_one_does_not_hold_it_up() {
        // two waves read (each leaving room for the other's 450 of decoding); wave 1 decodes
        // first (its reads came in first, or its decoder won the race) and keeps 550 bytes of
        // batches that a stream hands over only after wave 0's: wave 0 (100 + 550 + 450 over
        // 1000) must not wait for them, or it waits for itself
        for in_order in [true, false] {
            let h = if in_order {
                Handed::in_order()
            } else {
                Handed::default()
            };
            assert!(h.admit_read(0, cost(100, 450), 1000));
            assert!(h.admit_read(1, cost(100, 450), 1000));
            assert!(h.admit_decode(1, 1000));
            h.decoded(1, 550);
            assert_eq!(h.in_use(), 650);
            let waited = std::thread::scope(|s| {
                let waited = waits(s, || h.admit_decode(0, 1000));
                // a load hands wave 1 over as soon as it is decoded: wave 0 waits for that (a
                // stream stuck there is stopped, so that the test fails instead of hanging)
                if waited {
                    if in_order {
                        h.set(usize::MAX);
                    } else {
                        h.release(1);
                    }
                }
                waited
            });
            assert_eq!(waited, !in_order, "in order: {in_order}");
            assert_eq!(h.in_use(), if in_order { 1100 } else { 550 });
        }
    }

    #[test]
    fn a_stopped_stream_wakes_every_waiter() {
        let h = Handed::default();
        assert!(h.admit_read(0, cost(900, 100), 1000));
        std::thread::scope(|s| {
            let r = s.spawn(|| h.admit_read(1, cost(900, 100), 1000));
            std::thread::sleep(Duration::from_millis(20));
            h.set(usize::MAX);
            assert!(!r.join().unwrap());
        });
        assert!(!h.admit_decode(0, 1000));
    }

    #[test]
    fn a_decoded_wave_holds_at_most_what_it_held() {
        let h = Handed::default();
        assert!(h.admit_read(0, cost(100, 200), 1000));
        assert!(h.admit_decode(0, 1000));
        h.decoded(0, 5000);
        assert_eq!(h.in_use(), 300);
        h.release(0);
        assert_eq!(h.in_use(), 0);
    }
}
