//! `cuparquet`: inspect, plan and load Parquet files into host or GPU memory.
//!
//! Exit codes: 0 success (also when stdout is closed early, as by `| head`); 2 usage error (the
//! command line, a filter, a column, a row group or a setting that cannot be used, with what to
//! do instead); 1 any other error, printed as one line naming the file and the cause.
//!
//! This file holds the command line (clap), `main` (errors → exit codes) and `run`, which hands
//! each command to its module: `inspect`, `doctor`, and for `load` the `progress` bar, the
//! `output` file and the `summary` printed at the end.

/// `print!` to stdout that ends the process quietly, with exit code 0, when stdout has been
/// closed (`cuparquet inspect big.parquet | head`).
macro_rules! out {
    ($($t:tt)*) => {
        $crate::output::emit(&format!($($t)*))
    };
}

mod doctor;
mod inspect;
mod output;
mod progress;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use cuparquet::config::CompatMode;
use cuparquet::metadata::read_metadata;
use cuparquet::plan::{parse_row_groups, plan, Selection};
use cuparquet::source::ParquetFile;
use cuparquet::{Device, Error, Scan};

use crate::doctor::doctor;
use crate::inspect::inspect;
use crate::output::{out_err, Pending};
use crate::progress::ProgressBar;
use crate::summary::summary;

