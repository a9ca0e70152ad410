//! The per-range path policy: a pure function of (settings, machine facts, range).
//!
//! Every coalesced range is dispatched on its own (DESIGN.md, "Path choice, per range"):
//!
//! 1. a host target → `host`;
//! 2. `compat_mode = on` → never cuFile: `staged`;
//! 3. a range smaller than `gds_threshold` → `staged` (small ranges are gathered into one
//!    bounce buffer and moved with one copy, see `io::staging`);
//! 4. `compat_mode = auto` → cuFile only where its GDS path can exist: libcufile loads,
//!    `cuFileDriverOpen` succeeded, nvidia-fs is loaded and the file's handle registered.
//!    Where nvidia-fs is absent cuFile could only serve its POSIX compat path, which opens the
//!    file `O_DIRECT` and skips the page cache (1.9 GB/s against 45.6 GB/s staged on the H200
//!    machine), so auto stages instead — and does not even load cuFile or open its driver
//!    (`io::cufile::machine_facts_for`). Every fallback carries its reason;
//! 5. `compat_mode = off` → cuFile, whatever cuFile then does inside; a missing library, a
//!    failed driver open or a failed registration is an error instead of a fallback.
//!
//! Machine facts are a value, so tests inject them (e.g. "nvidia-fs loaded" on a machine
//! without it, to exercise the registration-failure fallback).

use std::ops::Range;
use std::path::Path;

use crate::config::{CompatMode, IoSettings};
use crate::error::{Error, Result};

/// One observed fact about the machine: whether it holds, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fact {
    /// Whether the fact holds.
    pub ok: bool,
    /// What was seen (a path, a version, an error code), for reports and `doctor`.
    pub detail: String,
}

impl Fact {
    /// A fact that holds.
    pub fn yes(detail: impl Into<String>) -> Self {
        Fact {
            ok: true,
            detail: detail.into(),
        }
    }

    /// A fact that does not hold.
    pub fn no(detail: impl Into<String>) -> Self {
        Fact {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// What the machine offers for cuFile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MachineFacts {
    /// libcufile could be loaded.
    pub libcufile: Fact,
    /// `cuFileDriverOpen` succeeded.
    pub driver_open: Fact,
    /// The nvidia-fs kernel module is loaded (the GDS path can exist).
    pub nvidia_fs: Fact,
    /// `cuFileHandleRegister` on this file; `None` while not yet tried.
    pub registration: Option<Fact>,
}

impl MachineFacts {
    /// A machine without cuFile at all (no library).
    pub fn without_cufile(detail: impl Into<String>) -> Self {
        let d = detail.into();
        MachineFacts {
            libcufile: Fact::no(d.clone()),
            driver_open: Fact::no(format!("not tried: {d}")),
            nvidia_fs: nvidia_fs_fact(),
            registration: None,
        }
    }
}

/// Whether the nvidia-fs module is loaded: `/proc/driver/nvidia-fs` exists.
pub fn nvidia_fs_fact() -> Fact {
    let p = Path::new("/proc/driver/nvidia-fs");
    if p.exists() {
        Fact::yes("nvidia-fs loaded (/proc/driver/nvidia-fs)")
    } else {
        Fact::no("nvidia-fs not loaded (no /proc/driver/nvidia-fs)")
    }
}

/// Where the target memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Host memory.
    Host,
    /// Device memory.
    Device,
}

/// The path a range is sent down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlannedPath {
    /// `pread` into host memory.
    Host,
    /// `pread` into pinned bounce buffers, then a copy to the device.
    Staged,
    /// `cuFileRead` (the report later says whether nvidia-fs or cuFile's POSIX path served it).
    CuFile,
}

impl std::fmt::Display for PlannedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PlannedPath::Host => "host",
            PlannedPath::Staged => "staged",
            PlannedPath::CuFile => "cufile",
        })
    }
}

/// A decision and why it was taken.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathDecision {
    /// The path.
    pub path: PlannedPath,
    /// Why, in words.
    pub reason: String,
}

