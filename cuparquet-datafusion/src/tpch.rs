//! TPC-H-like tables for tests and benchmarks: `lineitem`, `orders` and `customer` with the
//! columns and value distributions the usual queries filter and group on (return flags and
//! line statuses from the dates, ship modes, commit and receipt dates, market segments),
//! written by arrow-rs's Parquet writer with the properties given. Deterministic for a seed.
//!
//! It is not dbgen: text columns are short random words and prices follow TPC-H's formulas
//! only roughly. Results of the same query are comparable between scans of the same files,
//! not with published TPC-H answers.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Date32Array, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// 1992-01-01 as days since the epoch.
const START_DATE: i32 = 8035;
/// Order dates span 1992-01-01 .. 1998-08-02.
const ORDER_DAYS: i32 = 2405;
/// 1995-06-17: lines received after it are not returned, shipped after it are open.
const CURRENT_DATE: i32 = 9298;

const SHIP_MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const INSTRUCTIONS: [&str; 4] = [
    "DELIVER IN PERSON",
    "COLLECT COD",
    "NONE",
    "TAKE BACK RETURN",
];
const PRIORITIES: [&str; 5] = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];
const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "MACHINERY",
    "HOUSEHOLD",
];
const WORDS: [&str; 16] = [
    "furiously",
    "quickly",
    "carefully",
    "blithely",
    "slyly",
    "final",
    "regular",
    "express",
    "pending",
    "ironic",
    "deposits",
    "requests",
    "packages",
    "accounts",
    "theodolites",
    "foxes",
];

/// TPC-H Q1 (pricing summary): one scan of lineitem, a filter keeping almost every row, eight
/// aggregates over four groups.
pub const Q1: &str = "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
    sum(l_extendedprice) AS sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
    count(*) AS count_order
  FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval '90' day
  GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus";

/// TPC-H Q3 (shipping priority): customer ⋈ orders ⋈ lineitem.
pub const Q3: &str = "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue,
    o_orderdate, o_shippriority
  FROM customer, orders, lineitem
  WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
    AND o_orderdate < date '1995-03-15' AND l_shipdate > date '1995-03-15'
  GROUP BY l_orderkey, o_orderdate, o_shippriority
  ORDER BY revenue DESC, o_orderdate, l_orderkey LIMIT 10";

/// TPC-H Q6 (forecasting revenue change): a selective filter over four lineitem columns.
pub const Q6: &str = "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
  WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01'
    AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";

/// TPC-H Q12 (shipping modes and order priority): orders ⋈ lineitem with date and string
/// filters.
pub const Q12: &str = "SELECT l_shipmode,
    sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high,
    sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low
  FROM orders, lineitem
  WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
    AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
    AND l_receiptdate >= date '1994-01-01' AND l_receiptdate < date '1995-01-01'
  GROUP BY l_shipmode ORDER BY l_shipmode";

/// The directories the tables were written to, one per table.
#[derive(Debug, Clone)]
pub struct Tables {
    /// `lineitem/part-N.parquet`
    pub lineitem: PathBuf,
    /// `orders/part-N.parquet`
    pub orders: PathBuf,
    /// `customer/part-0.parquet`
    pub customer: PathBuf,
    /// Rows of lineitem (about four per order).
    pub lineitem_rows: usize,
}

/// The tables' names, each a directory of the same name under the directory they were written
/// to ([`write_tables`], [`bench_tables`]).
pub const TABLE_NAMES: [&str; 3] = ["lineitem", "orders", "customer"];

impl Tables {
    /// Registers the three tables in `ctx`, as [`register_tables`] does.
    pub async fn register(
        &self,
        ctx: &SessionContext,
        gpu: Option<&crate::GpuScanOptions>,
    ) -> Result<()> {
        for (name, dir) in
            TABLE_NAMES
                .into_iter()
                .zip([&self.lineitem, &self.orders, &self.customer])
        {
            register_one(ctx, name, dir, gpu).await?;
        }
        Ok(())
    }
}

/// Registers the tables written under `root` in `ctx`: scanned by cuparquet with `gpu`'s
/// options, or by DataFusion's own Parquet scan where `gpu` is `None` (the comparison the
/// tests and benchmarks make).
pub async fn register_tables(
    ctx: &SessionContext,
    root: &Path,
    gpu: Option<&crate::GpuScanOptions>,
) -> Result<()> {
    for name in TABLE_NAMES {
        register_one(ctx, name, &root.join(name), gpu).await?;
    }
    Ok(())
}

