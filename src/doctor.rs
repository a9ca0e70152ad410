//! What this machine offers, what the reader will do with it, and why: the checks behind
//! `cuparquet doctor` (lines or JSON) and the Python module's `cuparquet.doctor()` (a dict).
//!
//! Each check is one line — ok, warn or fail — with the fix where there is one. A machine
//! without a GPU is not a failure: loads use host memory there, and doctor says so.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::config::IoSettings;
use crate::device::{probe_cuda, CudaProbe};
use crate::io::cufile;
use crate::io::policy::{decide, nvidia_fs_fact, Target};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but not at its best, or only on the fallback path.
    Warn,
    /// Broken: loads will fail or ignore a setting.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// ok / warn / fail.
    pub status: Status,
    /// What was checked.
    pub name: String,
    /// What was found.
    pub detail: String,
    /// What to do about it, if anything.
    pub fix: Option<String>,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(f, "{s}  {:<22} {}", self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, " — fix: {fix}")?;
        }
        Ok(())
    }
}

fn check(status: Status, name: &str, detail: impl Into<String>, fix: Option<&str>) -> Check {
    Check {
        status,
        name: name.into(),
        detail: detail.into(),
        fix: fix.map(Into::into),
    }
}

/// What to check.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// A file or directory whose block device is checked for cuFile registration; or a URL
    /// (feature `object-store`), opened once to time one request to its store.
    pub path: PathBuf,
    /// Measure ceilings (page-cache read throughput).
    pub bench: bool,
    /// How a URL `path` is read (storage options) for the latency probe.
    pub remote: crate::config::RemoteSettings,
}

/// Runs every check.
pub fn run(opts: &DoctorOptions) -> Vec<Check> {
    let mut out = Vec::new();
    let cuda = probe_cuda();
    if cuda.devices == 0 {
        // no GPU: one line on what loads do here and what a GPU would add, none of the GPU
        // stack's checks (nvCOMP, cuFile, nvidia-fs, udev, cufile.json) and their advice
        out.push(check(
            Status::Ok,
            "GPU",
            format!(
                "none here ({}): loads decode on this machine's cores into host memory, every \
                 encoding and codec; with an NVIDIA GPU and its driver they would decode on the \
                 GPU into device memory (then this command checks nvCOMP, cuFile/GDS, \
                 nvidia-fs and udev too)",
                cuda.detail
            ),
            None,
        ));
        host_checks(opts, cuda, &mut out);
        return out;
    }
    out.push(check(Status::Ok, "CUDA driver", &cuda.detail, None));

    out.push(nvcomp_check());

    let cf = cufile::probe();
    out.push(if cf.library.ok {
        let v = cf
            .version
            .as_deref()
            .map(|v| format!(", version {v}"))
            .unwrap_or_default();
        check(
            Status::Ok,
            "libcufile",
            format!("{}{v}", cf.library.detail),
            None,
        )
    } else {
        check(
            Status::Warn,
            "libcufile",
            &cf.library.detail,
            Some("only needed for cuFile/GDS; staged reads work without it"),
        )
    });
    out.push(match (cf.library.ok, cf.driver_open.ok) {
        (_, true) => {
            let nvfs = cf
                .driver_nvfs
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            check(
                Status::Ok,
                "cuFileDriverOpen",
                format!("{}{nvfs}", cf.driver_open.detail),
                None,
            )
        }
        (false, _) => check(
            Status::Warn,
            "cuFileDriverOpen",
            &cf.driver_open.detail,
            None,
        ),
        (true, false) => check(
            Status::Warn,
            "cuFileDriverOpen",
            &cf.driver_open.detail,
            Some("see cufile.log; auto mode stages instead"),
        ),
    });

    let nvfs = nvidia_fs_fact();
    out.push(if nvfs.ok {
        check(Status::Ok, "nvidia-fs", nvfs.detail.clone(), None)
    } else {
        check(
            Status::Warn,
            "nvidia-fs",
            format!("{}: cuFile could only use its POSIX compat path", nvfs.detail),
            Some("run: sudo modprobe nvidia-fs (the module comes with the nvidia-gds package) for GPUDirect Storage; meanwhile auto mode stages through pinned memory"),
        )
    });

    if crate::source::is_url(&opts.path) {
        out.push(remote_probe(&opts.path, &opts.remote));
    } else {
        out.push(udev_check(&opts.path));
    }
    out.extend(cufile_json_checks());
    host_checks(opts, cuda, &mut out);
    out
}

