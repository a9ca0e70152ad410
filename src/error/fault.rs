//! Faults injected on purpose, to test that a load survives them (issue 18): a device
//! allocation that fails, a `cuFileRead` that returns a cuFile error code, a `pread` that fails
//! with `EIO` or finds the file ended. Each site counts its calls once armed; the `n`-th call
//! from arming fails, once. Armed by [`arm`] or by `CUPARQUET_FAULTS` (`site=n[,site=n…]`,
//! armed by [`crate::config::env::validate_diagnostics`] where the first load is built; a bad
//! value is an error there), e.g. `CUPARQUET_FAULTS=device-alloc=3`. Unarmed, a site
//! costs one relaxed atomic load.
//!
//! The error a fault raises is the one the real failure raises (for `pread`, its text marked
//! "(injected fault)"). The sites are process-wide: `tests/faults.rs` arms them in one test.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A device allocation (`cuMemAllocFromPoolAsync` / `cuMemAlloc`) fails.
    DeviceAlloc,
    /// A `cuFileRead` returns a cuFile error code.
    CufileRead,
    /// A host `pread` fails with `EIO`.
    Pread,
    /// A host `pread` returns 0 bytes: the file ended before the range did.
    ShortRead,
    /// A pinned host allocation (`cuMemHostAlloc`) fails.
    PinnedAlloc,
}

const SITES: [(Site, &str); 5] = [
    (Site::DeviceAlloc, "device-alloc"),
    (Site::CufileRead, "cufile-read"),
    (Site::Pread, "pread"),
    (Site::ShortRead, "short-read"),
    (Site::PinnedAlloc, "pinned-alloc"),
];

static ANY: AtomicBool = AtomicBool::new(false);
/// Calls left before each site fails; 0: disarmed.
static LEFT: [AtomicI64; 5] = [const { AtomicI64::new(0) }; 5];

impl Site {
    fn index(self) -> usize {
        SITES.iter().position(|(s, _)| *s == self).unwrap_or(0)
    }

    /// The name `CUPARQUET_FAULTS` uses.
    pub fn name(self) -> &'static str {
        SITES[self.index()].1
    }
}

/// Makes the `nth` call (1: the next) at `site` fail, once.
pub fn arm(site: Site, nth: u64) {
    LEFT[site.index()].store(nth.max(1) as i64, Ordering::SeqCst);
    ANY.store(true, Ordering::SeqCst);
}

/// Disarms every site.
pub fn disarm() {
    for l in &LEFT {
        l.store(0, Ordering::SeqCst);
    }
    ANY.store(false, Ordering::SeqCst);
}

/// Parses a `CUPARQUET_FAULTS` value: `site=n` parts separated by commas (`site` alone: n = 1),
/// or why it is not one.
pub(crate) fn parse(spec: &str) -> std::result::Result<Vec<(Site, u64)>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, n) = part.split_once('=').unwrap_or((part, "1"));
        match (
            SITES.iter().find(|(_, s)| *s == name.trim()),
            n.trim().parse::<u64>(),
        ) {
            (Some((site, _)), Ok(n)) => out.push((*site, n)),
            _ => {
                return Err(format!(
                    "{:?} is not site=n (sites: device-alloc, cufile-read, pread, short-read, pinned-alloc)",
                    part.trim()
                ))
            }
        }
    }
    Ok(out)
}

/// Whether this call at `site` is to fail.
pub(crate) fn hit(site: Site) -> bool {
    if !ANY.load(Ordering::Relaxed) {
        return false;
    }
    let left = &LEFT[site.index()];
    let mut cur = left.load(Ordering::SeqCst);
    while cur > 0 {
        match left.compare_exchange(cur, cur - 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return cur == 1,
            Err(now) => cur = now,
        }
    }
    false
}
