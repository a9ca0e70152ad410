//! Devices: what the caller asks for, what the machine has, and what the reader chose.
//!
//! This module is the only one that creates CUDA contexts and streams ([`gpu`]). Everything is
//! loaded at run time (`cudarc` with `dynamic-loading`), so the crate builds and runs where
//! CUDA is absent; the probe checks that the driver library exists before its first call,
//! because a missing library would panic inside cudarc.
//!
//! Driver requirement: the bindings are generated for the CUDA version picked by a cargo
//! feature (`cuda-13000`, the default: a driver of the CUDA 13.0 generation, r580 or newer,
//! and libcufile 1.15; `cuda-12090` / `cuda-12080` for CUDA 12.9 / 12.8 installs).

mod event;
mod gpu;
mod streams;
#[cfg(test)]
pub(crate) mod c_source;
pub(crate) mod launch;
pub(crate) mod profile;
pub mod nvcomp;
pub mod nvrtc;

pub use event::{copy_from_device_address, wait_for_event_at, Event};
pub use gpu::{
    gpu, pinned_pool_retain, DeviceBuffer, Gpu, PinnedBuffer, Stream, ALLOC_PADDING, COPY_STREAMS,
    PINNED_POOL_RETAIN,
};
pub(crate) use streams::{
    companion_stream, with_decode_slot, with_own_stream, with_stream, DECODE_THREADS,
};

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Where a batch's buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// Host memory.
    Host,
    /// Memory of CUDA device `n`.
    Cuda(usize),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Host => f.write_str("host"),
            Location::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The target a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// Host memory, decoded by arrow-rs.
    Host,
    /// CUDA device `n`.
    Cuda(usize),
    /// The first CUDA device when GPU decoding is available and a device is present, else host.
    #[default]
    Auto,
}

impl Device {
    /// Where a reader built for this device decodes and puts its batches on this machine
    /// ([`resolve`]: `Auto` is the host where no device is present or the GPU kernels cannot
    /// be compiled); an error where the device asked for is not here.
    pub fn location(self) -> Result<Location> {
        resolve(self).map(|c| c.location)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Host => f.write_str("host"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Auto => f.write_str("auto"),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// `auto`, `host` (or `cpu`), `cuda` (= `cuda:0`), `cuda:N`; `gpu` and `gpu:N` are aliases
    /// of `cuda` and `cuda:N`.
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || Error::Device {
            device: s.to_string(),
            reason: "expected auto, host, cuda or cuda:N".into(),
        };
        match t.as_str() {
            "auto" => Ok(Device::Auto),
            "host" | "cpu" => Ok(Device::Host),
            "cuda" | "gpu" => Ok(Device::Cuda(0)),
            _ => {
                let n = t
                    .strip_prefix("cuda:")
                    .or_else(|| t.strip_prefix("gpu:"))
                    .ok_or_else(bad)?;
                n.parse().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }
}

/// What the machine offers, probed once per process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CudaProbe {
    /// `libcuda` could be loaded.
    pub driver_library: bool,
    /// CUDA devices found (0 when the driver is missing or fails to initialise).
    pub devices: usize,
    /// A sentence saying what was found.
    pub detail: String,
    /// Why the GPU kernels cannot be compiled (NVRTC missing), where that is so: set by
    /// [`resolve`] of `Device::Auto` only ([`probe_cuda`] leaves NVRTC unopened).
    pub nvrtc_missing: Option<String>,
}

impl CudaProbe {
    fn not_probed() -> Self {
        CudaProbe {
            driver_library: false,
            devices: 0,
            detail: "CUDA was not probed".into(),
            nvrtc_missing: None,
        }
    }
}

/// Every CUDA device of this machine, by ordinal (`cuda:0` .. `cuda:N-1`): the devices to
/// spread a load over when all of them are wanted
/// ([`ScanBuilder::with_devices`](crate::ScanBuilder::with_devices), `--devices all`). An
/// error saying why when there is none (no driver, or no device).
pub fn cuda_devices() -> crate::error::Result<Vec<usize>> {
    let probe = probe_cuda();
    if probe.devices == 0 {
        return Err(crate::error::Error::Device {
            device: "cuda".into(),
            reason: probe.detail.clone(),
        });
    }
    Ok((0..probe.devices).collect())
}

/// Probes the CUDA driver and counts devices. Never panics; cached for the process.
pub fn probe_cuda() -> &'static CudaProbe {
    static PROBE: OnceLock<CudaProbe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the driver library by its known
        // names and reports whether that worked; it calls no CUDA function.
        let present = unsafe { cudarc::driver::sys::is_culib_present() };
        if !present {
            return CudaProbe {
                driver_library: false,
                devices: 0,
                detail: "no CUDA driver library (libcuda.so) found".into(),
                nvrtc_missing: None,
            };
        }
        if let Err(e) = cudarc::driver::result::init() {
            return CudaProbe {
                driver_library: true,
                devices: 0,
                detail: format!("the CUDA driver did not initialise (cuInit: {e})"),
                nvrtc_missing: None,
            };
        }
        match cudarc::driver::result::device::get_count() {
            Ok(n) if n > 0 => CudaProbe {
                driver_library: true,
                devices: n as usize,
                detail: format!("{n} CUDA device{} found", if n == 1 { "" } else { "s" }),
                // NVRTC is opened only where it matters ([`resolve`] of `Device::Auto`): a
                // fresh process saves tens of milliseconds where the kernels are cached
                nvrtc_missing: None,
            },
            Ok(_) => CudaProbe {
                driver_library: true,
                devices: 0,
                detail: "the CUDA driver reports no devices".into(),
                nvrtc_missing: None,
            },
            Err(e) => CudaProbe {
                driver_library: true,
                devices: 0,
                detail: format!("counting CUDA devices failed (cuDeviceGetCount: {e})"),
                nvrtc_missing: None,
            },
        }
    })
}

