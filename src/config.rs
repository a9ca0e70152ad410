//! Settings: every environment variable cuparquet reads is read here ([`mod@env`]).
//!
//! Each setting has a default, an environment variable that overrides the default, and (where
//! it belongs to one load) a builder method that overrides both. An invalid environment value
//! is an error naming the variable; it is never silently ignored. Only the variables of other
//! programs that cuparquet looks through for libraries (`LD_LIBRARY_PATH`, `CUDA_HOME`,
//! Python's directories) and cuFile's own (`CUFILE_*`) are read where they are used.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Environment variable for [`IoSettings::nthreads`].
pub const ENV_NTHREADS: &str = "CUPARQUET_NTHREADS";
/// Environment variable for [`IoSettings::task_size`].
pub const ENV_TASK_SIZE: &str = "CUPARQUET_TASK_SIZE";
/// Environment variable for [`IoSettings::direct_io`].
pub const ENV_DIRECT_IO: &str = "CUPARQUET_DIRECT_IO";

/// Environment variable for [`IoSettings::compat_mode`].
pub const ENV_COMPAT_MODE: &str = "CUPARQUET_COMPAT_MODE";
/// Environment variable for [`IoSettings::gds_threshold`].
pub const ENV_GDS_THRESHOLD: &str = "CUPARQUET_GDS_THRESHOLD";
/// Environment variable for [`IoSettings::bounce_buffer_size`].
pub const ENV_BOUNCE_BUFFER_SIZE: &str = "CUPARQUET_BOUNCE_BUFFER_SIZE";
/// Environment variable for [`Tuning`]: `key=value` pairs separated by commas.
pub const ENV_TUNING: &str = "CUPARQUET_TUNING";
/// Environment variable for `ScanBuilder::with_max_page_size` (a size).
pub const ENV_MAX_PAGE_SIZE: &str = "CUPARQUET_MAX_PAGE_SIZE";
/// Environment variable for `ScanBuilder::with_memory_budget` (a size: `512MiB`, `2GiB`).
pub const ENV_MEMORY_BUDGET: &str = "CUPARQUET_MEMORY_BUDGET";
/// Environment variable for nvCOMP: `auto` (the default: search for it), `off`, or the path
/// of the library or of its directory ([`env::nvcomp`]).
pub const ENV_NVCOMP: &str = "CUPARQUET_NVCOMP";
/// Environment variable naming the on-disk kernel cache directory ([`env::kernel_cache_dir`]).
pub const ENV_KERNEL_CACHE: &str = "CUPARQUET_KERNEL_CACHE";
/// Environment variable asking for stage times of device loads ([`env::profile`]).
pub const ENV_PROFILE: &str = "CUPARQUET_PROFILE";
/// Environment variable arming injected faults, `site=n[,site=n…]` ([`env::faults`]).
pub const ENV_FAULTS: &str = "CUPARQUET_FAULTS";

/// The environment: one function per variable, each with the variable's parse rules; an
/// invalid value is an error naming the variable. Every read of the process's environment
/// made by cuparquet goes through here.
pub mod env {
    use super::*;