#[derive(Parser, Debug)]
#[command(
    name = "cuparquet",
    version,
    about = "Load Parquet columns into GPU (or host) memory as Arrow arrays"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// A storage option of URL sources (s3://, gs://, az://, http(s)://; built with the
    /// `object-store` feature), KEY=VALUE, repeatable: the object_store builders' keys
    /// (aws_endpoint, aws_region, aws_allow_http, timeout, …), over the AWS_*, GOOGLE_* and
    /// AZURE_* environment variables.
    #[arg(long = "storage-option", global = true, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    storage_options: Vec<(String, String)>,
    /// GETs in flight at once per remote read (URL sources).
    #[arg(long, global = true, value_name = "N")]
    remote_concurrency: Option<usize>,
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("'{s}': expected KEY=VALUE")),
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Check this machine: CUDA, cuFile, nvidia-fs, udev, cufile.json, settings, ceilings — and
    /// say which path loads will take and why.
    Doctor {
        /// A file or directory on the filesystem the data lives on (for the udev check), or a
        /// URL of an object (a one-request latency probe of its store).
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
        /// Parquet files, directories or globs (each file's footer in turn).
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Leave out per-column-chunk details.
        #[arg(long)]
        brief: bool,
        /// Print the footer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// SQL over Parquet through the DataFusion provider: runs `cuparquet-sql` (built with
    /// cuparquet-datafusion, beside this binary), e.g.
    /// `cuparquet sql "SELECT count(*) FROM t" data/` or `--table name=PATH`.
    #[command(disable_help_flag = true)]
    Sql {
        /// The query, tables and options, as `cuparquet-sql` takes them (`--help` lists them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Print the first rows as a table (on the host; --where and --columns as for load).
    Head {
        /// Parquet files, directories or globs, as for load.
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// Rows to print.
        #[arg(short = 'n', long = "rows", default_value_t = 10)]
        rows: usize,
        #[command(flatten)]
        sel: SelectionArgs,
    },
    /// Show the byte ranges a selection needs, and how they are coalesced into requests.
    Plan {
        /// Parquet files or directories (their *.parquet files, sorted; names starting with _
        /// or . skipped). Several files must share one schema.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        sel: SelectionArgs,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        /// List every pruned row group with its reason (by default: a count and their ranges).
        #[arg(long, short = 'v')]
        verbose: bool,
        /// Also cut the plan into passes under this device-memory budget (e.g. 512MiB), each
        /// yielding batches of --batch-rows rows: what a device load under that budget reads
        /// together (one pass after the other when the whole load does not fit at once).
        #[arg(long, value_parser = parse_size_arg)]
        memory_budget: Option<u64>,
        /// Rows per batch for --memory-budget (default 1048576, as loads).
        #[arg(long, default_value_t = 1 << 20)]
        batch_rows: u64,
        /// With --memory-budget: batches do not span row groups (one dictionary per batch).
        #[arg(long)]
        keep_dictionaries: bool,
        /// With --memory-budget: spread the passes over these CUDA devices (e.g.
        /// cuda:0,cuda:1; `all`: every CUDA device here), each with that budget: which device would read, decode and hold each
        /// pass.
        #[arg(long, value_parser = parse_devices_arg, requires = "memory_budget")]
        devices: Option<DeviceList>,
    },
    /// Load a selection and print what happened.
    Load {
        /// Parquet files, directories (their *.parquet files at any depth, sorted, names
        /// starting with _ or . skipped; hive key=value directories give columns) or globs
        /// ('data/*/*.parquet'): read as one dataset, one schema.
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        sel: SelectionArgs,
        /// Target: auto, host (or cpu), cuda (= cuda:0) or cuda:N; gpu and gpu:N are aliases of
        /// cuda and cuda:N.
        #[arg(long, default_value = "auto", value_parser = parse_device)]
        device: Device,
        /// Write the loaded data to this file: an Arrow IPC file (.arrow), an IPC stream
        /// (.arrows), Parquet (.parquet) or CSV (.csv), as its extension or --format says.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// The format of --output, where its extension does not say it.
        #[arg(long, value_enum, requires = "output")]
        format: Option<output::Format>,
        /// Add every I/O request with its path, size and time.
        #[arg(long)]
        report: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
        /// Maximum rows per batch (default 1048576).
        #[arg(long)]
        batch_rows: Option<usize>,
        /// Device loads: the most device memory the load's own allocations may reach at once,
        /// e.g. 2GiB (default: CUPARQUET_MEMORY_BUDGET, else 80% of the device's free memory).
        #[arg(long, value_parser = parse_size_arg)]
        memory_budget: Option<u64>,
        /// Keep dictionaries: string/binary columns stored with one load as
        /// Dictionary(Int32, _) arrays.
        #[arg(long)]
        keep_dictionaries: bool,
        /// Spread the load over these CUDA devices (e.g. cuda:0,cuda:1; `all`: every CUDA
        /// device here): each pass of row
        /// groups (of every file, as one load) read, decoded and held by one of them, each with --memory-budget (else
        /// 80% of its free memory); prints what each device did.
        #[arg(long, value_parser = parse_devices_arg)]
        devices: Option<DeviceList>,
        /// Tuning for this machine, as comma-separated key=value pairs applied over
        /// CUPARQUET_TUNING, e.g. `wave_bytes=0,host_share=40` (keys: bounce_buffer_count,
        /// wave_bytes, host_share; see the crate docs).
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
        /// Not a setting: SNAPPY pages on the device kernel even where the decoder would send
        /// a small load's pages to the host's cores (for sanitizer runs over the kernels).
        #[arg(long, hide = true)]
        snappy_kernel: bool,
    },
}

#[derive(Args, Debug)]
struct SelectionArgs {
    /// Columns, comma separated: top-level names or dotted paths to nested fields (s.b); a
    /// name that itself contains dots in backquotes (`a.b`).
    #[arg(long, short)]
    columns: Option<String>,
    /// Row-group pruning predicate, e.g. "x > 5 AND (y = 'k' OR z <= 2.5)", with IS [NOT]
    /// NULL, [NOT] IN (…) and NOT; dates 'YYYY-MM-DD', timestamps
    /// 'YYYY-MM-DDTHH:MM:SS[.f][Z|±HH:MM]', decimals as numbers. Prunes row groups (and pages,
    /// with --page-index) by statistics; does not filter rows.
    #[arg(long, short)]
    filter: Option<String>,
    /// Row filter: only the rows where the predicate is true are loaded (SQL's WHERE; same
    /// language as --filter, which it implies for pruning). Evaluated on the GPU for device
    /// loads; columns it reads and --columns leaves out are left out of the output.
    #[arg(long = "where", short = 'w', value_name = "PREDICATE")]
    row_filter: Option<String>,
    /// Row groups, e.g. 0,2-4.
    #[arg(long, value_parser = parse_row_group_list)]
    row_groups: Option<RowGroupList>,
    /// Load the page index and record page locations.
    #[arg(long)]
    page_index: bool,
}

impl SelectionArgs {
    /// The selection asked for; `--columns` naming no column is a usage error.
    fn selection(&self) -> Result<Selection, Error> {
        let columns = self
            .columns
            .as_deref()
            .map(cuparquet::plan::split_column_list);
        if columns.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::Setting {
                name: "--columns".into(),
                value: self.columns.clone().unwrap_or_default(),
                reason: "names no column: give one or more names (or leave --columns out to \
                         load every column)"
                    .into(),
            });
        }
        Ok(Selection {
            columns,
            row_groups: self.row_groups.as_ref().map(|r| r.0.clone()),
            // what a row filter prunes, for the plan
            filter: match (&self.filter, &self.row_filter) {
                (Some(f), Some(w)) => Some(format!("({f}) AND ({w})")),
                (f, w) => f.clone().or_else(|| w.clone()),
            },
            rows: None,
        })
    }

    /// The plan of `path`'s selection, as a load makes it: with a row filter, the columns it
    /// tests read too and the plan saying that it filters rows.
    fn plan(
        &self,
        path: &std::path::Path,
        meta: &cuparquet::metadata::FileMetadata,
        remote: &cuparquet::config::RemoteSettings,
    ) -> Result<cuparquet::plan::ReadPlan, Error> {
        let mut sel = self.selection()?;
        let file = cuparquet::source::ParquetFile::open_sized(path, remote, meta.file_len)?;
        let bloom = |p: cuparquet::plan::ReadPlan, sel: &cuparquet::plan::Selection| {
            let coalesce = cuparquet::plan::CoalesceConfig::default();
            cuparquet::plan::bloom::prune_by_bloom_filters(path, meta, p, sel, &coalesce, &file)
        };
        let Some(w) = &self.row_filter else {
            return bloom(plan(path, meta, &sel)?, &sel);
        };
        let (text, columns) = cuparquet::plan::row_filter_columns(&meta.metadata, w)?;
        if let Some(cols) = &mut sel.columns {
            for c in columns {
                if !cols.contains(&c) {
                    cols.push(c);
                }
            }
        }
        let mut p = bloom(plan(path, meta, &sel)?, &sel)?;
        p.row_filter = Some(text);
        Ok(p)
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
    cuparquet::config::parse_size("size", s).map_err(|e| e.to_string())
}