/// The target the reader chose, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceChoice {
    /// What was asked for.
    pub requested: String,
    /// Where batches will live.
    pub location: Location,
    /// Why.
    pub reason: String,
}

/// Resolves a requested device on this machine.
pub fn resolve(device: Device) -> Result<DeviceChoice> {
    match device {
        // Host needs no probe (initialising the CUDA driver takes ~0.2 s where one exists).
        Device::Host => resolve_with(device, &CudaProbe::not_probed()),
        // Auto picks the host where the kernels could not be compiled
        Device::Auto if probe_cuda().devices > 0 => {
            let mut probe = probe_cuda().clone();
            probe.nvrtc_missing = nvrtc::nvrtc_version().err().map(|e| e.to_string());
            resolve_with(device, &probe)
        }
        _ => resolve_with(device, probe_cuda()),
    }
}

/// [`resolve`] with machine facts given (for tests).
pub(crate) fn resolve_with(device: Device, probe: &CudaProbe) -> Result<DeviceChoice> {
    let requested = device.to_string();
    match device {
        Device::Host => Ok(DeviceChoice {
            requested,
            location: Location::Host,
            reason: "host memory was requested".into(),
        }),
        Device::Cuda(n) => {
            if probe.devices == 0 {
                return Err(Error::Device {
                    device: requested,
                    reason: format!(
                        "{}; load into host memory instead with Device::Host (`--device host`), \
                         or let Device::Auto (`--device auto`) choose",
                        probe.detail
                    ),
                });
            }
            if n >= probe.devices {
                return Err(Error::Device {
                    device: requested,
                    reason: format!(
                        "no such device: {} (valid: cuda:0 to cuda:{})",
                        probe.detail,
                        probe.devices - 1
                    ),
                });
            }
            Ok(DeviceChoice {
                requested,
                location: Location::Cuda(n),
                reason: format!("cuda:{n} was requested"),
            })
        }
        Device::Auto => match (&probe.nvrtc_missing, probe.devices) {
            (_, 0) => Ok(DeviceChoice {
                requested,
                location: Location::Host,
                reason: format!("{}; using host memory", probe.detail),
            }),
            (Some(why), _) => Ok(DeviceChoice {
                requested,
                location: Location::Host,
                reason: format!(
                    "{}, but the GPU kernels cannot be compiled ({why}); using host memory",
                    probe.detail
                ),
            }),
            (None, _) => Ok(DeviceChoice {
                requested,
                location: Location::Cuda(0),
                reason: format!("{}; using cuda:0", probe.detail),
            }),
        },
    }
}