    /// The value of `name`, if set (a value that is not UTF-8 counts as unset).
    pub fn var(name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    /// `CUPARQUET_MAX_PAGE_SIZE`: the largest uncompressed page a load decodes, if set.
    pub fn max_page_size() -> Result<Option<u64>> {
        var(ENV_MAX_PAGE_SIZE)
            .map(|v| parse_size(ENV_MAX_PAGE_SIZE, &v))
            .transpose()
    }

    /// `CUPARQUET_MEMORY_BUDGET`: device loads' memory budget, if set.
    pub fn memory_budget() -> Result<Option<u64>> {
        var(ENV_MEMORY_BUDGET)
            .map(|v| parse_size(ENV_MEMORY_BUDGET, &v))
            .transpose()
    }

    /// `CUPARQUET_NVCOMP` as set (`None`: unset, i.e. `auto`). Its value is checked where
    /// nvCOMP is looked for (`device::nvcomp::find`): a path must name a library that loads.
    pub fn nvcomp() -> Option<String> {
        var(ENV_NVCOMP)
    }

    /// Whether `CUPARQUET_NVCOMP` switches nvCOMP off (`off`, `none` or `0`).
    pub fn nvcomp_off() -> bool {
        nvcomp().is_some_and(|v| {
            let v = v.trim();
            v.eq_ignore_ascii_case("off") || v == "0" || v.eq_ignore_ascii_case("none")
        })
    }

    /// The kernel cache directory: `CUPARQUET_KERNEL_CACHE` (any path; empty counts as unset),
    /// else `$XDG_CACHE_HOME/cuparquet/kernels`, else `$HOME/.cache/cuparquet/kernels`, else
    /// the temporary directory's `cuparquet-kernels`.
    pub fn kernel_cache_dir() -> PathBuf {
        let set = |k: &str| std::env::var_os(k).filter(|d| !d.is_empty());
        if let Some(d) = set(ENV_KERNEL_CACHE) {
            return PathBuf::from(d);
        }
        if let Some(d) = set("XDG_CACHE_HOME") {
            return PathBuf::from(d).join("cuparquet/kernels");
        }
        if let Some(h) = set("HOME") {
            return PathBuf::from(h).join(".cache/cuparquet/kernels");
        }
        std::env::temp_dir().join("cuparquet-kernels")
    }

    /// `CUPARQUET_PROFILE`: whether stage times are asked for. `1`, `true`, `on` (or `yes`)
    /// ask; `0`, `false`, `off` (or `no`), empty or unset do not; anything else is an error.
    pub fn profile() -> Result<bool> {
        profile_of(var(ENV_PROFILE).as_deref())
    }

    /// [`profile`] of the value `v`.
    pub(crate) fn profile_of(v: Option<&str>) -> Result<bool> {
        match v {
            None => Ok(false),
            Some(v) if v.trim().is_empty() => Ok(false),
            Some(v) => parse_bool(ENV_PROFILE, v),
        }
    }

    /// `CUPARQUET_FAULTS`: the faults to inject, `(site, n)` each (empty when unset). A part
    /// that names no site or has no count is an error naming the variable.
    pub fn faults() -> Result<Vec<(crate::error::fault::Site, u64)>> {
        faults_of(var(ENV_FAULTS).as_deref())
    }

    /// [`faults`] of the value `v`.
    pub(crate) fn faults_of(v: Option<&str>) -> Result<Vec<(crate::error::fault::Site, u64)>> {
        match v {
            None => Ok(Vec::new()),
            Some(v) => crate::error::fault::parse(v).map_err(|why| Error::setting(ENV_FAULTS, v, why)),
        }
    }

    /// Checks the variables read outside of [`IoSettings`] and [`Tuning`] that have no other
    /// place to fail (`CUPARQUET_PROFILE`, `CUPARQUET_FAULTS`): called where a load is built,
    /// so that a bad value is an error there rather than ignored later.
    /// The first call also arms the sites `CUPARQUET_FAULTS` names
    /// ([`crate::error::fault::arm`]), once per process.
    pub fn validate_diagnostics() -> Result<()> {
        diagnostics_of(var)?;
        static ARMED: std::sync::Once = std::sync::Once::new();
        let faults = faults()?;
        ARMED.call_once(|| {
            for (site, n) in faults {
                crate::error::fault::arm(site, n);
            }
        });
        Ok(())
    }

    /// [`validate_diagnostics`], reading variables through `get` (for tests).
    pub(crate) fn diagnostics_of(get: impl Fn(&str) -> Option<String>) -> Result<()> {
        profile_of(get(ENV_PROFILE).as_deref())?;
        faults_of(get(ENV_FAULTS).as_deref())?;
        Ok(())
    }
}

/// Default size of the pieces a large request is split into: 4 MiB.
pub const DEFAULT_TASK_SIZE: u64 = 4 << 20;
/// Default smallest range sent to cuFile: 16 KiB, like KvikIO.
pub const DEFAULT_GDS_THRESHOLD: u64 = 16 << 10;
/// Default size of one pinned bounce buffer: 4 MiB. On the H200 machine (benches/RESULTS.md) a
/// bare whole-file read was 4 % faster with 8 MiB, but a device load that decodes while it
/// reads was 25 % faster with 4 MiB (the uncompressed lineitem file: 42.4 against 34.1 GB/s,
/// median), and 2 MiB or 3 MiB were no better.
pub const DEFAULT_BOUNCE_BUFFER_SIZE: u64 = 4 << 20;
/// Default pinned bounce buffers per reader thread: 2 (one filling while the other's copy runs).
pub const DEFAULT_BOUNCE_BUFFER_COUNT: usize = 2;

/// When cuFile may be used (see DESIGN.md, "Path choice, per range").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompatMode {
    /// cuFile only where its GDS path can exist (nvidia-fs loaded, file registered); staged
    /// otherwise, with the reason recorded.
    #[default]
    Auto,
    /// Never cuFile: staged (or host, for host targets).
    On,
    /// cuFile for every range at or above the threshold, whatever cuFile does inside; a
    /// failure to use cuFile is an error, not a fallback.
    Off,
}

