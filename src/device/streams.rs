//! Which stream a thread's device work goes to: the decode streams of the device (in sets,
//! one per load decoding at once, [`Gpu::decode_set`]; a slot and its companion per decoding
//! thread, [`with_decode_slot`], [`companion_stream`]), or the thread's own default stream
//! ([`with_own_stream`]). Kernel launches, waits and the frees of device buffers follow the
//! calling thread's choice ([`Gpu::decode_stream`]).

use std::sync::Arc;

use super::gpu::{new_streams, Gpu, Stream, PER_THREAD_STREAM};
use crate::error::Result;

/// Threads decoding the waves of a pipelined device load, each on a decode stream of its own.
/// One, three and four measured slower than two (benches/RESULTS.md, `decode_threads`).
pub(crate) const DECODE_THREADS: usize = 2;

/// Decode streams per device: one per decoding thread, so that their kernels run at once.
pub(crate) const DECODE_STREAMS: usize = DECODE_THREADS;

/// Sets of decode streams a device keeps ([`Gpu::decode_set`]): set 0, shared, for decoding
/// outside a load's own set (and for loads when every other set is taken); the others each
/// one load's while it runs, so that loads decoding at once — an engine's partitions sharing
/// the device — neither queue their kernels behind each other's nor wait for them.
pub(super) const DECODE_SETS: usize = 33;

/// Streams of a decode set: one per decode slot, and its companion ([`companion_stream`]).
pub(super) const SET_STREAMS: usize = 2 * DECODE_STREAMS;