/// A list of CUDA devices as users write it — `cuda:0,cuda:1` (`gpu:N`, `cuda` for `cuda:0`,
/// or bare ordinals `0,1`), or `all` for every CUDA device here
/// ([`crate::device::cuda_devices`]) — as ordinals, each once ([`crate::config::check_devices`]).
pub fn parse_device_list(s: &str) -> crate::error::Result<Vec<usize>> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("all") {
        return crate::device::cuda_devices();
    }
    let ordinals = s
        .split(',')
        .map(|d| {
            let d = d.trim();
            if let Ok(n) = d.parse::<usize>() {
                return Ok(n);
            }
            match d.parse::<crate::device::Device>()? {
                crate::device::Device::Cuda(n) => Ok(n),
                other => Err(crate::error::Error::setting(
                    "devices",
                    s,
                    format!("{other}: a device list names CUDA devices (cuda:N)"),
                )),
            }
        })
        .collect::<crate::error::Result<Vec<usize>>>()?;
    crate::config::check_devices(&ordinals)?;
    Ok(ordinals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(devices: usize) -> CudaProbe {
        CudaProbe {
            driver_library: devices > 0,
            devices,
            detail: format!("{devices} devices"),
            nvrtc_missing: None,
        }
    }

    #[test]
    fn parse() {
        assert_eq!("auto".parse::<Device>().unwrap(), Device::Auto);
        assert_eq!("HOST".parse::<Device>().unwrap(), Device::Host);
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
        let e = "cuda:x".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("expected auto, host, cuda or cuda:N"), "{e}");
    }

    #[test]
    fn auto_falls_back_to_host_and_says_why() {
        let c = resolve_with(Device::Auto, &probe(0)).unwrap();
        assert_eq!(c.location, Location::Host);
        assert!(c.reason.contains("0 devices"), "{}", c.reason);
        let c = resolve_with(Device::Auto, &probe(2)).unwrap();
        assert_eq!(c.location, Location::Cuda(0));
        assert!(c.reason.contains("2 devices; using cuda:0"), "{}", c.reason);
        let no_nvrtc = CudaProbe {
            nvrtc_missing: Some("libnvrtc not found".into()),
            ..probe(2)
        };
        let c = resolve_with(Device::Auto, &no_nvrtc).unwrap();
        assert_eq!(c.location, Location::Host);
        assert!(c.reason.contains("libnvrtc not found"), "{}", c.reason);
    }

    #[test]
    fn cuda_needs_a_device_in_range() {
        let c = resolve_with(Device::Cuda(1), &probe(2)).unwrap();
        assert_eq!(c.location, Location::Cuda(1));
        let e = resolve_with(Device::Cuda(2), &probe(2))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "device cuda:2: no such device: 2 devices (valid: cuda:0 to cuda:1)"
        );
        let e = resolve_with(Device::Cuda(0), &probe(0))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "device cuda:0: 0 devices; load into host memory instead with Device::Host \
             (`--device host`), or let Device::Auto (`--device auto`) choose"
        );
    }

    #[test]
    fn probe_never_panics() {
        let p = probe_cuda();
        assert!(!p.detail.is_empty());
        assert!(p.driver_library || p.devices == 0);
    }
}