impl std::fmt::Display for CompatMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompatMode::Auto => "auto",
            CompatMode::On => "on",
            CompatMode::Off => "off",
        })
    }
}

impl std::str::FromStr for CompatMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CompatMode::Auto),
            "on" | "true" | "1" => Ok(CompatMode::On),
            "off" | "false" | "0" => Ok(CompatMode::Off),
            _ => Err(Error::setting(
                ENV_COMPAT_MODE,
                s,
                "expected auto, on or off",
            )),
        }
    }
}

/// What a user may tune for their machine, set from one variable, [`ENV_TUNING`]
/// (`CUPARQUET_TUNING`), as comma-separated `key=value` pairs named like the fields, e.g.
/// `CUPARQUET_TUNING=wave_bytes=0,host_share=40`; or with `ScanBuilder::with_tuning`. Each
/// default is the measured best on the H200 machine (benches/RESULTS.md). An unknown key or a
/// bad value is an error naming the variable; a key that was removed ([`RETIRED_KEYS`]: its
/// alternatives measured no faster, so its default is now fixed) is an error saying so.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Tuning {
    /// `bounce_buffer_count`: pinned bounce buffers per reader thread (default 2: one filling
    /// while the other's copy runs).
    pub bounce_buffer_count: usize,
    /// `wave_bytes`: device loads read and decode in waves of whole row groups of about this
    /// many bytes, the next wave read while the last decodes; `0`: one wave. Default (`None`):
    /// for loads of 128 MiB to 4 GiB one wave when mostly in chunks the host decompresses, two
    /// waves when mostly in SNAPPY chunks, waves of 250 MiB otherwise; one wave below 128 MiB;
    /// waves of 1 GiB above 4 GiB.
    pub wave_bytes: Option<u64>,
    /// `host_share`: the percent (0 to 100) of the bytes of pages nvCOMP decompresses (ZSTD,
    /// LZ4_RAW) that the host's cores take beside it, largest pages first. Default
    /// (`None`): the share measured best, scaled by the host's cores.
    pub host_share: Option<u32>,
}

/// The keys [`Tuning`] had whose alternatives measured no faster than their default (figures in
/// benches/RESULTS.md, "Measured and dropped"), each with the behaviour now fixed: a process
/// that still sets one gets an error saying so, rather than a setting silently ignored.
pub const RETIRED_KEYS: &[(&str, &str)] = &[
    (
        "cuda_wait",
        "threads wait for the device by spinning and yielding (yield)",
    ),
    (
        "snappy",
        "SNAPPY pages go to the device kernel or the host's cores by the measured model (auto)",
    ),
    (
        "decode_threads",
        "2 threads decode the waves of a device load",
    ),
    (
        "device_pool",
        "device memory comes from cuparquet's stream-ordered pool",
    ),
    (
        "device_pool_retain",
        "the pool keeps a quarter of the device's memory for reuse",
    ),
];