/// CUDA device ordinals, each once (`--devices`).
#[derive(Debug, Clone)]
struct DeviceList(Vec<usize>);

/// A comma-separated list of CUDA devices (`cuda:N`, `gpu:N`, `cuda`), or `all` (every CUDA
/// device here): their ordinals, each once.
fn parse_devices_arg(s: &str) -> Result<DeviceList, String> {
    cuparquet::device::parse_device_list(s)
        .map(DeviceList)
        .map_err(|e| e.to_string())
}

/// Splits on commas outside backquotes.
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
        Cmd::Plan { files, .. }
        | Cmd::Load { files, .. }
        | Cmd::Head { files, .. }
        | Cmd::Inspect { files, .. } => files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Cmd::Doctor { path, .. } => path.display().to_string(),
        Cmd::Sql { .. } => "sql".to_string(),
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
            ExitCode::from(if is_usage(&e) { 2 } else { 1 })
        }
    }
}

/// Whether `e` is a usage error (exit code 2): what the command line asked for cannot be done
/// as asked — a filter, a column, a row group, a setting — rather than the file or the machine
/// failing.
fn is_usage(e: &Error) -> bool {
    matches!(
        e,
        Error::Filter { .. }
            | Error::UnknownColumn { .. }
            | Error::RowGroupSelection { .. }
            | Error::Setting { .. }
    )
}