async fn register_one(
    ctx: &SessionContext,
    name: &str,
    dir: &Path,
    gpu: Option<&crate::GpuScanOptions>,
) -> Result<()> {
    // a directory, as DataFusion reads one: ending in `/`
    let dir = format!("{}/", dir.display());
    match gpu {
        Some(options) => crate::register_gpu_parquet(ctx, name, &dir, options.clone()).await,
        None => {
            ctx.register_parquet(name, dir, ParquetReadOptions::default())
                .await
        }
    }
}

/// Schema of `lineitem`.
pub fn lineitem_schema() -> SchemaRef {
    let money = DataType::Decimal128(15, 2);
    Arc::new(Schema::new(vec![
        Field::new("l_orderkey", DataType::Int64, false),
        Field::new("l_partkey", DataType::Int64, false),
        Field::new("l_suppkey", DataType::Int64, false),
        Field::new("l_linenumber", DataType::Int32, false),
        Field::new("l_quantity", money.clone(), false),
        Field::new("l_extendedprice", money.clone(), false),
        Field::new("l_discount", money.clone(), false),
        Field::new("l_tax", money, false),
        Field::new("l_returnflag", DataType::Utf8, false),
        Field::new("l_linestatus", DataType::Utf8, false),
        Field::new("l_shipdate", DataType::Date32, false),
        Field::new("l_commitdate", DataType::Date32, false),
        Field::new("l_receiptdate", DataType::Date32, false),
        Field::new("l_shipinstruct", DataType::Utf8, false),
        Field::new("l_shipmode", DataType::Utf8, false),
        Field::new("l_comment", DataType::Utf8, true),
    ]))
}

/// Schema of `orders`.
pub fn orders_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("o_orderkey", DataType::Int64, false),
        Field::new("o_custkey", DataType::Int64, false),
        Field::new("o_orderstatus", DataType::Utf8, false),
        Field::new("o_totalprice", DataType::Decimal128(15, 2), false),
        Field::new("o_orderdate", DataType::Date32, false),
        Field::new("o_orderpriority", DataType::Utf8, false),
        Field::new("o_shippriority", DataType::Int32, false),
        Field::new("o_comment", DataType::Utf8, true),
    ]))
}

/// Schema of `customer`.
pub fn customer_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("c_custkey", DataType::Int64, false),
        Field::new("c_name", DataType::Utf8, false),
        Field::new("c_nationkey", DataType::Int64, false),
        Field::new("c_acctbal", DataType::Decimal128(15, 2), false),
        Field::new("c_mktsegment", DataType::Utf8, false),
    ]))
}

fn comment(rng: &mut SmallRng) -> String {
    let n = rng.random_range(2..6);
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    s
}