/// The variables [`Tuning`] replaced, with the key that took each one's place (empty: the
/// setting was removed, or its key was, [`RETIRED_KEYS`]): a process that still sets one gets
/// an error saying so, rather than a setting silently ignored.
const RETIRED: &[(&str, &str)] = &[
    ("CUPARQUET_BOUNCE_BUFFER_COUNT", "bounce_buffer_count"),
    ("CUPARQUET_DEVICE_WAVE_BYTES", "wave_bytes"),
    ("CUPARQUET_DECODE_THREADS", ""),
    ("CUPARQUET_SNAPPY", ""),
    ("CUPARQUET_CUDA_WAIT", ""),
    ("CUPARQUET_DEVICE_POOL", ""),
    ("CUPARQUET_DEVICE_POOL_RETAIN", ""),
    ("CUPARQUET_STAGING", ""),
];

/// Why a removed setting is refused.
const REMOVED: &str =
    "this setting was removed: its alternatives measured no faster than its default \
     (see benches/RESULTS.md, \"Measured and dropped\")";

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            bounce_buffer_count: DEFAULT_BOUNCE_BUFFER_COUNT,
            wave_bytes: None,
            host_share: None,
        }
    }
}

impl Tuning {
    /// The defaults, overridden by `CUPARQUET_TUNING`.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(env::var)
    }

    /// Like [`Tuning::from_env`], reading variables through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        for (old, key) in RETIRED {
            if let Some(v) = get(old) {
                let why = if key.is_empty() {
                    REMOVED.to_string()
                } else {
                    format!("this setting moved: use {ENV_TUNING}={key}=…")
                };
                return Err(Error::setting(*old, v, why));
            }
        }
        match get(ENV_TUNING) {
            Some(v) => Tuning::default().with_pairs(&v),
            None => Ok(Tuning::default()),
        }
    }

    /// `self` with the comma-separated `key=value` pairs of `spec` applied (errors name
    /// `CUPARQUET_TUNING`).
    pub fn with_pairs(self, spec: &str) -> Result<Self> {
        self.with_pairs_from(ENV_TUNING, spec)
    }

    /// [`with_pairs`](Self::with_pairs), naming `source` (e.g. a command-line flag) in errors.
    pub fn with_pairs_from(mut self, source: &str, spec: &str) -> Result<Self> {
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = |why: String| Error::setting(source, spec, why);
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            let (key, value) = (key.trim(), value.trim());
            let name = format!("{source} {key}");
            match key {
                "bounce_buffer_count" => self.bounce_buffer_count = parse_count(&name, value)?,
                "wave_bytes" => self.wave_bytes = Some(parse_size(&name, value)?),
                "host_share" => {
                    self.host_share = Some(
                        value
                            .parse::<u32>()
                            .ok()
                            .filter(|&v| v <= 100)
                            .ok_or_else(|| {
                                Error::setting(&name, value, "expected a percent, 0 to 100")
                            })?,
                    )
                }
                _ => {
                    if let Some((_, fixed)) = RETIRED_KEYS.iter().find(|(k, _)| *k == key) {
                        return Err(Error::setting(
                            &name,
                            value,
                            format!("{REMOVED}; now {fixed}"),
                        ));
                    }
                    return Err(bad(format!(
                        "unknown key {key:?} (known: bounce_buffer_count, wave_bytes, host_share)"
                    )));
                }
            }
        }
        // a value out of range names where it came from
        self.validate().map_err(|e| match e {
            Error::Setting {
                name,
                value,
                reason,
            } => Error::Setting {
                name: format!("{source} {name}"),
                value,
                reason,
            },
            e => e,
        })?;
        Ok(self)
    }

    /// Checks the values are usable.
    pub fn validate(&self) -> Result<()> {
        check_bounce_buffer_count(self.bounce_buffer_count)
    }
}

