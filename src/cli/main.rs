//! `cuparquet`: inspect, plan and load Parquet files into host or GPU memory.
//!
//! Exit codes: 0 success; 2 usage error; 1 any other error, printed as one line naming the file
//! and the cause.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use cuparquet::config::CompatMode;
use cuparquet::io::IoPath;
use cuparquet::metadata::read_metadata;
use cuparquet::plan::{human_bytes, parse_row_groups, plan, Selection};
use cuparquet::source::ParquetFile;
use cuparquet::{Device, Error, LoadReport, ParquetGpuReader};

#[derive(Parser, Debug)]
#[command(
    name = "cuparquet",
    version,
    about = "Load Parquet columns into GPU (or host) memory as Arrow arrays"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Check this machine: CUDA, cuFile, nvidia-fs, udev, cufile.json, settings, ceilings — and
    /// say which path loads will take and why.
    Doctor {
        /// A file or directory on the filesystem the data lives on (for the udev check).
        #[arg(long, default_value = ".")]
        path: PathBuf,
        /// Skip the throughput measurement.
        #[arg(long)]
        no_bench: bool,
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show schema, row groups and column chunks (types, encodings, codec, sizes, statistics).
    Inspect {
        /// Parquet file.
        file: PathBuf,
        /// Leave out per-column-chunk details.
        #[arg(long)]
        brief: bool,
    },
    /// Show the byte ranges a selection needs, and how they are coalesced into requests.
    Plan {
        /// Parquet file.
        file: PathBuf,
        #[command(flatten)]
        sel: SelectionArgs,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load a selection and print what happened.
    Load {
        /// Parquet file.
        file: PathBuf,
        #[command(flatten)]
        sel: SelectionArgs,
        /// Target: auto, host, cuda or cuda:N.
        #[arg(long, default_value = "auto", value_parser = parse_device)]
        device: Device,
        /// Write the loaded data as an Arrow IPC file.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Add every I/O request with its path, size and time.
        #[arg(long)]
        report: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
        /// Maximum rows per batch.
        #[arg(long)]
        batch_rows: Option<usize>,
        /// Keep dictionaries: string/binary columns stored with one load as
        /// Dictionary(Int32, _) arrays.
        #[arg(long)]
        keep_dictionaries: bool,
        /// Switches for measuring alternatives, as comma-separated key=value pairs applied over
        /// CUPARQUET_TUNING, e.g. `snappy=host,decode_threads=3,wave_bytes=0` (keys:
        /// bounce_buffer_count, wave_bytes, decode_threads, snappy; see the crate docs).
        #[arg(long)]
        tuning: Option<String>,
        /// Reader threads (default: CUPARQUET_NTHREADS or the number of cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Piece size for large requests, e.g. 4MiB (default: CUPARQUET_TASK_SIZE or 4MiB).
        #[arg(long, value_parser = parse_size_arg)]
        task_size: Option<u64>,
        /// Read with O_DIRECT, bypassing the page cache.
        #[arg(long)]
        direct_io: bool,
        /// Device targets: when cuFile may be used: auto, on (never) or off (always; an error
        /// when it cannot be). Default: CUPARQUET_COMPAT_MODE or auto.
        #[arg(long, value_parser = parse_compat)]
        compat_mode: Option<CompatMode>,
    },
}

#[derive(Args, Debug)]
struct SelectionArgs {
    /// Columns: names or dotted paths, comma separated (`a`.`b` for a name with dots).
    #[arg(long, short)]
    columns: Option<String>,
    /// Row-group pruning predicate, e.g. "x > 5 AND (y = 'k' OR z <= 2.5)". Prunes row groups
    /// by statistics; does not filter rows.
    #[arg(long, short)]
    filter: Option<String>,
    /// Row groups, e.g. 0,2-4.
    #[arg(long, value_parser = parse_row_group_list)]
    row_groups: Option<RowGroupList>,
    /// Load the page index and record page locations.
    #[arg(long)]
    page_index: bool,
}

impl SelectionArgs {
    fn selection(&self) -> Selection {
        Selection {
            columns: self.columns.as_deref().map(split_columns),
            row_groups: self.row_groups.as_ref().map(|r| r.0.clone()),
            filter: self.filter.clone(),
        }
    }
}

/// `--row-groups 0,2-4`, as one value (a bare `Vec` would be taken as repeated values).
#[derive(Debug, Clone)]
struct RowGroupList(Vec<usize>);

fn parse_row_group_list(s: &str) -> Result<RowGroupList, String> {
    parse_row_groups(s).map(RowGroupList)
}

fn parse_device(s: &str) -> Result<Device, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

fn parse_compat(s: &str) -> Result<CompatMode, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    cuparquet::config::parse_size("--task-size", s).map_err(|e| e.to_string())
}