fn decision(path: PlannedPath, reason: impl Into<String>) -> PathDecision {
    PathDecision {
        path,
        reason: reason.into(),
    }
}

/// Decides the path of one range of `file` (named in errors only).
///
/// With `facts.registration == None` a cuFile decision means "register the file, then decide
/// again with the outcome".
pub fn decide(
    settings: &IoSettings,
    facts: &MachineFacts,
    target: Target,
    file: &Path,
    range: Range<u64>,
) -> Result<PathDecision> {
    let len = range.end.saturating_sub(range.start);
    if target == Target::Host {
        return Ok(decision(PlannedPath::Host, "the target is host memory"));
    }
    match settings.compat_mode {
        CompatMode::On => {
            return Ok(decision(
                PlannedPath::Staged,
                "compat_mode=on: cuFile is never used",
            ))
        }
        CompatMode::Auto | CompatMode::Off if len < settings.gds_threshold => {
            return Ok(decision(
                PlannedPath::Staged,
                format!(
                    "{len} bytes is below gds_threshold ({}): gathered into a staged copy",
                    settings.gds_threshold
                ),
            ))
        }
        _ => {}
    }
    let registration = facts.registration.as_ref();
    let failures = [
        Some(&facts.libcufile),
        Some(&facts.driver_open),
        registration,
    ];
    if settings.compat_mode == CompatMode::Off {
        if let Some(f) = failures.iter().flatten().find(|f| !f.ok) {
            return Err(Error::CuFile {
                path: file.to_path_buf(),
                range: Some(range),
                reason: format!(
                    "compat_mode=off requires cuFile, but {}; use compat_mode=auto to fall back to staging",
                    f.detail
                ),
            });
        }
        let inside = if facts.nvidia_fs.ok {
            "nvidia-fs is loaded".to_string()
        } else {
            format!(
                "{}: cuFile will serve it through its POSIX compat path",
                facts.nvidia_fs.detail
            )
        };
        return Ok(decision(
            PlannedPath::CuFile,
            format!("compat_mode=off forces cuFile ({inside})"),
        ));
    }
    // auto: nvidia-fs first, so that where it is absent cuFile need not even be probed
    // ([`crate::io::cufile::machine_facts_for`])
    if !facts.nvidia_fs.ok {
        return Ok(decision(
            PlannedPath::Staged,
            format!(
                "auto: {}, so cuFile could only use its POSIX compat path (O_DIRECT, no page cache); staging instead",
                facts.nvidia_fs.detail
            ),
        ));
    }
    for f in [&facts.libcufile, &facts.driver_open] {
        if !f.ok {
            return Ok(decision(
                PlannedPath::Staged,
                format!("auto: {}; staging instead", f.detail),
            ));
        }
    }
    match registration {
        Some(f) if !f.ok => Ok(decision(
            PlannedPath::Staged,
            format!("auto: {}; staging instead", f.detail),
        )),
        Some(_) => Ok(decision(
            PlannedPath::CuFile,
            "auto: nvidia-fs loaded and the file registered with cuFile",
        )),
        None => Ok(decision(
            PlannedPath::CuFile,
            "auto: nvidia-fs loaded; the file is to be registered with cuFile",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(lib: bool, open: bool, nvfs: bool, reg: Option<bool>) -> MachineFacts {
        let f = |ok: bool, what: &str| {
            if ok {
                Fact::yes(format!("{what} ok"))
            } else {
                Fact::no(format!("{what} failed"))
            }
        };
        MachineFacts {
            libcufile: f(lib, "libcufile"),
            driver_open: f(open, "cuFileDriverOpen"),
            nvidia_fs: f(nvfs, "nvidia-fs"),
            registration: reg.map(|r| f(r, "cuFileHandleRegister (udev property not found)")),
        }
    }

    fn settings(mode: CompatMode) -> IoSettings {
        IoSettings {
            compat_mode: mode,
            ..IoSettings::default()
        }
    }

    fn go(mode: CompatMode, f: &MachineFacts, t: Target, len: u64) -> Result<PathDecision> {
        decide(
            &settings(mode),
            f,
            t,
            Path::new("f.parquet"),
            4096..4096 + len,
        )
    }

    const BIG: u64 = 1 << 20;

    #[test]
    fn host_targets_and_compat_on_never_use_cufile() {
        let all = facts(true, true, true, Some(true));
        let d = go(CompatMode::Off, &all, Target::Host, BIG).unwrap();
        assert_eq!(d.path, PlannedPath::Host);
        let d = go(CompatMode::On, &all, Target::Device, BIG).unwrap();
        assert_eq!(d.path, PlannedPath::Staged);
        assert!(d.reason.contains("compat_mode=on"));
    }

    #[test]
    fn small_ranges_are_staged_in_every_mode() {
        let all = facts(true, true, true, Some(true));
        for mode in [CompatMode::Auto, CompatMode::Off] {
            let d = go(mode, &all, Target::Device, 16 * 1024 - 1).unwrap();
            assert_eq!(d.path, PlannedPath::Staged, "{mode}");
            assert!(
                d.reason.contains("below gds_threshold (16384)"),
                "{}",
                d.reason
            );
            let d = go(mode, &all, Target::Device, 16 * 1024).unwrap();
            assert_eq!(d.path, PlannedPath::CuFile, "{mode}");
        }
    }

    #[test]
    fn auto_uses_cufile_only_where_gds_can_exist() {
        // the H200 machine: library and driver fine, no nvidia-fs
        let h200 = facts(true, true, false, Some(true));
        let d = go(CompatMode::Auto, &h200, Target::Device, BIG).unwrap();
        assert_eq!(d.path, PlannedPath::Staged);
        assert!(d.reason.contains("POSIX compat path"), "{}", d.reason);
        // nvidia-fs loaded, registration not yet tried: register, then decide again
        let d = go(
            CompatMode::Auto,
            &facts(true, true, true, None),
            Target::Device,
            BIG,
        )
        .unwrap();
        assert_eq!(d.path, PlannedPath::CuFile);
        assert!(d.reason.contains("to be registered"));
        // registration failed (no udev record): staged, with cuFile's reason
        let d = go(
            CompatMode::Auto,
            &facts(true, true, true, Some(false)),
            Target::Device,
            BIG,
        )
        .unwrap();
        assert_eq!(d.path, PlannedPath::Staged);
        assert!(d.reason.contains("udev property not found"), "{}", d.reason);
        // no library, driver open failed
        for f in [
            facts(false, false, true, None),
            facts(true, false, true, None),
        ] {
            let d = go(CompatMode::Auto, &f, Target::Device, BIG).unwrap();
            assert_eq!(d.path, PlannedPath::Staged);
            assert!(d.reason.contains("failed; staging instead"), "{}", d.reason);
        }
        let d = go(
            CompatMode::Auto,
            &facts(true, true, true, Some(true)),
            Target::Device,
            BIG,
        )
        .unwrap();
        assert_eq!(d.path, PlannedPath::CuFile);
    }

    #[test]
    fn off_forces_cufile_or_fails_clearly() {
        // no nvidia-fs: still cuFile, and the reason says cuFile will use its POSIX path
        let d = go(
            CompatMode::Off,
            &facts(true, true, false, Some(true)),
            Target::Device,
            BIG,
        )
        .unwrap();
        assert_eq!(d.path, PlannedPath::CuFile);
        assert!(d.reason.contains("POSIX compat path"), "{}", d.reason);
        for (f, want) in [
            (facts(false, false, false, None), "libcufile failed"),
            (facts(true, false, false, None), "cuFileDriverOpen failed"),
            (
                facts(true, true, false, Some(false)),
                "udev property not found",
            ),
        ] {
            let e = go(CompatMode::Off, &f, Target::Device, BIG)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("f.parquet: cuFile (bytes 4096..1052672)"),
                "{e}"
            );
            assert!(
                e.contains("compat_mode=off requires cuFile") && e.contains(want),
                "{e}"
            );
        }
    }
}