/// The checks of every machine, GPU or not: object stores, the device `auto` picks, the
/// settings, the path a range takes, the ceilings.
fn host_checks(opts: &DoctorOptions, cuda: &CudaProbe, out: &mut Vec<Check>) {
    if cuda.devices == 0 && crate::source::is_url(&opts.path) {
        out.push(remote_probe(&opts.path, &opts.remote));
    }
    out.push(stores_check());

    match crate::device::resolve(crate::device::Device::Auto) {
        Ok(c) => out.push(check(
            Status::Ok,
            "--device auto",
            format!("→ {} ({})", c.location, c.reason),
            None,
        )),
        Err(e) => out.push(check(Status::Fail, "--device auto", e.to_string(), None)),
    }

    let settings = IoSettings::from_env();
    match &settings {
        Ok(s) => {
            out.push(check(
                Status::Ok,
                "settings",
                format!(
                    "compat_mode={} gds_threshold={} task_size={} nthreads={} bounce_buffers={}x{} per thread direct_io={}",
                    s.compat_mode,
                    s.gds_threshold,
                    s.task_size,
                    s.nthreads,
                    s.bounce_buffer_count,
                    s.bounce_buffer_size,
                    s.direct_io
                ),
                None,
            ));
            let facts = cufile::machine_facts();
            let target = if cuda.devices > 0 {
                Target::Device
            } else {
                Target::Host
            };
            let line = match decide(s, &facts, target, &opts.path, 0..(1 << 20)) {
                Ok(d) => check(
                    Status::Ok,
                    "path for a 1 MiB range",
                    format!("{}: {}", d.path, d.reason),
                    None,
                ),
                Err(e) => check(
                    Status::Fail,
                    "path for a 1 MiB range",
                    e.to_string(),
                    Some("set CUPARQUET_COMPAT_MODE=auto"),
                ),
            };
            out.push(line);
        }
        Err(e) => out.push(check(
            Status::Fail,
            "settings",
            e.to_string(),
            Some("fix or unset the variable"),
        )),
    }

    if opts.bench {
        let threads = settings.as_ref().map_or(1, |s| s.nthreads);
        out.push(page_cache_ceiling(threads));
        if cuda.devices > 0 {
            out.extend(pinned_copy_ceiling());
        }
    }
}

/// The variables `object_store`'s builders read, by store: those set (names only, never values).
const STORE_VARIABLES: &[(&str, &[&str])] = &[
    (
        "S3",
        &[
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT",
            "AWS_ENDPOINT_URL",
            "AWS_ALLOW_HTTP",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
        ],
    ),
    (
        "GCS",
        &[
            "GOOGLE_SERVICE_ACCOUNT",
            "GOOGLE_SERVICE_ACCOUNT_PATH",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_BUCKET",
        ],
    ),
    (
        "Azure",
        &[
            "AZURE_STORAGE_ACCOUNT_NAME",
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_KEY",
            "AZURE_CLIENT_ID",
            "AZURE_STORAGE_USE_EMULATOR",
        ],
    ),
];

/// Which stores the environment configures (the variables set, by name), and whether this build
/// reads URLs at all.
fn stores_check() -> Check {
    let set: Vec<String> = STORE_VARIABLES
        .iter()
        .filter_map(|(store, vars)| {
            let on: Vec<&str> = vars
                .iter()
                .copied()
                .filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
                .collect();
            (!on.is_empty()).then(|| format!("{store}: {}", on.join(", ")))
        })
        .collect();
    let configured = if set.is_empty() {
        "no AWS_*, GOOGLE_* or AZURE_* variable set (public HTTP(S) URLs need none)".to_string()
    } else {
        set.join("; ")
    };
    if cfg!(feature = "object-store") {
        check(Status::Ok, "object stores", configured, None)
    } else {
        check(
            Status::Warn,
            "object stores",
            format!("this build reads local files only ({configured})"),
            Some("build with the `object-store` feature to read s3://, gs://, az://, http(s):// URLs"),
        )
    }
}