/// How the I/O stage runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IoSettings {
    /// Reader threads. Default: the number of available cores.
    pub nthreads: usize,
    /// Requests larger than this are split into pieces of this size, read in parallel.
    pub task_size: u64,
    /// Open the file with `O_DIRECT` (bypass the page cache).
    pub direct_io: bool,
    /// When cuFile may be used.
    pub compat_mode: CompatMode,
    /// Ranges smaller than this never go to cuFile; they are gathered into staged copies.
    pub gds_threshold: u64,
    /// Size of one pinned bounce buffer of the staging ring.
    pub bounce_buffer_size: u64,
    /// Pinned bounce buffers per reader thread (the ring holds `count × nthreads`); set from
    /// [`Tuning::bounce_buffer_count`].
    pub bounce_buffer_count: usize,
}

/// GETs in flight per remote read, by default: remote reads are bound by latency, not
/// bandwidth, so many waits overlap (cuDF measured 256 concurrent requests 12× faster than 8
/// on S3, rapidsai/cudf#23633).
pub const DEFAULT_REMOTE_CONCURRENCY: usize = 64;

/// The most bytes one GET of a remote read asks for, by default: a request's latency is paid
/// over many bytes, and a large request's pieces still download in parallel.
pub const DEFAULT_REMOTE_PIECE_SIZE: u64 = 8 << 20;

/// How objects named by URLs are read (feature `object-store`).
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// GETs in flight at once per read.
    pub concurrency: usize,
    /// The most bytes one GET asks for.
    pub piece_size: u64,
    /// Configuration of the stores, as `(key, value)`: the `object_store` builders' keys
    /// (`aws_endpoint`, `aws_region`, `aws_allow_http`, `google_service_account`,
    /// `azure_storage_account_name`, `timeout`, …), over what the environment sets (`AWS_*`,
    /// `GOOGLE_*`, `AZURE_*`).
    pub options: std::collections::BTreeMap<String, String>,
    /// The store to read every URL of the scan from, as the caller built it (an engine's
    /// registered store): the object is the URL's path in it. `None`: the store is made from
    /// the URL, the environment and [`options`](Self::options).
    #[cfg(feature = "object-store")]
    pub store: Option<std::sync::Arc<dyn object_store::ObjectStore>>,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            concurrency: DEFAULT_REMOTE_CONCURRENCY,
            piece_size: DEFAULT_REMOTE_PIECE_SIZE,
            options: Default::default(),
            #[cfg(feature = "object-store")]
            store: None,
        }
    }
}

impl Default for IoSettings {
    fn default() -> Self {
        IoSettings {
            nthreads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            task_size: DEFAULT_TASK_SIZE,
            direct_io: false,
            compat_mode: CompatMode::Auto,
            gds_threshold: DEFAULT_GDS_THRESHOLD,
            bounce_buffer_size: DEFAULT_BOUNCE_BUFFER_SIZE,
            bounce_buffer_count: DEFAULT_BOUNCE_BUFFER_COUNT,
        }
    }
}