/// The orders `first .. first + n` and their lines, as one batch of each table.
fn orders_and_lines(
    first: usize,
    n: usize,
    customers: usize,
    seed: u64,
) -> Result<(RecordBatch, RecordBatch)> {
    let mut rng =
        SmallRng::seed_from_u64(seed ^ (first as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut o = OrderCols::default();
    let mut l = LineCols::default();
    for i in first..first + n {
        let key = (i as i64 + 1) * 4 - 3; // sparse keys, as dbgen's
        let date = START_DATE + rng.random_range(0..ORDER_DAYS - 151);
        let lines = rng.random_range(1..=7);
        let mut total = 0i128;
        let mut open = 0;
        for ln in 1..=lines {
            let part = rng.random_range(1..=200_000i64);
            let qty = rng.random_range(1..=50i128);
            let price =
                qty * (90_000 + (part as i128 / 10) % 20_001 + 100 * (part as i128 % 1_000));
            let discount = rng.random_range(0..=10i128);
            let tax = rng.random_range(0..=8i128);
            let ship = date + rng.random_range(1..=121);
            let commit = date + rng.random_range(30..=90);
            let receipt = ship + rng.random_range(1..=30);
            let flag = if receipt <= CURRENT_DATE {
                if rng.random_bool(0.5) {
                    "R"
                } else {
                    "A"
                }
            } else {
                "N"
            };
            let status = if ship > CURRENT_DATE { "O" } else { "F" };
            open += usize::from(status == "O");
            total += price * (100 + tax) * (100 - discount) / 10_000;
            l.orderkey.push(key);
            l.partkey.push(part);
            l.suppkey.push(rng.random_range(1..=10_000));
            l.linenumber.push(ln);
            l.quantity.push(qty * 100);
            l.extendedprice.push(price);
            l.discount.push(discount);
            l.tax.push(tax);
            l.returnflag.push(flag);
            l.linestatus.push(status);
            l.shipdate.push(ship);
            l.commitdate.push(commit);
            l.receiptdate.push(receipt);
            l.shipinstruct
                .push(INSTRUCTIONS[rng.random_range(0..INSTRUCTIONS.len())]);
            l.shipmode
                .push(SHIP_MODES[rng.random_range(0..SHIP_MODES.len())]);
            l.comment
                .push((!rng.random_bool(0.01)).then(|| comment(&mut rng)));
        }
        o.orderkey.push(key);
        o.custkey.push(rng.random_range(1..=customers as i64));
        o.status.push(match open {
            0 => "F",
            x if x == lines as usize => "O",
            _ => "P",
        });
        o.totalprice.push(total);
        o.orderdate.push(date);
        o.priority
            .push(PRIORITIES[rng.random_range(0..PRIORITIES.len())]);
        o.shippriority.push(0);
        o.comment.push(Some(comment(&mut rng)));
    }
    Ok((o.finish()?, l.finish()?))
}

#[derive(Default)]
struct OrderCols {
    orderkey: Vec<i64>,
    custkey: Vec<i64>,
    status: Vec<&'static str>,
    totalprice: Vec<i128>,
    orderdate: Vec<i32>,
    priority: Vec<&'static str>,
    shippriority: Vec<i32>,
    comment: Vec<Option<String>>,
}

impl OrderCols {
    fn finish(self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(self.orderkey)),
            Arc::new(Int64Array::from(self.custkey)),
            Arc::new(StringArray::from(self.status)),
            Arc::new(money(self.totalprice)?),
            Arc::new(Date32Array::from(self.orderdate)),
            Arc::new(StringArray::from(self.priority)),
            Arc::new(Int32Array::from(self.shippriority)),
            Arc::new(StringArray::from(self.comment)),
        ];
        Ok(RecordBatch::try_new(orders_schema(), cols)?)
    }
}

#[derive(Default)]
struct LineCols {
    orderkey: Vec<i64>,
    partkey: Vec<i64>,
    suppkey: Vec<i64>,
    linenumber: Vec<i32>,
    quantity: Vec<i128>,
    extendedprice: Vec<i128>,
    discount: Vec<i128>,
    tax: Vec<i128>,
    returnflag: Vec<&'static str>,
    linestatus: Vec<&'static str>,
    shipdate: Vec<i32>,
    commitdate: Vec<i32>,
    receiptdate: Vec<i32>,
    shipinstruct: Vec<&'static str>,
    shipmode: Vec<&'static str>,
    comment: Vec<Option<String>>,
}

impl LineCols {
    fn finish(self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(self.orderkey)),
            Arc::new(Int64Array::from(self.partkey)),
            Arc::new(Int64Array::from(self.suppkey)),
            Arc::new(Int32Array::from(self.linenumber)),
            Arc::new(money(self.quantity)?),
            Arc::new(money(self.extendedprice)?),
            Arc::new(money(self.discount)?),
            Arc::new(money(self.tax)?),
            Arc::new(StringArray::from(self.returnflag)),
            Arc::new(StringArray::from(self.linestatus)),
            Arc::new(Date32Array::from(self.shipdate)),
            Arc::new(Date32Array::from(self.commitdate)),
            Arc::new(Date32Array::from(self.receiptdate)),
            Arc::new(StringArray::from(self.shipinstruct)),
            Arc::new(StringArray::from(self.shipmode)),
            Arc::new(StringArray::from(self.comment)),
        ];
        Ok(RecordBatch::try_new(lineitem_schema(), cols)?)
    }
}

fn money(v: Vec<i128>) -> Result<Decimal128Array> {
    Ok(Decimal128Array::from(v).with_precision_and_scale(15, 2)?)
}

