//! What `cuparquet load` prints when it is done: a few lines on what was loaded, where and how fast,
//! and with `--report` the GPU decode stages and every I/O request.
//!
//! Each section is one helper that appends its lines; [`summary`] puts them in order.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use cuparquet::array::Location;
use cuparquet::io::IoPath;
use cuparquet::plan::human_bytes;
use cuparquet::scan::GpuDecodeReport;
use cuparquet::LoadReport;

/// A duration in milliseconds, two decimals: `1.59 ms`.
fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// The load summary; `requests` (`--report`) adds the GPU decode details and the request table,
/// `output` is the `--output` file, if one was written.
pub(crate) fn summary(r: &LoadReport, requests: bool, output: Option<&Path>) -> String {
    let mut s = String::new();
    loaded(&mut s, r);
    if let Some(g) = &r.gpu_decode {
        gpu_decode(&mut s, r, g, requests, output);
    }
    bytes_and_time(&mut s, r);
    if r.device.location != Location::Host {
        device_paths(&mut s, r);
    }
    settings(&mut s, r);
    if let Some(o) = output {
        let _ = writeln!(s, "  wrote {}", o.display());
    }
    if requests {
        request_table(&mut s, r);
    }
    s
}

/// What was loaded, to where, and how many bytes that took.
fn loaded(s: &mut String, r: &LoadReport) {
    let _ = writeln!(
        s,
        "loaded {} → {} ({})",
        r.path.display(),
        r.device.location,
        r.device.reason
    );
    let _ = writeln!(
        s,
        "  rows {}, columns {} ({} leaf), row groups {}",
        r.rows, r.columns, r.leaf_columns, r.row_groups
    );
    let _ = writeln!(
        s,
        "  bytes planned {} ({}), read {} in {} request{}; footer {} in {} read{}",
        r.bytes_planned,
        human_bytes(r.bytes_planned),
        human_bytes(r.bytes_read),
        r.io.requests.len(),
        if r.io.requests.len() == 1 { "" } else { "s" },
        human_bytes(r.footer_bytes),
        r.footer_reads,
        if r.footer_reads == 1 { "" } else { "s" },
    );
}