/// Splits on commas outside backquotes.
fn split_columns(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out.retain(|c| !c.is_empty());
    out
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let file = match &cli.cmd {
        Cmd::Inspect { file, .. } | Cmd::Plan { file, .. } | Cmd::Load { file, .. } => {
            file.display().to_string()
        }
        Cmd::Doctor { path, .. } => path.display().to_string(),
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let mut msg = e.to_string().replace('\n', " ");
            // Every error names the file, also those that are about a setting or the device.
            if !msg.contains(&file) {
                msg = format!("{file}: {msg}");
            }
            eprintln!("cuparquet: error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.cmd {
        Cmd::Doctor {
            path,
            no_bench,
            json,
        } => Ok(doctor(&path, !no_bench, json)),
        Cmd::Inspect { file, brief } => inspect(&file, brief).map(|()| ExitCode::SUCCESS),
        Cmd::Plan { file, sel, json } => {
            let f = ParquetFile::open(&file)?;
            let meta = read_metadata(&f, sel.page_index)?;
            let p = plan(&file, &meta, &sel.selection())?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&p).map_err(|e| out_err(&file, e))?
                );
            } else {
                print!("{p}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Load {
            file,
            sel,
            device,
            output,
            report,
            json,
            quiet,
            batch_rows,
            keep_dictionaries,
            tuning,
            threads,
            task_size,
            direct_io,
            compat_mode,
        } => {
            let mut b = ParquetGpuReader::builder(&file)
                .with_device(device)
                .with_page_index(sel.page_index);
            let s = sel.selection();
            if let Some(c) = s.columns {
                b = b.with_columns(c);
            }
            if let Some(r) = s.row_groups {
                b = b.with_row_groups(r);
            }
            if let Some(f) = s.filter {
                b = b.with_filter(f);
            }
            if let Some(n) = batch_rows {
                b = b.with_batch_rows(n);
            }
            if keep_dictionaries {
                b = b.with_keep_dictionaries(true);
            }
            if let Some(t) = tuning {
                b = b.with_tuning(cuparquet::config::Tuning::from_env()?.with_pairs(&t)?);
            }
            if let Some(n) = threads {
                b = b.with_nthreads(n);
            }
            if let Some(t) = task_size {
                b = b.with_task_size(t);
            }
            if direct_io {
                b = b.with_direct_io(true);
            }
            if let Some(m) = compat_mode {
                b = b.with_compat_mode(m);
            }
            let bar = (!quiet && !json).then(ProgressBar::new);
            if let Some(bar) = &bar {
                let bar = bar.clone();
                b = b.with_progress(move |p| bar.update(p));
            }
            let reader = b.build()?;
            let loaded = reader.load();
            if let Some(bar) = &bar {
                bar.finish();
            }
            let loaded = loaded?;
            if let Some(out) = &output {
                // device batches are copied back (`to_host`): the file is what is on the device
                write_ipc(out, &loaded)?;
            }
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&loaded.report).map_err(|e| out_err(&file, e))?
                );
            } else if !quiet {
                print!("{}", summary(&loaded.report, report, output.as_deref()));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exit 0 unless a check fails (no GPU is a warning, not a failure).
fn doctor(path: &Path, bench: bool, json: bool) -> ExitCode {
    use cuparquet::doctor::{run, DoctorOptions, Status};
    let checks = run(&DoctorOptions {
        path: path.to_path_buf(),
        bench,
    });
    if json {
        match serde_json::to_string_pretty(&checks) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("cuparquet: error: doctor: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        for c in &checks {
            println!("{c}");
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if failed > 0 {
        eprintln!("cuparquet: error: doctor: {failed} check(s) failed");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn out_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn write_ipc(out: &Path, loaded: &cuparquet::Loaded) -> Result<(), Error> {
    let schema = loaded
        .batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| loaded.schema.clone());
    let f = std::fs::File::create(out).map_err(|e| out_err(out, e))?;
    let mut w = arrow::ipc::writer::FileWriter::try_new(std::io::BufWriter::new(f), &schema)
        .map_err(|e| out_err(out, e))?;
    let dictionaries = schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), arrow::datatypes::DataType::Dictionary(..)));
    if dictionaries {
        // an IPC file holds one dictionary per field: join the batches (row groups have
        // dictionaries of their own) into one, whose dictionaries are merged
        let host = loaded.to_host()?;
        let one = arrow::compute::concat_batches(&schema, &host).map_err(|e| out_err(out, e))?;
        w.write(&one).map_err(|e| out_err(out, e))?;
    } else {
        for b in &loaded.batches {
            w.write(&b.to_host()?).map_err(|e| out_err(out, e))?;
        }
    }
    w.finish().map_err(|e| out_err(out, e))?;
    let mut inner = w.into_inner().map_err(|e| out_err(out, e))?;
    inner.flush().map_err(|e| out_err(out, e))?;
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn summary(r: &LoadReport, requests: bool, output: Option<&Path>) -> String {
    let mut s = String::new();
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
    if let Some(g) = &r.gpu_decode {
        let on_gpu = g.fields.iter().filter(|f| f.on_gpu).count();
        let _ = writeln!(
            s,
            "  decoded on {}: {on_gpu} of {} fields by the GPU kernels{}{}",
            r.device.location,
            g.fields.len(),
            if g.host_decompressed_pages > 0 {
                format!(
                    ", {} pages decompressed on the host first",
                    g.host_decompressed_pages
                )
            } else {
                String::new()
            },
            if output.is_some() {
                "; --output wrote a device→host copy"
            } else {
                ""
            }
        );
        for h in &g.host_decompressed {
            let _ = writeln!(
                s,
                "  field '{}': {} {} pages decompressed on the host, then decoded by the GPU",
                h.field, h.pages, h.codec
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
        "  wall {} (summed over threads: io {}, decode {}; footer+plan {}), {:.2} GB/s read, Arrow output {}",
        ms(r.load_time),
        ms(r.io_time),
        ms(r.decode_time),
        ms(r.setup_time),
        r.read_throughput() / 1e9,
        human_bytes(r.output_bytes)
    );
    if r.device.location != cuparquet::array::Location::Host {
        // gds_stats-style totals: cuFile's own counters, then what did not go through cuFile.
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
    let _ = writeln!(
        s,
        "  settings: {} threads, task size {}, O_DIRECT {}{}",
        r.settings.nthreads,
        human_bytes(r.settings.task_size),
        if r.settings.direct_io { "on" } else { "off" },
        if r.device.location == cuparquet::array::Location::Host {
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
    if let Some(o) = output {
        let _ = writeln!(s, "  wrote {}", o.display());
    }
    if requests {
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
    s
}

fn inspect(path: &Path, brief: bool) -> Result<(), Error> {
    let f = ParquetFile::open(path)?;
    let meta = read_metadata(&f, false)?;
    let md = &meta.metadata;
    let fm = md.file_metadata();
    let mut s = String::new();
    let _ = writeln!(s, "file: {} ({} bytes)", path.display(), meta.file_len);
    let _ = writeln!(
        s,
        "format version {}, created by {}, {} rows, {} row groups, footer {} bytes",
        fm.version(),
        fm.created_by().unwrap_or("(unknown)"),
        fm.num_rows(),
        md.num_row_groups(),
        meta.footer_len
    );
    let mut schema = Vec::new();
    parquet::schema::printer::print_schema(&mut schema, fm.schema());
    let _ = writeln!(
        s,
        "schema:\n{}",
        String::from_utf8_lossy(&schema).trim_end()
    );
    for (i, rg) in md.row_groups().iter().enumerate() {
        let _ = writeln!(
            s,
            "row group {i}: {} rows, {} compressed, {} uncompressed",
            rg.num_rows(),
            human_bytes(rg.compressed_size().max(0) as u64),
            human_bytes(rg.total_byte_size().max(0) as u64)
        );
        if brief {
            continue;
        }
        for cc in rg.columns() {
            let d = cc.column_descr();
            let logical = d
                .logical_type_ref()
                .map(|l| format!(" / {l:?}"))
                .unwrap_or_default();
            let enc: Vec<String> = cc.encodings().map(|e| e.to_string()).collect();
            let _ = writeln!(
                s,
                "  {}: {}{} | {} | {} | {} → {} | offset {}{}",
                cc.column_path().string(),
                cc.column_type(),
                logical,
                enc.join(","),
                cuparquet::plan::codec_name(cc.compression()),
                cc.compressed_size(),
                cc.uncompressed_size(),
                cc.data_page_offset(),
                cc.dictionary_page_offset()
                    .map(|o| format!(" (dictionary {o})"))
                    .unwrap_or_default(),
            );
            let stats = match cc.statistics() {
                Some(st) => format!("{st}"),
                None => "none".into(),
            };
            let _ = writeln!(
                s,
                "      values {}, statistics {}, page index {}, bloom filter {}",
                cc.num_values(),
                stats,
                match (cc.column_index_offset(), cc.offset_index_offset()) {
                    (Some(_), Some(_)) => "column+offset",
                    (None, Some(_)) => "offset only",
                    (Some(_), None) => "column only",
                    (None, None) => "no",
                },
                if cc.bloom_filter_offset().is_some() {
                    "yes"
                } else {
                    "no"
                }
            );
        }
    }
    print!("{s}");
    Ok(())
}

/// A progress bar on stderr that appears only for loads that take longer than about a second.
#[derive(Clone)]
struct ProgressBar {
    bar: indicatif::ProgressBar,
    finished: Arc<AtomicBool>,
}

impl ProgressBar {
    fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::hidden(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {msg:>8} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        let finished = Arc::new(AtomicBool::new(false));
        let (b, f) = (bar.clone(), finished.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            if !f.load(Ordering::Relaxed) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
        });
        ProgressBar { bar, finished }
    }

    fn update(&self, p: cuparquet::reader::Progress) {
        self.bar.set_length(p.bytes_total.max(1));
        if p.bytes_read < p.bytes_total || p.row_groups_done == 0 {
            self.bar.set_message("reading");
            self.bar.set_position(p.bytes_read);
        } else {
            self.bar.set_message("decoding");
            let frac = p.row_groups_done as f64 / p.row_groups_total.max(1) as f64;
            self.bar.set_position((frac * p.bytes_total as f64) as u64);
        }
    }

    fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
        self.bar.finish_and_clear();
    }
}