impl IoSettings {
    /// Defaults overridden by the `CUPARQUET_*` environment variables that are set.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(env::var)
    }

    /// Like [`IoSettings::from_env`], reading variables through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut s = IoSettings::default();
        if let Some(v) = get(ENV_NTHREADS) {
            s.nthreads = parse_count(ENV_NTHREADS, &v)?;
        }
        if let Some(v) = get(ENV_TASK_SIZE) {
            s.task_size = parse_size(ENV_TASK_SIZE, &v)?;
        }
        if let Some(v) = get(ENV_DIRECT_IO) {
            s.direct_io = parse_bool(ENV_DIRECT_IO, &v)?;
        }
        if let Some(v) = get(ENV_COMPAT_MODE) {
            s.compat_mode = v.parse()?;
        }
        if let Some(v) = get(ENV_GDS_THRESHOLD) {
            s.gds_threshold = parse_size(ENV_GDS_THRESHOLD, &v)?;
        }
        if let Some(v) = get(ENV_BOUNCE_BUFFER_SIZE) {
            s.bounce_buffer_size = parse_size(ENV_BOUNCE_BUFFER_SIZE, &v)?;
        }
        s.bounce_buffer_count = Tuning::from_lookup(&get)?.bounce_buffer_count;
        // a value out of range names the variable it came from
        s.validate().map_err(|e| match e {
            Error::Setting {
                name,
                value,
                reason,
            } => {
                let var = match name.as_str() {
                    "nthreads" => Some(ENV_NTHREADS),
                    "task_size" => Some(ENV_TASK_SIZE),
                    "bounce_buffer_size" => Some(ENV_BOUNCE_BUFFER_SIZE),
                    _ => None,
                };
                let name = match var {
                    Some(v) if get(v).is_some() => format!("{v} ({name})"),
                    _ => name,
                };
                Error::Setting {
                    name,
                    value,
                    reason,
                }
            }
            e => e,
        })?;
        Ok(s)
    }

    /// Checks the values are usable.
    pub fn validate(&self) -> Result<()> {
        if self.nthreads == 0 || self.nthreads > 1024 {
            return Err(Error::setting(
                "nthreads",
                self.nthreads.to_string(),
                "must be between 1 and 1024",
            ));
        }
        if self.task_size < 4096 {
            return Err(Error::setting(
                "task_size",
                self.task_size.to_string(),
                "must be at least 4KiB",
            ));
        }
        if self.bounce_buffer_size < 4096 || self.bounce_buffer_size > 1 << 30 {
            return Err(Error::setting(
                "bounce_buffer_size",
                self.bounce_buffer_size.to_string(),
                "must be between 4KiB and 1GiB",
            ));
        }
        check_bounce_buffer_count(self.bounce_buffer_count)?;
        Ok(())
    }
}

/// Pinned bounce buffers per reader thread must be 1 to 16 ([`Tuning`] and [`IoSettings`]
/// both hold the count).
fn check_bounce_buffer_count(n: usize) -> Result<()> {
    if n == 0 || n > 16 {
        return Err(Error::setting(
            "bounce_buffer_count",
            n.to_string(),
            "must be between 1 and 16 (buffers per reader thread)",
        ));
    }
    Ok(())
}

/// Parses a thread count: a positive integer.
pub(crate) fn parse_count(name: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::setting(name, value, "expected a positive integer")),
    }
}

/// Parses `true|false|1|0|yes|no|on|off`.
pub(crate) fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::setting(name, value, "expected true or false")),
    }
}

/// The largest uncompressed page cuparquet decodes: 1 GiB. Writers cut pages at about 1 MiB
/// (arrow-rs, pyarrow, DuckDB, Polars, Spark), so only a corrupt or hostile header claims more;
/// such a page is an error naming it, before anything is allocated for it.
pub const MAX_PAGE_BYTES: u64 = 1 << 30;