/// One request to `url`: the suffix GET that opens a file, timed.
fn remote_probe(url: &Path, remote: &crate::config::RemoteSettings) -> Check {
    let t = Instant::now();
    match crate::source::ParquetFile::open_with(url, remote) {
        Ok(f) => check(
            Status::Ok,
            "remote latency",
            format!(
                "{}: one GET of its footer's tail in {:.1} ms ({} bytes)",
                url.display(),
                t.elapsed().as_secs_f64() * 1e3,
                f.len()
            ),
            None,
        ),
        Err(e) => check(
            Status::Fail,
            "remote latency",
            e.to_string(),
            Some("check the URL, the credentials and the storage options"),
        ),
    }
}

/// nvCOMP: found (where, which version and API, which codecs) or not (what the loads do
/// instead, where it was looked for).
fn nvcomp_check() -> Check {
    use crate::device::nvcomp::{nvcomp, search_dirs, NvcompCodec, ENV_NVCOMP};
    match nvcomp() {
        Ok(Some(n)) => {
            let codecs: Vec<&str> = [
                (NvcompCodec::Zstd, "ZSTD"),
                (NvcompCodec::Lz4, "LZ4_RAW"),
                (NvcompCodec::Lz4, "LZ4 (Hadoop's framing)"),
            ]
            .into_iter()
            .filter(|(c, _)| n.supports(*c))
            .map(|(_, name)| name)
            .collect();
            check(
                Status::Ok,
                "nvCOMP",
                format!(
                    "{} ({}, the {}.x API): device decompression of {}",
                    n.version_string(),
                    n.path(),
                    n.api(),
                    codecs.join(", ")
                ),
                None,
            )
        }
        Ok(None) if crate::config::env::nvcomp_off() => {
            check(
                Status::Ok,
                "nvCOMP",
                format!("switched off ({ENV_NVCOMP}=off): ZSTD, LZ4_RAW and LZ4 pages are decompressed on the host"),
                None,
            )
        }
        Ok(None) => check(
            Status::Warn,
            "nvCOMP",
            format!(
                "not found (the loader's path, then {}): ZSTD, LZ4_RAW and LZ4 pages are decompressed on the host",
                search_dirs()
                    .iter()
                    .take(4)
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
                    + ", Python's site-packages"
            ),
            Some("optional: pip install nvidia-libnvcomp-cu13 (or set CUPARQUET_NVCOMP to libnvcomp.so) to decompress them on the GPU"),
        ),
        Err(e) => check(
            Status::Fail,
            "nvCOMP",
            e.to_string(),
            Some("point CUPARQUET_NVCOMP at libnvcomp.so.5 or .6, or set it to auto or off"),
        ),
    }
}