fn run(cli: Cli) -> Result<ExitCode, Error> {
    let mut remote = cuparquet::config::RemoteSettings::default();
    remote.options.extend(cli.storage_options.iter().cloned());
    if let Some(n) = cli.remote_concurrency {
        remote.concurrency = n.max(1);
    }
    match cli.cmd {
        Cmd::Doctor {
            path,
            no_bench,
            json,
        } => Ok(doctor(&path, &remote, !no_bench, json)),
        Cmd::Inspect { files, brief, json } => {
            inspect(&files, &remote, brief, json).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Sql { args } => Ok(sql(&args)),
        Cmd::Head { files, rows, sel } => {
            let mut b = Scan::builder(&files)
                .with_device(Device::Host)
                .with_batch_rows(rows.clamp(1, 65_536))
                .with_storage_options(remote.options.clone())
                .with_remote_concurrency(remote.concurrency);
            let s = sel.selection()?;
            if let Some(c) = s.columns {
                b = b.with_columns(c);
            }
            if let Some(r) = s.row_groups {
                b = b.with_row_groups(r);
            }
            if let Some(f) = &sel.filter {
                b = b.with_filter(f);
            }
            if let Some(w) = &sel.row_filter {
                b = b.with_row_filter(w);
            }
            let scan = b.build()?;
            // the stream stops reading once it is dropped: only the first batches are read
            let mut batches = Vec::new();
            let mut have = 0;
            for batch in scan.batches() {
                if have >= rows {
                    break;
                }
                let batch = batch?.to_host()?;
                let take = batch.num_rows().min(rows - have);
                have += take;
                batches.push(batch.slice(0, take));
            }
            let table = arrow::util::pretty::pretty_format_batches(&batches)
                .map_err(|e| output::out_err(&files[0], e))?;
            if batches.is_empty() {
                let names: Vec<&str> = scan
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                out!("(no rows) columns: {}\n", names.join(", "));
            } else {
                out!("{table}\n");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Plan {
            files,
            sel,
            json,
            verbose,
            memory_budget,
            batch_rows,
            keep_dictionaries,
            devices,
        } => {
            let paths = cuparquet::source::expand_sources(&files, &remote)?;
            let mut plans = Vec::with_capacity(paths.len());
            let mut schemas = Vec::with_capacity(paths.len());
            for path in &paths {
                let f = ParquetFile::open_with(path, &remote)?;
                let meta = read_metadata(&f, sel.page_index)?;
                schemas.push((
                    path.clone(),
                    cuparquet::metadata::arrow_schema(path, &meta)?,
                ));
                // each footer is checked against the first as it is read: a mismatch stops here
                if let [first, .., last] = schemas.as_slice() {
                    cuparquet::metadata::merge_schemas(&[first.clone(), last.clone()])?;
                }
                let p = sel.plan(path, &meta, &remote)?;
                let passes_of =
                    |p: &cuparquet::plan::ReadPlan, meta: &cuparquet::metadata::FileMetadata| {
                        memory_budget
                            .map(|b| {
                                cuparquet::plan::load_passes(
                                    path,
                                    p,
                                    &meta.metadata,
                                    b,
                                    batch_rows,
                                    keep_dictionaries,
                                )
                            })
                            .transpose()
                    };
                // a row group too large: in pieces by pages, as a load does, with the page
                // index (read now), or one built from the headers where the file has none
                let (mut meta, mut p) = (meta, p);
                let passes = loop {
                    match passes_of(&p, &meta) {
                        Err(cuparquet::Error::MemoryBudget { .. }) if !meta.page_index_loaded => {
                            meta = read_metadata(&f, true)?;
                        }
                        Err(
                            e @ cuparquet::Error::MemoryBudget {
                                row_group, budget, ..
                            },
                        ) => {
                            match cuparquet::plan::header_index_for_budget(
                                &f, &meta, &p, row_group, budget,
                            )? {
                                Some(m) => meta = m,
                                None => return Err(e),
                            }
                        }
                        passes => break passes?,
                    }
                    p = sel.plan(path, &meta, &remote)?;
                };
                plans.push((path.clone(), p, passes));
            }
            let single = files.len() == 1 && paths.len() == 1 && paths[0] == files[0];
            let first = paths[0].clone();
            let spread = match (&devices, memory_budget) {
                (Some(DeviceList(ordinals)), Some(budget)) => {
                    let budgets = cuparquet::plan::devices::device_budgets(ordinals, budget)?;
                    let passes: Vec<(PathBuf, cuparquet::plan::PassPlan)> = plans
                        .iter()
                        .filter_map(|(path, _, passes)| Some((path.clone(), passes.clone()?)))
                        .collect();
                    Some(cuparquet::plan::devices::spread_passes(&passes, &budgets)?)
                }
                _ => None,
            };
            if json {
                let one = |p: &cuparquet::plan::ReadPlan,
                           passes: &Option<cuparquet::plan::PassPlan>|
                 -> serde_json::Result<serde_json::Value> {
                    let mut v = serde_json::to_value(p)?;
                    if let Some(passes) = passes {
                        v["passes"] = serde_json::to_value(passes)?;
                    }
                    Ok(v)
                };
                let v = if single {
                    one(&plans[0].1, &plans[0].2)
                } else {
                    plans
                        .iter()
                        .map(|(path, p, passes)| {
                            let mut v = one(p, passes)?;
                            v["file"] = serde_json::Value::String(path.display().to_string());
                            Ok(v)
                        })
                        .collect::<serde_json::Result<Vec<_>>>()
                        .map(|files| serde_json::json!({ "files": files }))
                };
                let v = match &spread {
                    Some(spread) => v.and_then(|mut v| {
                        v["devices"] = serde_json::to_value(spread)?;
                        Ok(v)
                    }),
                    None => v,
                };
                let text = v
                    .and_then(|v| serde_json::to_string_pretty(&v))
                    .map_err(|e| out_err(&first, e))?;
                out!("{text}\n");
            } else {
                if !single {
                    let rows: u64 = plans.iter().map(|(_, p, _)| p.num_rows).sum();
                    out!(
                        "{} files, one schema ({} fields), {rows} rows selected\n",
                        plans.len(),
                        schemas[0].1.fields().len()
                    );
                }
                for (path, p, passes) in &plans {
                    if !single {
                        out!("file: {}\n", path.display());
                    }
                    if verbose {
                        out!("{p:#}");
                    } else {
                        out!("{p}");
                    }
                    if let Some(passes) = passes {
                        out!("{passes}");
                    }
                }
                if let Some(spread) = &spread {
                    out!("{spread}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Load {
            files,
            sel,
            device,
            output,
            format,
            report,
            json,
            quiet,
            batch_rows,
            memory_budget,
            keep_dictionaries,
            devices,
            tuning,
            threads,
            task_size,
            direct_io,
            compat_mode,
            snappy_kernel,
        } => {
            let file = files[0].clone();
            let mut b = Scan::builder(&files)
                .with_device(device)
                .with_page_index(sel.page_index)
                .with_storage_options(remote.options.clone())
                .with_remote_concurrency(remote.concurrency);
            let s = sel.selection()?;
            if let Some(c) = s.columns {
                b = b.with_columns(c);
            }
            if let Some(r) = s.row_groups {
                b = b.with_row_groups(r);
            }
            if let Some(f) = &sel.filter {
                b = b.with_filter(f);
            }
            if let Some(w) = &sel.row_filter {
                b = b.with_row_filter(w);
            }
            if let Some(n) = batch_rows {
                b = b.with_batch_rows(n);
            }
            if let Some(m) = memory_budget {
                b = b.with_memory_budget(m);
            }
            if keep_dictionaries {
                b = b.with_keep_dictionaries(true);
            }
            if let Some(t) = tuning {
                b = b.with_tuning(
                    cuparquet::config::Tuning::from_env()?.with_pairs_from("--tuning", &t)?,
                );
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
            if snappy_kernel {
                b = b.with_snappy_placement(cuparquet::internals::gpu::SnappyPlacement::Device);
            }
            let bar = (!quiet && !json).then(ProgressBar::new);
            if let Some(bar) = &bar {
                let bar = bar.clone();
                b = b.with_progress(move |p| bar.update(p));
            }
            // the output's temporary file first: a missing directory fails before any read
            let pending = match &output {
                Some(o) => Some(Pending::create(o, output::Format::of(o, format)?)?),
                None => None,
            };
            let spread = devices.is_some();
            if let Some(DeviceList(ordinals)) = devices {
                b = b.with_devices(ordinals);
            }
            let scan = b.build()?;
            // one file named as itself (not a directory or a glob standing for one)
            let single =
                files.len() == 1 && scan.files().len() == 1 && scan.files()[0].path() == file;
            let loaded = scan.load();
            if let Some(bar) = &bar {
                bar.finish();
            }
            let l = loaded?;
            if memory_budget.is_some()
                && scan.location() == cuparquet::array::Location::Host
                && !quiet
            {
                // said on stderr, so that --json stays one document
                eprintln!(
                    "cuparquet: note: --memory-budget bounds device memory; this load went to host \
                     memory and ignored it (host loads hold one batch per thread in flight)"
                );
            }
            if let Some(out) = pending {
                // device batches are copied back (`to_host`): the file is what is on the device
                out.finish(&l.batches, &l.schema)?;
            }
            if spread {
                let rows = l.report.rows();
                let files: Vec<String> = (scan.files().iter())
                    .map(|f| f.path().display().to_string())
                    .collect();
                let passes = scan.spread().map(|s| s.to_string()).unwrap_or_default();
                if json {
                    let v = serde_json::json!({
                        "files": files,
                        "rows": rows,
                        "wall_s": l.report.wall.as_secs_f64(),
                        "devices": l.report.devices,
                        "spread": scan.spread(),
                    });
                    let text = serde_json::to_string_pretty(&v).map_err(|e| out_err(&file, e))?;
                    out!("{text}\n");
                } else if !quiet {
                    out!(
                        "loaded {rows} rows of {} in {:.1} ms over {} devices\n{}",
                        if single {
                            file.display().to_string()
                        } else {
                            format!("{} files", files.len())
                        },
                        l.report.wall.as_secs_f64() * 1e3,
                        l.report.devices.len(),
                        passes
                    );
                    for d in &l.report.devices {
                        out!(
                            "  {}: {} pass{}, {} rows, {} read, {} of Arrow output, {:.1} ms of loads\n",
                            d.device,
                            d.passes,
                            if d.passes == 1 { "" } else { "es" },
                            d.rows,
                            cuparquet::plan::human_bytes(d.bytes_read),
                            cuparquet::plan::human_bytes(d.output_bytes),
                            d.time.as_secs_f64() * 1e3
                        );
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let (schema, reports) = (l.schema, l.report.loads);
            if json {
                let v = if single {
                    serde_json::to_value(&reports[0])
                } else {
                    serde_json::to_value(&reports).map(|files| {
                        serde_json::json!({
                            "files": files,
                            "rows": reports.iter().map(|r| r.rows).sum::<u64>(),
                            "output_bytes": reports.iter().map(|r| r.output_bytes).sum::<u64>(),
                        })
                    })
                };
                let v = v.map_err(|e| out_err(&file, e))?;
                out!(
                    "{}\n",
                    serde_json::to_string_pretty(&v).map_err(|e| out_err(&file, e))?
                );
            } else if !quiet {
                // one "wrote" line, after the last file's summary
                for (i, r) in reports.iter().enumerate() {
                    let last = i + 1 == reports.len();
                    let output = output.as_deref().filter(|_| last && single);
                    out!("{}", summary(r, report, output));
                }
                if !single {
                    let rows: u64 = reports.iter().map(|r| r.rows).sum();
                    let bytes: u64 = reports.iter().map(|r| r.output_bytes).sum();
                    let wall: f64 = reports.iter().map(|r| r.load_time.as_secs_f64()).sum();
                    out!(
                        "{} files, one schema of {} columns: {rows} rows, Arrow output {}, load \
                         wall {:.2} ms in all\n",
                        reports.len(),
                        schema.fields().len(),
                        cuparquet::config::human_bytes(bytes),
                        wall * 1e3
                    );
                    if let Some(o) = &output {
                        out!("wrote {}\n", o.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `cuparquet sql`: `cuparquet-sql` beside this binary (else on the PATH) with `args`; its
/// exit status, or 1 with a line saying how to build it.
fn sql(args: &[String]) -> ExitCode {
    let beside = std::env::current_exe()
        .ok()
        .map(|e| e.with_file_name("cuparquet-sql"))
        .filter(|p| p.exists());
    let exe = beside.unwrap_or_else(|| PathBuf::from("cuparquet-sql"));
    match std::process::Command::new(&exe).args(args).status() {
        Ok(s) => ExitCode::from(s.code().map_or(1, |c| c.clamp(0, 255) as u8)),
        Err(e) => {
            eprintln!(
                "cuparquet: error: sql runs cuparquet-sql, the DataFusion provider's binary ({}: \
                 {e}); build it beside this one with `cargo build -p cuparquet-datafusion` (the \
                 same profile)",
                exe.display()
            );
            ExitCode::from(1)
        }
    }
}
