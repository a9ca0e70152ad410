//! cuFile (GPUDirect Storage), loaded at run time.
//!
//! This version probes what cuFile offers — the library, `cuFileDriverOpen`, the driver's
//! nvidia-fs properties, the version — once per process, for the path policy and
//! `cuparquet doctor`. cudarc's loader panics when the library is missing, so presence is
//! checked first; it looks for `libcufile.so`, which some installs ship only as
//! `libcufile.so.0` (then link `libcufile.so` to it on the loader path).
//!
//! The driver stays open for the life of the process once opened (cuFile reads need it; closing
//! and reopening costs more than it saves).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::io::policy::{nvidia_fs_fact, Fact, MachineFacts};

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CufileProbe {
    /// libcufile could be loaded.
    pub library: Fact,
    /// `cuFileDriverOpen` succeeded.
    pub driver_open: Fact,
    /// `cuFileGetVersion`, when the library answers it.
    pub version: Option<String>,
    /// nvidia-fs as the driver reports it (`cuFileDriverGetProperties`), when open.
    pub driver_nvfs: Option<String>,
}

/// Directories where a `libcufile.so.0` without `libcufile.so` is looked for, to say so.
fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

fn missing_library_detail() -> String {
    for d in library_dirs() {
        let so0 = d.join("libcufile.so.0");
        if so0.exists() && !d.join("libcufile.so").exists() {
            return format!(
                "libcufile.so not found, but {} is: link libcufile.so to it on the loader path",
                so0.display()
            );
        }
    }
    "libcufile.so not found on the loader path (install the GPUDirect Storage libraries; staged reads need none)".into()
}

/// Probes cuFile once per process; never panics.
pub fn probe() -> &'static CufileProbe {
    static PROBE: OnceLock<CufileProbe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // SAFETY: only tries to dlopen the library by name and reports whether that worked; no
        // cuFile function is called.
        let present = unsafe { cudarc::cufile::sys::is_culib_present() };
        if !present {
            let d = missing_library_detail();
            return CufileProbe {
                library: Fact::no(d.clone()),
                driver_open: Fact::no(format!("not tried: {d}")),
                version: None,
                driver_nvfs: None,
            };
        }
        let mut v: std::ffi::c_int = 0;
        // SAFETY: the library is loaded (checked above); `v` is a valid, writable c_int that
        // outlives the call.
        let version = unsafe { cudarc::cufile::sys::cuFileGetVersion(&mut v) }
            .result()
            .ok()
            .map(|()| format!("{}.{} ({v})", v / 1000, (v % 1000) / 10));
        // cuFile needs the CUDA driver initialised in the process.
        let cuda = crate::device::probe_cuda();
        if cuda.devices == 0 {
            return CufileProbe {
                library: Fact::yes("libcufile.so loaded"),
                driver_open: Fact::no(format!("not tried: {}", cuda.detail)),
                version,
                driver_nvfs: None,
            };
        }
        let (driver_open, driver_nvfs) = match cudarc::cufile::result::driver_open() {
            Ok(()) => {
                let nvfs = cudarc::cufile::result::driver_get_properties()
                    .ok()
                    .map(|p| {
                        format!(
                            "nvfs {}.{}, max direct I/O {} KiB",
                            p.nvfs.major_version, p.nvfs.minor_version, p.nvfs.max_direct_io_size
                        )
                    });
                (Fact::yes("cuFileDriverOpen succeeded"), nvfs)
            }
            Err(e) => (Fact::no(format!("cuFileDriverOpen failed: {e:?}")), None),
        };
        CufileProbe {
            library: Fact::yes("libcufile.so loaded"),
            driver_open,
            version,
            driver_nvfs,
        }
    })
}

/// The machine facts the path policy needs (registration not yet tried).
pub fn machine_facts() -> MachineFacts {
    let p = probe();
    MachineFacts {
        libcufile: p.library.clone(),
        driver_open: p.driver_open.clone(),
        nvidia_fs: nvidia_fs_fact(),
        registration: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_never_panics_and_explains() {
        let p = super::probe();
        assert!(!p.library.detail.is_empty());
        if !p.library.ok {
            assert!(!p.driver_open.ok);
            assert!(
                p.library.detail.contains("libcufile.so"),
                "{}",
                p.library.detail
            );
        }
        let f = super::machine_facts();
        assert_eq!(f.libcufile, p.library);
        assert!(f.registration.is_none());
    }
}