/// Which fields the GPU kernels decoded, which went through the host, and why.
fn gpu_decode(
    s: &mut String,
    r: &LoadReport,
    g: &GpuDecodeReport,
    requests: bool,
    output: Option<&Path>,
) {
    let on_gpu = g.fields.iter().filter(|f| f.on_gpu).count();
    let _ = writeln!(
        s,
        "  decoded on {}: {on_gpu} of {} fields by the GPU kernels{}{}",
        r.device.location,
        g.fields.len(),
        match (g.host_decompressed_pages, g.nvcomp_pages) {
            (0, 0) => String::new(),
            (h, 0) => format!(", {h} pages decompressed on the host first"),
            (0, n) => format!(", {n} pages decompressed by nvCOMP first"),
            (h, n) => format!(", {n} pages decompressed by nvCOMP and {h} on the host first"),
        },
        if output.is_some() {
            "; --output wrote a device→host copy"
        } else {
            ""
        }
    );
    // one line per codec and place: the fields whose pages went there
    let mut groups: Vec<(String, String, Vec<&str>, cuparquet::scan::PageCounts)> = Vec::new();
    for d in &g.decompressed {
        let places = d.pages.places();
        match groups.iter_mut().find(|x| x.0 == d.codec && x.1 == places) {
            Some(x) => {
                x.2.push(&d.field);
                x.3 += d.pages;
            }
            None => groups.push((d.codec.clone(), places, vec![&d.field], d.pages)),
        }
    }
    for (codec, _, names, p) in groups {
        let parts: Vec<String> = p
            .by_place()
            .map(|(place, n)| match place {
                "nvCOMP" => format!("{n} by nvCOMP"),
                "kernel" => format!("{n} by cuparquet's kernel"),
                _ => format!("{n} on the host"),
            })
            .collect();
        let _ = writeln!(
            s,
            "  {codec} pages decompressed {} (field{} {})",
            parts.join(", "),
            if names.len() == 1 { "" } else { "s" },
            names
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for f in g.fields.iter().filter(|f| !f.on_gpu) {
        let _ = writeln!(
            s,
            "  field '{}' decoded on the host, uploaded: {}",
            f.name, f.reason
        );
    }
    if requests && !g.stages.is_empty() {
        let stages: Vec<String> = g
            .stages
            .iter()
            .map(|(n, t)| format!("{n} {:.2} ms", t * 1e3))
            .collect();
        let _ = writeln!(s, "  GPU decode stages: {}", stages.join(", "));
    }
    if requests {
        for f in g.fields.iter().filter(|f| f.on_gpu) {
            let _ = writeln!(s, "  field '{}' decoded on the GPU: {}", f.name, f.reason);
        }
    }
}

/// Bytes by I/O path, then the times and throughput.
fn bytes_and_time(s: &mut String, r: &LoadReport) {
    let paths: Vec<String> =
        r.io.bytes_by_path()
            .iter()
            .map(|(p, b)| format!("{p} {}", human_bytes(*b)))
            .collect();
    let _ = writeln!(
        s,
        "  bytes per path: {}",
        if paths.is_empty() {
            "none".to_string()
        } else {
            paths.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "  wall {} (summed over threads: io {}, decode {}), {:.2} GB/s read, Arrow output {}",
        ms(r.load_time),
        ms(r.io_time),
        ms(r.decode_time),
        r.read_throughput() / 1e9,
        human_bytes(r.output_bytes)
    );
    let st = &r.setup;
    let kernels = if r.kernel_load_time.is_zero() {
        String::new()
    } else {
        format!(
            "; kernels made ready during the load {}",
            ms(r.kernel_load_time)
        )
    };
    let cuda = match r.device.location {
        Location::Cuda(_) => format!("CUDA driver and context {}, ", ms(st.cuda)),
        Location::Host => String::new(),
    };
    let _ = writeln!(
        s,
        "  setup {} before the load: {cuda}footer {}, plan {}, readers {}{kernels}",
        ms(r.setup_time),
        ms(st.footer),
        ms(st.plan),
        ms(st.readers),
    );
}

/// Device targets: cuFile's own counters (gds_stats-style totals), then what did not go through
/// cuFile, and why each path was taken.
fn device_paths(s: &mut String, r: &LoadReport) {
    let staged: u64 =
        r.io.requests
            .iter()
            .filter(|q| q.path == IoPath::Staged)
            .map(|q| q.range.end - q.range.start)
            .sum();
    let c = r.io.cufile.clone().unwrap_or_default();
    let _ = writeln!(
        s,
        "  cuFile: n={} nvfs={} posix={} bytes={} errors={}{}; staged bytes={}",
        c.reads,
        c.nvfs,
        c.posix,
        c.bytes,
        c.errors,
        if r.io.cufile.is_none() {
            " (not used)"
        } else {
            ""
        },
        staged
    );
    for d in &r.io.decisions {
        let _ = writeln!(
            s,
            "  path {}: {} request{}, {}: {}",
            d.path,
            d.requests,
            if d.requests == 1 { "" } else { "s" },
            human_bytes(d.bytes),
            d.reason
        );
    }
}

/// The reader settings the load ran with; device targets add the cuFile and staging ones.
fn settings(s: &mut String, r: &LoadReport) {
    let _ = writeln!(
        s,
        "  settings: {} threads, task size {}, O_DIRECT {}{}",
        r.settings.nthreads,
        human_bytes(r.settings.task_size),
        if r.settings.direct_io { "on" } else { "off" },
        if r.device.location == Location::Host {
            String::new()
        } else {
            format!(
                ", compat mode {}, gds threshold {}, bounce buffers {} × {} per thread",
                r.settings.compat_mode,
                human_bytes(r.settings.gds_threshold),
                r.settings.bounce_buffer_count,
                human_bytes(r.settings.bounce_buffer_size)
            )
        }
    );
}

/// `--report`: one line per I/O request.
fn request_table(s: &mut String, r: &LoadReport) {
    let _ = writeln!(s, "  requests:");
    let _ = writeln!(
        s,
        "  {:>5}  {:<8} {:>14} {:>12}  {:>6}  {:>10}",
        "#", "path", "offset", "bytes", "pieces", "time"
    );
    for q in &r.io.requests {
        let _ = writeln!(
            s,
            "  {:>5}  {:<8} {:>14} {:>12}  {:>6}  {:>10}",
            q.index,
            q.path.to_string(),
            q.range.start,
            q.range.end - q.range.start,
            q.pieces,
            ms(q.time)
        );
    }
}