/// Pinned host → device copy of 256 MiB on one stream, best of 4, for each device (the ceiling
/// of its staged reads) and, with several, for all of them copying at the same time (the sum of
/// their best copies then: the ceiling of a load spread over them).
fn pinned_copy_ceiling() -> Vec<Check> {
    // one device's copies: 256 MiB pinned → device, best of 4, on its first copy stream
    // (`start`: the devices copying at once wait there until every buffer is ready)
    let copy = |ordinal: usize,
                start: Option<&std::sync::Barrier>|
     -> crate::error::Result<(f64, String)> {
        let ready = || {
            if let Some(b) = start {
                b.wait();
            }
        };
        let g = match crate::device::gpu(ordinal) {
            Ok(g) => g,
            Err(e) => {
                ready();
                return Err(e);
            }
        };
        let len = 256usize << 20;
        // (a thread of its own when the devices copy at once: the device's context bound first)
        let bufs = g.bind().and_then(|()| g.pinned(len)).and_then(|mut p| {
            p.as_mut_slice()[..len].fill(0x5a);
            Ok((p, g.alloc(len)?))
        });
        ready();
        let (pinned, dev) = bufs?;
        let stream = &g.streams()[0];
        let mut best = f64::MAX;
        for _ in 0..4 {
            let t = Instant::now();
            pinned.copy_to_device(0..len, &dev, 0, stream)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        drop(pinned);
        Ok((len as f64 / best / 1e9, g.name().to_string()))
    };
    let devices = crate::device::probe_cuda().devices;
    let mut out: Vec<Check> = (0..devices)
        .map(|n| match copy(n, None) {
            Ok((gbs, name)) => check(
                Status::Ok,
                "pinned copy",
                format!("{gbs:.1} GB/s host→device (256 MiB pinned, one stream, cuda:{n} {name})"),
                None,
            ),
            Err(e) => check(
                Status::Warn,
                "pinned copy",
                format!("cuda:{n} not measured: {e}"),
                None,
            ),
        })
        .collect();
    if devices > 1 {
        // every device at once (the links are the devices' own; host memory is shared): the
        // ceiling of a load spread over all of them
        let start = std::sync::Barrier::new(devices);
        let all: Vec<crate::error::Result<(f64, String)>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..devices)
                .map(|n| {
                    let (copy, start) = (&copy, &start);
                    s.spawn(move || copy(n, Some(start)))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Ok((0.0, String::new()))))
                .collect()
        });
        out.push(
            match all
                .into_iter()
                .collect::<crate::error::Result<Vec<_>>>()
            {
                Ok(v) => check(
                    Status::Ok,
                    "pinned copy",
                    format!(
                        "{:.1} GB/s host→device, all {devices} devices at once (each {})",
                        v.iter().map(|x| x.0).sum::<f64>(),
                        v.iter()
                            .map(|x| format!("{:.1}", x.0))
                            .collect::<Vec<_>>()
                            .join(" / ")
                    ),
                    None,
                ),
                Err(e) => check(
                    Status::Warn,
                    "pinned copy",
                    format!("all devices at once not measured: {e}"),
                    None,
                ),
            },
        );
    }
    out
}

/// cuFileHandleRegister needs the udev record of the block device holding the file
/// (`ID_FS_USAGE`); VMs often have none.
fn udev_check(path: &Path) -> Check {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return check(
                Status::Warn,
                "udev record",
                format!("{}: {e}", path.display()),
                Some("pass --path with a file or directory on the data's filesystem"),
            )
        }
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let record = PathBuf::from(format!("/run/udev/data/b{major}:{minor}"));
    // the command that writes what cuFile looks for (what udev would have written)
    let fix = |append: bool| {
        format!(
            "run: sudo sh -c 'mkdir -p /run/udev/data && printf \"E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE={}\\n\" {} {}' \
             (auto mode stages meanwhile)",
            fs_type(path).unwrap_or_else(|| "ext4".into()),
            if append { ">>" } else { ">" },
            record.display()
        )
    };
    match std::fs::read_to_string(&record) {
        Ok(text) if text.lines().any(|l| l.starts_with("E:ID_FS_USAGE=")) => check(
            Status::Ok,
            "udev record",
            format!("{} has ID_FS_USAGE (device {major}:{minor})", record.display()),
            None,
        ),
        Ok(_) => check(
            Status::Warn,
            "udev record",
            format!("{} lacks ID_FS_USAGE: cuFileHandleRegister will fail", record.display()),
            Some(&fix(true)),
        ),
        Err(_) => check(
            Status::Warn,
            "udev record",
            format!(
                "no {} for {} (device {major}:{minor}): cuFileHandleRegister will fail (\"udev property not found\")",
                record.display(),
                path.display()
            ),
            Some(&fix(false)),
        ),
    }
}

/// The filesystem type of the mount holding `path` (the longest mount point above it in
/// `/proc/mounts`).
fn fs_type(path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, ty) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(at).then(|| (at.len(), ty.to_string()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, ty)| ty)
}

