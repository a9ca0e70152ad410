//! `cuparquet-sql` (what `cuparquet sql` runs): SQL over Parquet files and directories through
//! cuparquet's DataFusion provider, the result printed as a table.
//!
//! ```text
//! cuparquet-sql [--table NAME=PATH]... [--device auto|host|cuda:N] [--option KEY=VALUE]...
//!               [--csv] QUERY [PATH]
//! ```
//!
//! `--table` registers a file, directory or URL as a table (`register_gpu_parquet`); a lone
//! PATH after the query is the table `t`. `CREATE EXTERNAL TABLE … STORED AS GPUPARQUET`
//! works too. `--option` sets a `GpuScanOptions` key (`batch_rows`, `memory_budget`,
//! `row_filter`, …). Exit status 0, 1 for a query that fails (its error on stderr), 2 for bad
//! arguments.

use std::process::ExitCode;

use cuparquet_datafusion::{register_gpu_parquet, register_gpu_parquet_format, GpuScanOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;

const USAGE: &str = "usage: cuparquet sql [--table NAME=PATH]... [--device auto|host|cuda:N] \
                     [--option KEY=VALUE]... [--csv] QUERY [PATH]";

struct Args {
    tables: Vec<(String, String)>,
    options: GpuScanOptions,
    csv: bool,
    query: String,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut tables = Vec::new();
    let mut options = GpuScanOptions::default();
    let (mut csv, mut positional) = (false, Vec::new());
    let pair = |flag: &str, v: Option<String>| -> Result<(String, String), String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        let (k, x) = v
            .split_once('=')
            .ok_or_else(|| format!("{flag} {v}: expected KEY=VALUE"))?;
        Ok((k.trim().to_string(), x.trim().to_string()))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--table" | "-t" => tables.push(pair("--table", it.next())?),
            "--option" | "-o" => {
                let (k, v) = pair("--option", it.next())?;
                options
                    .set(&k, &v)
                    .map_err(|e| format!("--option {k}={v}: {e}"))?;
            }
            "--device" | "-d" => {
                let v = it.next().ok_or("--device needs a value")?;
                options
                    .set("device", &v)
                    .map_err(|e| format!("--device {v}: {e}"))?;
            }
            "--csv" => csv = true,
            "-h" | "--help" => return Err(String::new()),
            _ if a.starts_with('-') && a.len() > 1 => return Err(format!("unknown option {a}")),
            _ => positional.push(a),
        }
    }
    let mut positional = positional.into_iter();
    let query = positional.next().ok_or("no query given")?;
    if let Some(path) = positional.next() {
        tables.push(("t".into(), path));
    }
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument {extra}"));
    }
    Ok(Args {
        tables,
        options,
        csv,
        query,
    })
}

async fn run(args: Args) -> datafusion::error::Result<String> {
    let ctx = SessionContext::new();
    register_gpu_parquet_format(&ctx)?;
    for (name, path) in &args.tables {
        register_gpu_parquet(&ctx, name, path, args.options.clone()).await?;
    }
    let batches = ctx.sql(&args.query).await?.collect().await?;
    if args.csv {
        let mut out = Vec::new();
        let mut w = arrow_csv::WriterBuilder::new()
            .with_header(true)
            .build(&mut out);
        for b in &batches {
            w.write(b)?;
        }
        drop(w);
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    Ok(format!("{}\n", pretty_format_batches(&batches)?))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("cuparquet sql: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cuparquet sql: error: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(args)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cuparquet sql: error: {}", e.to_string().replace('\n', " "));
            ExitCode::from(1)
        }
    }
}