/// Writes `orders` orders (and about four lines each) into `files` files per table under
/// `dir`, and a customer table of `orders / 10` customers, each file with `props` (row
/// groups of `props`' row count: batches are written one row group at a time). Files are
/// written in parallel.
pub fn write_tables(
    dir: &Path,
    orders: usize,
    files: usize,
    props: &WriterProperties,
) -> Result<Tables> {
    let files = files.max(1);
    let customers = (orders / 10).max(1);
    let tables = Tables {
        lineitem: dir.join(TABLE_NAMES[0]),
        orders: dir.join(TABLE_NAMES[1]),
        customer: dir.join(TABLE_NAMES[2]),
        lineitem_rows: 0,
    };
    for d in [&tables.lineitem, &tables.orders, &tables.customer] {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    let per_file = orders.div_ceil(files);
    // about four lines an order: a row group of lines per batch, under the row-group limit
    let rg_orders = (props.max_row_group_row_count().unwrap_or(1 << 20) * 10 / 42).max(1);
    let lines: Vec<Result<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..files)
            .map(|f| {
                let tables = &tables;
                s.spawn(move || -> Result<usize> {
                    let first = f * per_file;
                    let n = per_file.min(orders.saturating_sub(first));
                    let name = format!("part-{f}.parquet");
                    let mut ow = writer(&tables.orders.join(&name), orders_schema(), props)?;
                    let mut lw = writer(&tables.lineitem.join(&name), lineitem_schema(), props)?;
                    let mut lines = 0;
                    let mut at = first;
                    while at < first + n {
                        let k = rg_orders.min(first + n - at);
                        let (o, l) = orders_and_lines(at, k, customers, 42)?;
                        lines += l.num_rows();
                        ow.write(&o)?;
                        ow.flush()?;
                        lw.write(&l)?;
                        lw.flush()?;
                        at += k;
                    }
                    ow.close()?;
                    lw.close()?;
                    Ok(lines)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(DataFusionError::Internal("a writer thread panicked".into()))
                })
            })
            .collect()
    });
    let mut total = 0;
    for l in lines {
        total += l?;
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let mut cw = writer(
        &tables.customer.join("part-0.parquet"),
        customer_schema(),
        props,
    )?;
    let mut at = 0;
    while at < customers {
        let k = (1 << 16).min(customers - at);
        let keys: Vec<i64> = (at as i64 + 1..=(at + k) as i64).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(keys.clone())),
            Arc::new(StringArray::from_iter_values(
                keys.iter().map(|k| format!("Customer#{k:09}")),
            )),
            Arc::new(Int64Array::from_iter_values(
                (0..k).map(|_| rng.random_range(0..25)),
            )),
            Arc::new(money(
                (0..k)
                    .map(|_| rng.random_range(-99_999..=999_999))
                    .collect(),
            )?),
            Arc::new(StringArray::from_iter_values(
                (0..k).map(|_| SEGMENTS[rng.random_range(0..SEGMENTS.len())]),
            )),
        ];
        cw.write(&RecordBatch::try_new(customer_schema(), cols)?)?;
        at += k;
    }
    cw.close()?;
    Ok(Tables {
        lineitem_rows: total,
        ..tables
    })
}

fn writer(path: &Path, schema: SchemaRef, props: &WriterProperties) -> Result<ArrowWriter<File>> {
    let f = File::create(path).map_err(|e| io(path, e))?;
    Ok(ArrowWriter::try_new(f, schema, Some(props.clone()))?)
}

fn io(path: &Path, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!("{}: {e}", path.display()))
}

/// The benchmarks' tables under `dir`: `tpch-<orders>/{lineitem,orders,customer}/part-N.parquet`,
/// written once (SNAPPY, row groups of 1,000,000 rows, `files` files per table; a `done` file
/// marks them complete) and reused by every later run.
pub fn bench_tables(dir: &Path, orders: usize, files: usize) -> Result<PathBuf> {
    let root = dir.join(format!("tpch-{orders}"));
    if !root.join("done").exists() {
        let t = std::time::Instant::now();
        let props = WriterProperties::builder()
            .set_compression(datafusion::parquet::basic::Compression::SNAPPY)
            .set_max_row_group_row_count(Some(1_000_000))
            .build();
        let _ = std::fs::remove_dir_all(&root);
        let written = write_tables(&root, orders, files, &props)?;
        std::fs::write(root.join("done"), b"").map_err(|e| io(&root, e))?;
        eprintln!(
            "wrote {} lineitem rows in {files} files in {:.1} s",
            written.lineitem_rows,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(root)
}