/// Parses a size in bytes, with an optional suffix: `B`, `KiB`/`K`/`KB`, `MiB`/`M`/`MB`,
/// `GiB`/`G`/`GB` (all powers of 1024; case-insensitive).
pub fn parse_size(name: &str, value: &str) -> Result<u64> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let bad = || {
        Error::setting(
            name,
            value,
            "expected a size in bytes, optionally with a suffix such as 16KiB, 4MiB or 1GiB",
        )
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// Formats a byte count for people: `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Checks a device list: at least one device, each named once.
pub fn check_devices(ordinals: &[usize]) -> Result<()> {
    if ordinals.is_empty() {
        return Err(Error::setting("devices", "", "name at least one CUDA device"));
    }
    for (i, o) in ordinals.iter().enumerate() {
        if ordinals[..i].contains(o) {
            let list: Vec<String> = ordinals.iter().map(|o| format!("cuda:{o}")).collect();
            return Err(Error::setting(
                "devices",
                list.join(","),
                format!("cuda:{o} is named twice"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_from_one_variable() {
        let get = |v: &'static str| move |k: &str| (k == ENV_TUNING).then(|| v.to_string());
        assert_eq!(Tuning::from_lookup(|_| None).unwrap(), Tuning::default());
        let t = Tuning::from_lookup(get(
            " wave_bytes=250MiB, bounce_buffer_count=4,host_share=35,",
        ))
        .unwrap();
        assert_eq!(
            t,
            Tuning {
                bounce_buffer_count: 4,
                wave_bytes: Some(250 << 20),
                host_share: Some(35),
            }
        );
        for (spec, want) in [
            ("wave_bytes", "is not key=value"),
            ("fast=1", "unknown key \"fast\""),
            ("wave_bytes=lots", "CUPARQUET_TUNING wave_bytes"),
            ("host_share=101", "a percent, 0 to 100"),
            ("host_share=half", "a percent, 0 to 100"),
            ("bounce_buffer_count=17", "between 1 and 16"),
        ] {
            let e = Tuning::from_lookup(get(spec)).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
        // a key that was removed is an error saying so and why, never ignored
        for (spec, fixed) in [
            ("snappy=host", "(auto)"),
            ("cuda_wait=block", "(yield)"),
            ("decode_threads=3", "2 threads"),
            ("device_pool=false", "pool"),
            ("wave_bytes=0,device_pool_retain=1GiB", "a quarter"),
        ] {
            let e = Tuning::from_lookup(get(spec)).unwrap_err().to_string();
            let key = spec.rsplit(',').next().unwrap().split('=').next().unwrap();
            assert!(
                e.contains(&format!("CUPARQUET_TUNING {key}"))
                    && e.contains("was removed")
                    && e.contains("measured no faster")
                    && e.contains("benches/RESULTS.md")
                    && e.contains(fixed),
                "{spec}: {e}"
            );
        }
        let e = Tuning::default()
            .with_pairs_from("--tuning", "snappy=device")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--tuning snappy") && e.contains("removed"), "{e}");
        // a variable Tuning replaced is an error that says where it went, never ignored
        let e = Tuning::from_lookup(|k| {
            (k == "CUPARQUET_DEVICE_WAVE_BYTES").then(|| "1GiB".into())
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("CUPARQUET_DEVICE_WAVE_BYTES") && e.contains("CUPARQUET_TUNING=wave_bytes="),
            "{e}"
        );
        // and one whose key was removed, or that was removed itself, says so
        for var in ["CUPARQUET_SNAPPY", "CUPARQUET_CUDA_WAIT", "CUPARQUET_STAGING"] {
            let e = IoSettings::from_lookup(|k| (k == var).then(|| "x".into()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(var) && e.contains("removed"), "{e}");
        }
    }

    #[test]
    fn diagnostics_are_validated() {
        use crate::error::fault::Site;
        assert!(!env::profile_of(None).unwrap());
        assert!(!env::profile_of(Some("")).unwrap());
        for on in ["1", "true", "ON", " yes "] {
            assert!(env::profile_of(Some(on)).unwrap(), "{on}");
        }
        for off in ["0", "false", "off", "no"] {
            assert!(!env::profile_of(Some(off)).unwrap(), "{off}");
        }
        let e = env::profile_of(Some("2")).unwrap_err().to_string();
        assert!(e.contains(ENV_PROFILE) && e.contains("true or false"), "{e}");

        assert_eq!(env::faults_of(None).unwrap(), vec![]);
        assert_eq!(
            env::faults_of(Some("device-alloc=3, pread ,")).unwrap(),
            vec![(Site::DeviceAlloc, 3), (Site::Pread, 1)]
        );
        for bad in ["device-alloc=x", "disk-on-fire=1", "pread=-1"] {
            let e = env::faults_of(Some(bad)).unwrap_err().to_string();
            assert!(e.contains(ENV_FAULTS) && e.contains("not site=n"), "{bad}: {e}");
        }
        // where a load is built, both are checked
        assert!(env::diagnostics_of(|_| None).is_ok());
        let e = env::diagnostics_of(|k| (k == ENV_FAULTS).then(|| "pread=1,oops".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CUPARQUET_FAULTS") && e.contains("\"oops\""), "{e}");
        let e = env::diagnostics_of(|k| (k == ENV_PROFILE).then(|| "verbose".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CUPARQUET_PROFILE"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("x", "4096").unwrap(), 4096);
        assert_eq!(parse_size("x", "16KiB").unwrap(), 16 << 10);
        assert_eq!(parse_size("x", "4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("x", "1gib").unwrap(), 1 << 30);
        assert_eq!(parse_size("x", " 2 M ").unwrap(), 2 << 20);
        let e = parse_size("CUPARQUET_TASK_SIZE", "4 parsecs").unwrap_err();
        assert!(e.to_string().contains("CUPARQUET_TASK_SIZE"), "{e}");
        assert!(parse_size("x", "").is_err());
        assert!(parse_size("x", "99999999999999GiB").is_err());
        // a value that parses but is out of range names the variable it came from
        let e = IoSettings::from_lookup(|k| (k == ENV_TASK_SIZE).then(|| "1".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CUPARQUET_TASK_SIZE (task_size)"), "{e}");
        let e = IoSettings::from_lookup(|k| (k == ENV_NTHREADS).then(|| "5000".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CUPARQUET_NTHREADS"), "{e}");
        let e = Tuning::from_lookup(|k| (k == ENV_TUNING).then(|| "bounce_buffer_count=99".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CUPARQUET_TUNING bounce_buffer_count"), "{e}");
    }

    #[test]
    fn env_overrides_and_errors() {
        let s = IoSettings::from_lookup(|k| match k {
            ENV_NTHREADS => Some("3".into()),
            ENV_TASK_SIZE => Some("1MiB".into()),
            ENV_DIRECT_IO => Some("true".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(s.nthreads, 3);
        assert_eq!(s.task_size, 1 << 20);
        assert!(s.direct_io);

        let e = IoSettings::from_lookup(|k| (k == ENV_NTHREADS).then(|| "zero".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(ENV_NTHREADS) && e.contains("positive integer"),
            "{e}"
        );
        let e = IoSettings::from_lookup(|k| (k == ENV_DIRECT_IO).then(|| "maybe".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(ENV_DIRECT_IO), "{e}");
        let e = IoSettings::from_lookup(|k| (k == ENV_TASK_SIZE).then(|| "10".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 4KiB"), "{e}");
        let e = IoSettings::from_lookup(|k| (k == ENV_COMPAT_MODE).then(|| "maybe".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(ENV_COMPAT_MODE) && e.contains("auto, on or off"),
            "{e}"
        );
        let e =
            IoSettings::from_lookup(|k| (k == ENV_TUNING).then(|| "bounce_buffer_count=0".into()))
                .unwrap_err()
                .to_string();
        assert!(
            e.contains(ENV_TUNING) && e.contains("bounce_buffer_count"),
            "{e}"
        );
    }

    #[test]
    fn gpu_path_settings() {
        let d = IoSettings::default();
        assert_eq!(d.compat_mode, CompatMode::Auto);
        assert_eq!(d.gds_threshold, 16 << 10);
        let s = IoSettings::from_lookup(|k| match k {
            ENV_COMPAT_MODE => Some("OFF".into()),
            ENV_GDS_THRESHOLD => Some("64KiB".into()),
            ENV_BOUNCE_BUFFER_SIZE => Some("8MiB".into()),
            ENV_TUNING => Some("bounce_buffer_count=3".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(s.compat_mode, CompatMode::Off);
        assert_eq!(s.gds_threshold, 64 << 10);
        assert_eq!(s.bounce_buffer_size, 8 << 20);
        assert_eq!(s.bounce_buffer_count, 3);
    }
}