/// The cufile.json in use (`CUFILE_ENV_PATH_JSON`, else /etc/cufile.json) and its
/// `execution.*` and `properties.allow_compat_mode` values.
fn cufile_json_checks() -> Vec<Check> {
    let path = std::env::var_os("CUFILE_ENV_PATH_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cufile.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            return vec![check(
                Status::Warn,
                "cufile.json",
                format!("{}: {e}: cuFile uses its built-in defaults", path.display()),
                None,
            )]
        }
    };
    let json: serde_json::Value = match serde_json::from_str(&strip_json_comments(&text)) {
        Ok(v) => v,
        Err(e) => {
            return vec![check(
                Status::Fail,
                "cufile.json",
                format!("{}: not valid JSON: {e}", path.display()),
                Some("fix the file or point CUFILE_ENV_PATH_JSON elsewhere"),
            )]
        }
    };
    let mut values = Vec::new();
    if let Some(exec) = json.get("execution").and_then(|e| e.as_object()) {
        for (k, v) in exec {
            values.push(format!("execution.{k}={v}"));
        }
    }
    if let Some(v) = json.pointer("/properties/allow_compat_mode") {
        values.push(format!("properties.allow_compat_mode={v}"));
    }
    vec![check(
        Status::Ok,
        "cufile.json",
        format!("{}: {}", path.display(), values.join(" ")),
        None,
    )]
}

/// Removes `//` and `/* */` comments outside strings (cufile.json carries them).
pub(crate) fn strip_json_comments(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' && i + 1 < b.len() {
                out.push_str(&s[i..i + 2]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        let ch_len = s[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&s[i..i + ch_len]);
        i += ch_len;
    }
    out
}

/// Page-cache read throughput with the host reader: a 256 MiB temporary file, read once to warm
/// the cache, then timed.
fn page_cache_ceiling(threads: usize) -> Check {
    let run = || -> std::io::Result<f64> {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("cuparquet-doctor-{}.bin", std::process::id()));
        let len: usize = 256 << 20;
        let block = vec![0x5au8; 1 << 20];
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&path)?;
            for _ in 0..len >> 20 {
                f.write_all(&block)?;
            }
        }
        let result = (|| {
            let file = crate::source::ParquetFile::open(&path)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let settings = IoSettings {
                nthreads: threads,
                ..IoSettings::default()
            };
            let reader = crate::io::host::HostReader::new(settings)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let req = vec![crate::plan::IoRequest {
                range: 0..len as u64,
                dest_offset: 0,
                chunks: vec![],
            }];
            let mut buf = vec![0u8; len];
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                crate::io::RangeReader::read(
                    &reader,
                    &file,
                    &req,
                    crate::io::Dest::Host(&mut buf),
                )
                .map_err(|e| std::io::Error::other(e.to_string()))?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            Ok(len as f64 / best / 1e9)
        })();
        let _ = std::fs::remove_file(&path);
        result
    };
    match run() {
        Ok(gbs) => check(
            Status::Ok,
            "page-cache read",
            format!("{gbs:.1} GB/s (256 MiB, {threads} threads, pread into host memory)"),
            None,
        ),
        Err(e) => check(
            Status::Warn,
            "page-cache read",
            format!("not measured: {e}"),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_stripped_outside_strings() {
        let s = "{ // c\n \"a\": \"x//y\", /* b */ \"b\": 1 }";
        let v: serde_json::Value = serde_json::from_str(&strip_json_comments(s)).unwrap();
        assert_eq!(v["a"], "x//y");
        assert_eq!(v["b"], 1);
    }

    #[test]
    fn runs_without_a_gpu() {
        let checks = run(&DoctorOptions {
            path: PathBuf::from("."),
            bench: false,
            remote: Default::default(),
        });
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        let gpu = probe_cuda().devices > 0;
        let gpu_stack = [
            "CUDA driver",
            "libcufile",
            "cuFileDriverOpen",
            "nvidia-fs",
            "udev record",
            "cufile.json",
        ];
        for want in ["settings", "path for a 1 MiB range", "object stores"]
            .into_iter()
            .chain(gpu_stack.into_iter().filter(|_| gpu))
        {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        // without a GPU: one line saying so, no GPU-stack check, no warning, no sudo advice
        if !gpu {
            assert!(names.contains(&"GPU"), "{names:?}");
            assert!(gpu_stack.iter().all(|g| !names.contains(g)), "{names:?}");
            // (a build without the object-store feature says so in a warning of its own)
            assert!(
                (checks.iter()).all(|c| c.status == Status::Ok || c.name == "object stores"),
                "{checks:#?}"
            );
            assert!(checks.iter().all(|c| !c.to_string().contains("sudo")));
            let path = checks
                .iter()
                .find(|c| c.name == "path for a 1 MiB range")
                .unwrap();
            assert!(path.detail.contains("host memory"), "{}", path.detail);
        }
    }
}