thread_local! {
    /// The calling thread's decode stream: (its set, its index in the set), or
    /// ([`OWN_STREAM_SET`], 0) for its own default stream.
    static DECODE_AT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Runs `f` with the calling thread's decoding kernels on decode stream `slot` (modulo
/// [`DECODE_STREAMS`]) of decode set `set` ([`Gpu::decode_set`]); the thread's previous stream
/// is restored after.
pub(crate) fn with_decode_slot<R>(set: usize, slot: usize, f: impl FnOnce() -> R) -> R {
    with_stream_at((set, slot % DECODE_STREAMS), f)
}

/// A stream chosen on one thread for work on another ([`with_stream`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamChoice((usize, usize));

/// The companion stream of the calling thread's decode slot (in its set), for a helper thread
/// ([`with_stream`]): a second stream per slot, so that a decoding thread can hand part of its
/// pass (the byte-array columns) to a helper whose kernels run beside its own.
pub(crate) fn companion_stream() -> StreamChoice {
    match DECODE_AT.with(|s| s.get()) {
        (OWN_STREAM_SET, _) => StreamChoice((OWN_STREAM_SET, 0)),
        (set, slot) => StreamChoice((set, DECODE_STREAMS + slot % DECODE_STREAMS)),
    }
}

/// Runs `f` with the calling thread's kernels on the stream `choice` names.
pub(crate) fn with_stream<R>(choice: StreamChoice, f: impl FnOnce() -> R) -> R {
    with_stream_at(choice.0, f)
}

/// [`DECODE_AT`]'s set for the calling thread's own default stream ([`with_own_stream`]).
const OWN_STREAM_SET: usize = usize::MAX;

/// The calling thread's default stream, as a [`Stream`].
static OWN_STREAM: Stream = Stream {
    raw: PER_THREAD_STREAM,
};

/// Runs `f` with the calling thread's kernels (and the frees ordered after them) on its own
/// default stream ([`PER_THREAD_STREAM`]) instead of a decode stream: device work done for a
/// consumer of batches — joining a row filter's batches in order, an aggregation — whose
/// waits then wait for its own kernels only, not for the waves or the partitions decoding on
/// the decode streams meanwhile. (The batches it reads were waited for before they were
/// handed over.)
pub(crate) fn with_own_stream<R>(f: impl FnOnce() -> R) -> R {
    with_stream_at((OWN_STREAM_SET, 0), f)
}

fn with_stream_at<R>(at: (usize, usize), f: impl FnOnce() -> R) -> R {
    /// Puts the thread's previous choice back, also when `f` panics (a thread that catches
    /// the panic must not go on with a set another load may hold by then).
    struct Restore((usize, usize));
    impl Drop for Restore {
        fn drop(&mut self) {
            DECODE_AT.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(DECODE_AT.with(|s| s.replace(at)));
    f()
}

/// A decode set of a device held by one load ([`Gpu::decode_set`]): given back when dropped.
pub(crate) struct DecodeSet {
    gpu: Arc<Gpu>,
    index: usize,
}

impl DecodeSet {
    /// The set, for [`with_decode_slot`] and [`Gpu::synchronize_decode_set`].
    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

impl Drop for DecodeSet {
    fn drop(&mut self) {
        if self.index != 0 {
            let mut free = self.gpu.free_sets.lock().unwrap_or_else(|p| p.into_inner());
            free.push(self.index);
        }
    }
}

impl Gpu {
    /// The stream the calling thread's decoding kernels run on (its [`with_decode_slot`], or
    /// a slot's companion inside [`with_stream`], or its own inside [`with_own_stream`]).
    pub(crate) fn decode_stream(&self) -> &Stream {
        match DECODE_AT.with(|s| s.get()) {
            (OWN_STREAM_SET, _) => &OWN_STREAM,
            (set, i) => {
                let streams = self.set_streams(set);
                &streams[i % streams.len()]
            }
        }
    }

    /// The streams of decode set `set` (set 0's where that set has none).
    fn set_streams(&self, set: usize) -> &[Stream] {
        let shared = || self.decode[0].get().map_or(&[][..], |v| &v[..]);
        match self.decode.get(set).and_then(|s| s.get()) {
            Some(v) => v,
            None => shared(),
        }
    }

    /// A decode set of the calling load's own while the guard lives ([`DecodeSet`]), its
    /// streams created when first taken; set 0 (shared) where every other set is taken or
    /// its streams cannot be created.
    pub(crate) fn decode_set(self: &Arc<Self>) -> DecodeSet {
        let shared = DecodeSet {
            gpu: Arc::clone(self),
            index: 0,
        };
        let taken = self.free_sets.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some(k) = taken else { return shared };
        let set = DecodeSet {
            gpu: Arc::clone(self),
            index: k,
        };
        if self.decode[k].get().is_none() {
            // (k is this load's alone: no other thread creates its streams)
            match self.bind().and_then(|()| new_streams(self.ordinal(), SET_STREAMS)) {
                Ok(v) => {
                    let _ = self.decode[k].set(v);
                }
                // the guard gives k back
                Err(_) => return shared,
            }
        }
        set
    }

    /// Waits for the work of the calling thread's decode stream (kernels, and the frees
    /// ordered after them).
    pub(crate) fn synchronize_decode(&self) -> Result<()> {
        self.wait_for([self.decode_stream()])
    }

    /// Waits for the work of every decode stream, of every set.
    pub(crate) fn synchronize_all_decode(&self) -> Result<()> {
        self.wait_for(self.decode.iter().filter_map(|s| s.get()).flatten())
    }

    /// Waits for the work of every stream of decode set `set`.
    pub(crate) fn synchronize_decode_set(&self, set: usize) -> Result<()> {
        self.wait_for(self.set_streams(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> (usize, usize) {
        DECODE_AT.with(|s| s.get())
    }

    /// A thread's stream is its set's slot, its slot's companion handed to a helper thread, or
    /// its own; each choice is undone when its closure returns.
    #[test]
    fn a_thread_chooses_its_stream_and_gets_it_back() {
        assert_eq!(at(), (0, 0));
        with_decode_slot(3, 1, || {
            assert_eq!(at(), (3, 1));
            let companion = companion_stream();
            assert_eq!(companion.0, (3, DECODE_STREAMS + 1));
            // a helper thread starts with none of its own, and takes the companion
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert_eq!(at(), (0, 0));
                    with_stream(companion, || assert_eq!(at(), (3, DECODE_STREAMS + 1)));
                    assert_eq!(at(), (0, 0));
                });
            });
            with_own_stream(|| {
                assert_eq!(at().0, OWN_STREAM_SET);
                assert_eq!(companion_stream().0, (OWN_STREAM_SET, 0));
            });
            assert_eq!(at(), (3, 1));
        });
        assert_eq!(at(), (0, 0));
        with_decode_slot(2, DECODE_STREAMS + 1, || assert_eq!(at(), (2, 1)));
        // a panic caught on the thread leaves no choice behind
        let caught = std::panic::catch_unwind(|| with_decode_slot(4, 0, || panic!("decoding")));
        assert!(caught.is_err());
        assert_eq!(at(), (0, 0));
    }
}
