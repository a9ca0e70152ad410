//! Settings of the range reader.
//!
//! Each setting has a default, an environment variable that overrides the default, and a
//! builder method that overrides both. An invalid environment value is an error naming the
//! variable; it is never silently ignored.

use crate::error::{Error, Result};

/// Environment variable for [`IoSettings::nthreads`].
pub const ENV_NTHREADS: &str = "CUPARQUET_NTHREADS";
/// Environment variable for [`IoSettings::task_size`].
pub const ENV_TASK_SIZE: &str = "CUPARQUET_TASK_SIZE";
/// Environment variable for [`IoSettings::direct_io`].
pub const ENV_DIRECT_IO: &str = "CUPARQUET_DIRECT_IO";

/// Default size of the pieces a large request is split into: 4 MiB.
pub const DEFAULT_TASK_SIZE: u64 = 4 << 20;

/// How the I/O stage runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IoSettings {
    /// Reader threads. Default: the number of available cores.
    pub nthreads: usize,
    /// Requests larger than this are split into pieces of this size, read in parallel.
    pub task_size: u64,
    /// Open the file with `O_DIRECT` (bypass the page cache).
    pub direct_io: bool,
}

impl Default for IoSettings {
    fn default() -> Self {
        IoSettings {
            nthreads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            task_size: DEFAULT_TASK_SIZE,
            direct_io: false,
        }
    }
}

impl IoSettings {
    /// Defaults overridden by the `CUPARQUET_*` environment variables that are set.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
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
        s.validate()?;
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
        Ok(())
    }
}

/// Parses a thread count: a positive integer.
pub fn parse_count(name: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::setting(name, value, "expected a positive integer")),
    }
}

/// Parses `true|false|1|0|yes|no|on|off`.
pub fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::setting(name, value, "expected true or false")),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
