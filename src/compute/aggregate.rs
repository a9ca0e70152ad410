//! The device side of [`Aggregator`]: the job tables, the hash table kept from batch to batch,
//! the launches of `kernels/aggregate.cu`, and the groups' keys and values brought back.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};

use super::{Aggregate, Expr, GroupBy, Groups, IntExpr};
use arrow::record_batch::RecordBatch;

use crate::array::{DeviceArray, DeviceRecordBatch, LoadedBatch};
use crate::device::launch::{
    c_struct, i32s_from_device, kernels, u64s, upload, upload_table, zeroed, Const, KernelModule,
    Mut,
};
use crate::device::profile::timed;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// Threads per block (`AGG_THREADS` in aggregate.cu).
const AGG_THREADS: u32 = 256;

/// Operands an expression may need at once (`EXPR_STACK` in aggregate.cu).
pub(super) const EXPR_STACK: usize = 8;

/// `agg_rows`' flag: a row found no free slot (`AGG_FULL`).
const AGG_FULL: u32 = 1;

/// `agg_rows`' flag: exact arithmetic passed 128 bits (`AGG_OVERFLOW`).
const AGG_OVERFLOW: u32 = 2;

/// Slots of the first batch's table, at most (grown when a batch fills it).
const FIRST_CAPACITY: usize = 1 << 12;

/// Slots a row probes before a table smaller than the largest counts as full.
const MAX_PROBE: u64 = 256;

/// Blocks of a grid-stride launch, at most.
const MAX_BLOCKS: u64 = 8192;

/// Partial aggregation: GROUP BY keys and aggregates.
/// (Its exact arithmetic uses `__int128`, an NVRTC option.)
pub(crate) const AGGREGATE_MODULE: KernelModule = KernelModule {
    name: "aggregate",
    source: include_str!("kernels/aggregate.cu"),
    options: &["--device-int128"],
};

c_struct! {
    /// Mirror of `struct GroupKey` in `kernels/aggregate.cu`.
    pub(crate) struct GroupKey(32 bytes) {
        /// Values, offsets, views or dictionary keys.
        values: u64,
        /// Validity bitmap, 0 when every row is valid.
        valid: u64,
        /// Characters of strings (the data buffer of views).
        chars: u64,
        /// KEY_INT, KEY_BOOL, KEY_STR32, KEY_STR64, KEY_VIEW.
        kind: i32,
        /// Bytes per value of KEY_INT.
        width: i32,
    }
}

c_struct! {
    /// Mirror of `struct AggInput` in `kernels/aggregate.cu`.
    pub(crate) struct AggInput(32 bytes) {
        /// Values.
        values: u64,
        /// Validity bitmap, 0 when every row is valid.
        valid: u64,
        /// Bytes per value.
        width: i32,
        /// 1 for FLOAT and DOUBLE.
        is_float: i32,
        /// 1 for signed integers.
        sgn: i32,
        /// (padding)
        pad: i32,
    }
}

c_struct! {
    /// Mirror of `struct ExprOp` in `kernels/aggregate.cu`.
    pub(crate) struct ExprOp(16 bytes) {
        /// OP_COL, OP_LIT, OP_ADD, ...
        op: i32,
        /// OP_COL's input.
        arg: i32,
        /// OP_LIT's double, as bits.
        lit: u64,
    }
}

c_struct! {
    /// Mirror of `struct AggJob` in `kernels/aggregate.cu`.
    pub(crate) struct AggJob(32 bytes) {
        /// The accumulator per slot.
        acc: u64,
        /// "A value was seen", a u32 per slot.
        seen: u64,
        /// AGG_COUNT_ALL, AGG_COUNT, AGG_SUM_INT, ...
        op: i32,
        /// The input column (an index of the inputs), -1 for none.
        input: i32,
        /// The expression's first op.
        expr_start: i32,
        /// Ops of the expression, 0 for none.
        expr_len: i32,
    }
}

kernels! {
    /// Every slot empty, every accumulator its identity. (slot_row, cap, aggs, naggs).
    AGG_INIT = agg_init in AGGREGATE_MODULE(Mut<u32>, u64, Const<AggJob>, i32);
    /// Rows into slots and accumulators. (keys, nkeys, n, slot_row, cap, probes, inputs, ops,
    /// aggs, naggs, flags).
    AGG_ROWS = agg_rows in AGGREGATE_MODULE(
        Const<GroupKey>, i32, u64, Mut<u32>, u64, u64, Const<AggInput>, Const<ExprOp>,
        Const<AggJob>, i32, Mut<u32>
    );
    /// The claimed slots numbered. (slot_row, cap, count, group_slot, group_row).
    AGG_NUMBER = agg_number in AGGREGATE_MODULE(Const<u32>, u64, Mut<u32>, Mut<u32>, Mut<u32>);
    /// One aggregate's values per group. (acc, seen, width, group_slot, groups, out, out_seen).
    AGG_GATHER = agg_gather in AGGREGATE_MODULE(
        Const<u8>, Const<u32>, i32, Const<u32>, u64, Mut<u8>, Mut<u8>
    );
    /// One key's values (or string lengths) per group. (key, group_row, groups, out, out_valid).
    KEY_GATHER = key_gather in AGGREGATE_MODULE(Const<GroupKey>, Const<u32>, u64, Mut<u8>, Mut<u8>);
    /// A string key's characters per group. (key, group_row, groups, offsets, out).
    KEY_CHARS = key_chars in AGGREGATE_MODULE(
        Const<GroupKey>, Const<u32>, u64, Const<i64>, Mut<u8>
    );
}

// key kinds, aggregate operations and expression ops (aggregate.cu)
const KEY_INT: i32 = 0;
const KEY_BOOL: i32 = 1;
const KEY_STR32: i32 = 2;
const KEY_STR64: i32 = 3;
const KEY_VIEW: i32 = 4;
const AGG_COUNT_ALL: i32 = 0;
const AGG_COUNT: i32 = 1;
const AGG_SUM_INT: i32 = 2;
const AGG_SUM_FLOAT: i32 = 3;
const AGG_MIN_INT: i32 = 4;
const AGG_MAX_INT: i32 = 5;
const AGG_MIN_FLOAT: i32 = 6;
const AGG_MAX_FLOAT: i32 = 7;
const OP_COL: i32 = 0;
const OP_LIT: i32 = 1;
const OP_ADD: i32 = 2;
const OP_SUB: i32 = 3;
const OP_MUL: i32 = 4;
const OP_DIV: i32 = 5;
const OP_NEG: i32 = 6;
const IOP_COL: i32 = 16;
const IOP_LIT: i32 = 17;
const IOP_SCALE: i32 = 18;
const IOP_ADD: i32 = 19;
const IOP_SUB: i32 = 20;
const IOP_MUL: i32 = 21;
const IOP_NEG: i32 = 22;

/// Blocks of a grid-stride launch over `items` threads' work.
fn blocks(items: u64) -> u32 {
    items.div_ceil(AGG_THREADS as u64).clamp(1, MAX_BLOCKS) as u32
}

/// An error of the device aggregation on `cuda:{ordinal}`.
pub(super) fn device_error(ordinal: usize, reason: String) -> Error {
    Error::Device {
        device: format!("cuda:{ordinal}"),
        reason: format!("partial aggregation: {reason}"),
    }
}

/// Partial aggregation of device batches by one [`GroupBy`], its hash table kept (and grown)
/// from batch to batch.
pub struct Aggregator {
    spec: GroupBy,
    schema: SchemaRef,
    /// Slots of the next batch's table (a power of two).
    capacity: usize,
    table: Option<Table>,
}

/// The device hash table: slots' first rows and each aggregate's accumulators.
struct Table {
    ordinal: usize,
    capacity: usize,
    slot_row: DeviceBuffer,
    accs: Vec<(DeviceBuffer, DeviceBuffer)>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("spec", &self.spec)
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Accumulator bytes per slot of an operation.
fn acc_width(op: i32) -> usize {
    if op == AGG_SUM_INT {
        16
    } else {
        8
    }
}

/// The device's view of one column: its values (or offsets/views), validity and characters.
fn column_ptrs(a: &DeviceArray) -> (u64, u64, u64) {
    let valid = a.validity.as_ref().map_or(0, |v| v.device_ptr());
    let first = a.buffers.first().map_or(0, |b| b.0.device_ptr());
    let second = a.buffers.get(1).map_or(0, |b| b.0.device_ptr());
    (first, valid, second)
}

/// Bytes per value of a fixed-width type (booleans: 0).
fn width_of(t: &DataType) -> Option<i32> {
    match t {
        DataType::Boolean => Some(0),
        DataType::Dictionary(k, _) => width_of(k),
        t => t.primitive_width().map(|w| w as i32),
    }
}

fn is_signed(t: &DataType) -> bool {
    !matches!(
        t,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64
    )
}

impl Aggregator {
    /// An aggregator of batches of `schema` by `spec`, or why the device cannot compute it
    /// ([`GroupBy::check`]).
    pub fn new(spec: GroupBy, schema: SchemaRef) -> std::result::Result<Self, String> {
        spec.check(&schema)?;
        Ok(Aggregator {
            spec,
            schema,
            capacity: FIRST_CAPACITY,
            table: None,
        })
    }

    /// What it computes.
    pub fn spec(&self) -> &GroupBy {
        &self.spec
    }

    /// The groups of `batch` (in device memory, of the aggregator's schema).
    pub fn aggregate(&mut self, batch: &LoadedBatch) -> Result<Groups> {
        let ordinal = super::device_of(batch)?;
        let Some(b) = batch.as_device() else {
            return Err(device_error(ordinal, "the batch is not in device memory".into()));
        };
        let what = batch.file().display().to_string();
        // on this thread's own stream: its waits are for its own kernels, not for the waves
        // other partitions are decoding
        crate::device::with_own_stream(|| self.run(b, ordinal, &what))
    }

    /// Not a stable API: [`Self::aggregate`] with the wall time of its stages (each kernel
    /// waited for, the tables uploaded, the groups copied back), for the benchmark.
    #[doc(hidden)]
    pub fn aggregate_profiled(
        &mut self,
        batch: &LoadedBatch,
    ) -> Result<(Groups, Vec<(String, std::time::Duration)>)> {
        crate::device::profile::profile_begin();
        let r = self.aggregate(batch);
        let stages = crate::device::profile::profile_end();
        r.map(|g| (g, stages))
    }

    /// The groups of a host batch (of the aggregator's schema), copied to `cuda:{ordinal}`
    /// first: a scan's batch that came back on the host (a row filter applied there).
    pub fn aggregate_host(&mut self, batch: &RecordBatch, ordinal: usize) -> Result<Groups> {
        let gpu = crate::device::gpu(ordinal)?;
        let b = DeviceRecordBatch::upload(&gpu, batch)?;
        crate::device::with_own_stream(|| self.run(&b, ordinal, "a host batch"))
    }

    fn run(&mut self, b: &DeviceRecordBatch, ordinal: usize, what: &str) -> Result<Groups> {
        if b.columns.len() != self.schema.fields().len() {
            return Err(device_error(
                ordinal,
                format!(
                    "{what}: a batch of {} columns for an aggregation of {}",
                    b.columns.len(),
                    self.schema.fields().len()
                ),
            ));
        }
        let n = b.num_rows;
        if n >= u32::MAX as usize {
            return Err(device_error(
                ordinal,
                format!("a batch of {n} rows (rows are numbered in 32 bits)"),
            ));
        }
        let gpu = crate::device::gpu(ordinal)?;
        let module = AGGREGATE_MODULE.load(&gpu)?;
        let jobs = timed("agg tables", || Jobs::new(&self.spec, &b.columns, ordinal))?;
        // at most n groups: a table of 2n slots never fills
        let most = (2 * n).max(2).next_power_of_two();
        loop {
            let cap = self.capacity.min(most);
            let table = self.table_for(&gpu, ordinal, cap, &jobs.ops)?;
            let aggs = jobs.aggs(table);
            let agg_table = timed("agg tables", || upload_table(&gpu, &aggs))?;
            let flags = zeroed(&gpu, 4)?;
            // SAFETY: `slot_row` holds `cap` u32 and each job's accumulator and flag `cap`
            // entries of their widths (table_for); the tables hold `aggs.len()` jobs; waited
            // for by the next launch (or below) while every buffer lives.
            unsafe {
                AGG_INIT.launch_nowait(
                    &gpu,
                    &module,
                    blocks(cap as u64),
                    AGG_THREADS,
                    (
                        Mut::at(table.slot_row.device_ptr()),
                        cap as u64,
                        Const::at(agg_table.device_ptr()),
                        aggs.len() as i32,
                    ),
                )?;
            }
            if n > 0 {
                // SAFETY: the key, input and op tables describe columns of `n` rows of `b`
                // (their buffers live in `b` for the launch), with the widths their types
                // give; the slots and accumulators hold `cap` entries; `flags` one u32.
                unsafe {
                    AGG_ROWS.launch(
                        &gpu,
                        &module,
                        blocks(n as u64),
                        AGG_THREADS,
                        (
                            Const::at(jobs.keys.device_ptr()),
                            jobs.nkeys as i32,
                            n as u64,
                            Mut::at(table.slot_row.device_ptr()),
                            cap as u64,
                            if cap < most { MAX_PROBE } else { cap as u64 },
                            Const::at(jobs.inputs.device_ptr()),
                            Const::at(jobs.program.device_ptr()),
                            Const::at(agg_table.device_ptr()),
                            aggs.len() as i32,
                            Mut::at(flags.device_ptr()),
                        ),
                    )?;
                }
            }
            if n == 0 {
                gpu.synchronize_decode()?;
            }
            let f = i32s_from_device(&flags, 1)?[0] as u32;
            if f & AGG_OVERFLOW != 0 {
                return Err(device_error(
                    ordinal,
                    format!("{what}: decimal or integer arithmetic overflowed 128 bits"),
                ));
            }
            if f & AGG_FULL != 0 && cap < most {
                // (each try costs a pass: grow by more than twice)
                self.capacity = cap * 8;
                continue;
            }
            if f != 0 {
                return Err(device_error(ordinal, format!("the kernel's flags {f:#x}")));
            }
            let groups = self.collect(&gpu, &module, &jobs, b, n, cap)?;
            // a table more than half full probes long: the next batch's is larger
            if groups.len() * 2 > cap && cap < most {
                self.capacity = cap * 2;
            }
            return Ok(groups);
        }
    }

    /// The table of `cap` slots for the aggregates' operations, reused when it is the size.
    fn table_for(
        &mut self,
        gpu: &Arc<Gpu>,
        ordinal: usize,
        cap: usize,
        ops: &[i32],
    ) -> Result<&Table> {
        let fits = self
            .table
            .as_ref()
            .is_some_and(|t| t.ordinal == ordinal && t.capacity == cap);
        if !fits {
            self.table = None;
            let slot_row = gpu.alloc(cap * 4)?;
            let accs = ops
                .iter()
                .map(|&op| Ok((gpu.alloc(cap * acc_width(op))?, gpu.alloc(cap * 4)?)))
                .collect::<Result<Vec<_>>>()?;
            self.table = Some(Table {
                ordinal,
                capacity: cap,
                slot_row,
                accs,
            });
        }
        self.table
            .as_ref()
            .ok_or_else(|| device_error(ordinal, "no table".into()))
    }

    /// The groups of the table after `agg_rows`: numbered, gathered, brought to the host.
    /// Every aggregate's values and every key's fixed-width part are gathered into one buffer
    /// (kernels enqueued one after the other, one wait, one copy back); string keys'
    /// characters then into a second.
    fn collect(
        &self,
        gpu: &Arc<Gpu>,
        module: &crate::device::nvrtc::Module,
        jobs: &Jobs,
        b: &DeviceRecordBatch,
        n: usize,
        cap: usize,
    ) -> Result<Groups> {
        let table = self
            .table
            .as_ref()
            .ok_or_else(|| device_error(jobs.ordinal, "no table".into()))?;
        let most = n.max(1);
        let count = zeroed(gpu, 4)?;
        let group_slot = gpu.alloc(most * 4)?;
        let group_row = gpu.alloc(most * 4)?;
        // SAFETY: `slot_row` holds `cap` slots, each claimed by a row below n, so at most n
        // (≤ `most`) are numbered into `group_slot` and `group_row`; waited for.
        unsafe {
            AGG_NUMBER.launch(
                gpu,
                module,
                blocks(cap as u64),
                AGG_THREADS,
                (
                    Const::at(table.slot_row.device_ptr()),
                    cap as u64,
                    Mut::at(count.device_ptr()),
                    Mut::at(group_slot.device_ptr()),
                    Mut::at(group_row.device_ptr()),
                ),
            )?;
        }
        let groups = i32s_from_device(&count, 1)?[0] as u32 as usize;
        if groups > most {
            return Err(device_error(
                jobs.ordinal,
                format!("{groups} groups numbered from {n} rows"),
            ));
        }
        let layout = Packed::new(jobs, groups);
        let packed = gpu.alloc(layout.bytes.max(1))?;
        if groups > 0 {
            let at = |offset: usize| packed.device_ptr() + offset as u64;
            for (a, (op, (acc, seen))) in jobs.ops.iter().zip(&table.accs).enumerate() {
                let width = acc_width(*op);
                // SAFETY: `acc` and `seen` hold `cap` entries of `width` and 4 bytes, indexed
                // by the slots of `group_slot` (below cap); the packed regions hold `groups`
                // entries of `width` bytes and a byte each ([`Packed`]); waited for below.
                unsafe {
                    AGG_GATHER.launch_nowait(
                        gpu,
                        module,
                        blocks(groups as u64),
                        AGG_THREADS,
                        (
                            Const::at(acc.device_ptr()),
                            Const::at(seen.device_ptr()),
                            width as i32,
                            Const::at(group_slot.device_ptr()),
                            groups as u64,
                            Mut::at(at(layout.values[a])),
                            Mut::at(at(layout.seen[a])),
                        ),
                    )?;
                }
            }
            for k in 0..jobs.nkeys {
                // SAFETY: `key` is entry k of the key table (the column's buffers live in the
                // batch); `group_row` holds `groups` rows below n; the packed regions hold
                // `groups` values of the key's width and a byte each; waited for below.
                unsafe {
                    KEY_GATHER.launch_nowait(
                        gpu,
                        module,
                        blocks(groups as u64),
                        AGG_THREADS,
                        (
                            Const::at(jobs.key_entry(k)),
                            Const::at(group_row.device_ptr()),
                            groups as u64,
                            Mut::at(at(layout.key_fixed[k])),
                            Mut::at(at(layout.key_valid[k])),
                        ),
                    )?;
                }
            }
            timed("kernel agg_gather, key_gather", || gpu.synchronize_decode())?;
        }
        let host = timed("agg copy back", || packed.copy_to_host(0..layout.bytes))?;
        let region = |at: usize, len: usize| &host[at..at + len];
        let mut values = Vec::with_capacity(self.spec.aggregates.len());
        for (a, op) in jobs.ops.iter().enumerate() {
            let width = acc_width(*op);
            let words: Vec<u64> = region(layout.values[a], groups * width)
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            let seen = region(layout.seen[a], groups);
            let t = self.spec.output_type(a, &self.schema);
            values.push(match *op {
                AGG_COUNT_ALL | AGG_COUNT => super::counts(&words),
                AGG_SUM_INT => {
                    let scale = match t {
                        DataType::Decimal128(_, s) => s,
                        _ => 0,
                    };
                    super::decimal_sums(&words, seen, scale)?
                }
                AGG_SUM_FLOAT => super::float_sums(&words, seen),
                _ => {
                    let w: Vec<i64> = words.iter().map(|&w| w as i64).collect();
                    super::minmax_array(&w, seen, &t)?
                }
            });
        }
        // string keys' characters: their lengths came back above
        let fixed = |k: usize| region(layout.key_fixed[k], groups * layout.key_widths[k]);
        let mut strings = timed("agg key strings", || {
            self.key_strings(gpu, module, jobs, &group_row, groups, &fixed)
        })?;
        let mut keys = Vec::with_capacity(self.spec.keys.len());
        for (k, &col) in self.spec.keys.iter().enumerate() {
            let column = &b.columns[col];
            let t = self.schema.field(col).data_type();
            let dictionary = match (&column.dictionary, t) {
                (Some(d), DataType::Dictionary(..)) => Some(d.to_host()?),
                _ => None,
            };
            let valid = region(layout.key_valid[k], groups);
            keys.push(super::key_array(
                t,
                groups,
                fixed(k),
                valid,
                strings[k].take(),
                dictionary,
            )?);
        }
        Ok(Groups { keys, values })
    }

    /// The string keys' offsets and characters at the groups' first rows (`None` for the
    /// other keys), from their lengths (`fixed(k)`, i64 per group): the characters of every
    /// string key gathered into one buffer, one wait, one copy back.
    fn key_strings<'a>(
        &self,
        gpu: &Arc<Gpu>,
        module: &crate::device::nvrtc::Module,
        jobs: &Jobs,
        group_row: &DeviceBuffer,
        groups: usize,
        fixed: &dyn Fn(usize) -> &'a [u8],
    ) -> Result<Vec<Option<KeyStrings>>> {
        let mut offsets: Vec<Option<Vec<i64>>> = Vec::with_capacity(jobs.nkeys);
        // each string key's characters start at `base` in the one buffer
        let (mut bases, mut total) = (Vec::with_capacity(jobs.nkeys), 0usize);
        for k in 0..jobs.nkeys {
            if jobs.key_kinds[k] < KEY_STR32 {
                offsets.push(None);
                bases.push(total);
                continue;
            }
            let mut o = Vec::with_capacity(groups + 1);
            o.push(0i64);
            for c in fixed(k).chunks_exact(8) {
                let len = i64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                o.push(o[o.len() - 1] + len);
            }
            bases.push(total);
            total += o[groups] as usize;
            offsets.push(Some(o));
        }
        if offsets.iter().all(Option::is_none) {
            return Ok(offsets.into_iter().map(|_| None).collect());
        }
        // every string key's offsets, shifted to their place in the one buffer, one upload
        let mut shifted = Vec::new();
        let mut first = Vec::with_capacity(jobs.nkeys);
        for (o, &base) in offsets.iter().zip(&bases) {
            first.push(shifted.len() / 8);
            if let Some(o) = o {
                shifted.extend(u64s(o.iter().map(|&x| (x + base as i64) as u64)));
            }
        }
        let offs = upload(gpu, &shifted)?;
        let chars = gpu.alloc(total.max(1))?;
        if total > 0 {
            for (k, o) in offsets.iter().enumerate() {
                if o.as_ref().is_none_or(|o| o[groups] == 0) {
                    continue;
                }
                // SAFETY: `offs` holds, from entry first[k], groups + 1 offsets of key k into
                // `chars` (its characters' place in the one buffer, ending within `total`);
                // one warp per group copies its key's bytes (the lengths gathered from the same
                // rows); waited for below.
                unsafe {
                    KEY_CHARS.launch_nowait(
                        gpu,
                        module,
                        blocks(groups as u64 * 32),
                        AGG_THREADS,
                        (
                            Const::at(jobs.key_entry(k)),
                            Const::at(group_row.device_ptr()),
                            groups as u64,
                            Const::at(offs.device_ptr() + 8 * first[k] as u64),
                            Mut::at(chars.device_ptr()),
                        ),
                    )?;
                }
            }
            gpu.synchronize_decode()?;
        }
        let all = chars.copy_to_host(0..total)?;
        Ok(offsets
            .into_iter()
            .zip(bases)
            .map(|(o, base)| {
                o.map(|o| {
                    let bytes = all[base..base + o[groups] as usize].to_vec();
                    (o, bytes)
                })
            })
            .collect())
    }
}

/// A string key's offsets (from 0) and characters, one string per group.
type KeyStrings = (Vec<i64>, Vec<u8>);

/// Where each gathered array sits in the one buffer [`Aggregator::collect`] brings back:
/// the aggregates' values (8 or 16 bytes per group), the keys' fixed-width parts (their width,
/// a byte for booleans, an i64 length for strings; each region 8-aligned), then a byte per
/// group for each aggregate's "seen" flag and each key's validity.
struct Packed {
    values: Vec<usize>,
    seen: Vec<usize>,
    key_fixed: Vec<usize>,
    key_widths: Vec<usize>,
    key_valid: Vec<usize>,
    bytes: usize,
}

impl Packed {
    fn new(jobs: &Jobs, groups: usize) -> Packed {
        let mut at = 0usize;
        let mut region = |len: usize| {
            let r = at;
            at = (at + len).next_multiple_of(8);
            r
        };
        let values = jobs
            .ops
            .iter()
            .map(|&op| region(groups * acc_width(op)))
            .collect();
        let key_widths: Vec<usize> = (0..jobs.nkeys)
            .map(|k| match jobs.key_kinds[k] {
                KEY_INT => jobs.key_widths[k] as usize,
                KEY_BOOL => 1,
                _ => 8,
            })
            .collect();
        let key_fixed = key_widths.iter().map(|w| region(groups * w)).collect();
        let seen = jobs.ops.iter().map(|_| region(groups)).collect();
        let key_valid = key_widths.iter().map(|_| region(groups)).collect();
        Packed {
            values,
            seen,
            key_fixed,
            key_widths,
            key_valid,
            bytes: at,
        }
    }
}

/// One batch's job tables on the device.
struct Jobs {
    ordinal: usize,
    keys: DeviceBuffer,
    nkeys: usize,
    key_kinds: Vec<i32>,
    key_widths: Vec<i32>,
    inputs: DeviceBuffer,
    program: DeviceBuffer,
    /// Per aggregate: its operation, input and program span.
    ops: Vec<i32>,
    args: Vec<(i32, i32, i32)>,
}

impl Jobs {
    /// The device address of key `k`'s entry of the key table.
    fn key_entry(&self, k: usize) -> u64 {
        self.keys.device_ptr() + (k * <GroupKey as crate::device::launch::CStruct>::SIZE) as u64
    }

    fn new(spec: &GroupBy, columns: &[DeviceArray], ordinal: usize) -> Result<Self> {
        let gpu = crate::device::gpu(ordinal)?;
        let mut keys = Vec::new();
        let (mut key_kinds, mut key_widths) = (Vec::new(), Vec::new());
        for &c in &spec.keys {
            let a = &columns[c];
            let (first, valid, second) = column_ptrs(a);
            let (kind, width, chars) = match &a.data_type {
                DataType::Boolean => (KEY_BOOL, 0, 0),
                DataType::Utf8 | DataType::Binary => (KEY_STR32, 0, second),
                DataType::LargeUtf8 | DataType::LargeBinary => (KEY_STR64, 0, second),
                DataType::Utf8View | DataType::BinaryView => {
                    if a.buffers.len() > 2 {
                        return Err(device_error(
                            ordinal,
                            format!("a view key over {} data buffers", a.buffers.len() - 1),
                        ));
                    }
                    (KEY_VIEW, 16, second)
                }
                t => (
                    KEY_INT,
                    width_of(t).ok_or_else(|| device_error(ordinal, format!("a {t} key")))?,
                    0,
                ),
            };
            key_kinds.push(kind);
            key_widths.push(width);
            keys.push(GroupKey {
                values: first,
                valid,
                chars,
                kind,
                width,
            });
        }
        let mut inputs: Vec<AggInput> = Vec::new();
        let mut input_of = |c: usize| -> i32 {
            let a = &columns[c];
            let (values, valid, _) = column_ptrs(a);
            let t = &a.data_type;
            let input = AggInput {
                values,
                valid,
                width: width_of(t).unwrap_or(0),
                is_float: i32::from(matches!(t, DataType::Float32 | DataType::Float64)),
                sgn: i32::from(is_signed(t)),
                pad: 0,
            };
            match inputs.iter().position(|i| *i == input) {
                Some(i) => i as i32,
                None => {
                    inputs.push(input);
                    inputs.len() as i32 - 1
                }
            }
        };
        let mut program: Vec<ExprOp> = Vec::new();
        let mut ops = Vec::new();
        let mut args = Vec::new();
        for a in &spec.aggregates {
            let is_float_col = |c: usize| {
                matches!(columns[c].data_type, DataType::Float32 | DataType::Float64)
            };
            let (op, arg) = match a {
                Aggregate::CountRows => (AGG_COUNT_ALL, None),
                Aggregate::Count(e) => (AGG_COUNT, Some(e)),
                Aggregate::Sum(e @ Expr::Column(c)) if !is_float_col(*c) => (AGG_SUM_INT, Some(e)),
                Aggregate::Sum(e) | Aggregate::SumFloat(e) => (AGG_SUM_FLOAT, Some(e)),
                Aggregate::SumExact(..) => (AGG_SUM_INT, None),
                Aggregate::Min(c) if is_float_col(*c) => (AGG_MIN_FLOAT, None),
                Aggregate::Max(c) if is_float_col(*c) => (AGG_MAX_FLOAT, None),
                Aggregate::Min(_) => (AGG_MIN_INT, None),
                Aggregate::Max(_) => (AGG_MAX_INT, None),
            };
            let (input, start, len) = match (a, arg) {
                (Aggregate::Min(c) | Aggregate::Max(c), _) => (input_of(*c), 0, 0),
                (Aggregate::SumExact(IntExpr::Column(c), _), _) => (input_of(*c), 0, 0),
                (Aggregate::SumExact(e, _), _) => {
                    let start = program.len();
                    compile_int(e, &mut program, &mut input_of);
                    (-1, start as i32, (program.len() - start) as i32)
                }
                (_, Some(Expr::Column(c))) => (input_of(*c), 0, 0),
                (_, Some(e)) => {
                    let start = program.len();
                    compile(e, &mut program, &mut input_of);
                    (-1, start as i32, (program.len() - start) as i32)
                }
                (_, None) => (-1, 0, 0),
            };
            ops.push(op);
            args.push((input, start, len));
        }
        let nkeys = keys.len();
        Ok(Jobs {
            ordinal,
            keys: upload_table(&gpu, &keys)?,
            nkeys,
            key_kinds,
            key_widths,
            inputs: upload_table(&gpu, &inputs)?,
            program: upload_table(&gpu, &program)?,
            ops,
            args,
        })
    }

    /// The aggregate jobs over `table`'s accumulators.
    fn aggs(&self, table: &Table) -> Vec<AggJob> {
        self.ops
            .iter()
            .zip(&self.args)
            .zip(&table.accs)
            .map(|((&op, &(input, expr_start, expr_len)), (acc, seen))| AggJob {
                acc: acc.device_ptr(),
                seen: seen.device_ptr(),
                op,
                input,
                expr_start,
                expr_len,
            })
            .collect()
    }
}

/// Integer expression `e` in postfix onto `program`.
fn compile_int(e: &IntExpr, program: &mut Vec<ExprOp>, input_of: &mut impl FnMut(usize) -> i32) {
    let op = |op: i32, lit: u64| ExprOp { op, arg: 0, lit };
    match e {
        IntExpr::Column(c) => program.push(ExprOp {
            op: IOP_COL,
            arg: input_of(*c),
            lit: 0,
        }),
        IntExpr::Literal(v) => program.push(op(IOP_LIT, *v as u64)),
        IntExpr::Scale(a, n) => {
            compile_int(a, program, input_of);
            program.push(op(IOP_SCALE, 10u64.pow(*n)));
        }
        IntExpr::Neg(a) => {
            compile_int(a, program, input_of);
            program.push(op(IOP_NEG, 0));
        }
        IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => {
            compile_int(a, program, input_of);
            compile_int(b, program, input_of);
            program.push(op(
                match e {
                    IntExpr::Add(..) => IOP_ADD,
                    IntExpr::Sub(..) => IOP_SUB,
                    _ => IOP_MUL,
                },
                0,
            ));
        }
    }
}

/// `e` in postfix onto `program`.
fn compile(e: &Expr, program: &mut Vec<ExprOp>, input_of: &mut impl FnMut(usize) -> i32) {
    let op = |op: i32| ExprOp { op, arg: 0, lit: 0 };
    match e {
        Expr::Column(c) => program.push(ExprOp {
            op: OP_COL,
            arg: input_of(*c),
            lit: 0,
        }),
        Expr::Literal(v) => program.push(ExprOp {
            op: OP_LIT,
            arg: 0,
            lit: v.to_bits(),
        }),
        Expr::Neg(a) => {
            compile(a, program, input_of);
            program.push(op(OP_NEG));
        }
        Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
            compile(a, program, input_of);
            compile(b, program, input_of);
            program.push(op(match e {
                Expr::Add(..) => OP_ADD,
                Expr::Sub(..) => OP_SUB,
                Expr::Mul(..) => OP_MUL,
                _ => OP_DIV,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The aggregate kernels' parameters are those of their `extern "C"` signatures, and the
    /// job structures have the sources' fields and sizes.
    #[test]
    fn declarations_match_the_source() {
        use crate::device::c_source::{asserted_size, kernel_signatures, struct_fields};
        use crate::device::launch::CStruct;
        let declared = declared_kernels();
        let found = kernel_signatures(AGGREGATE_MODULE.source);
        assert_eq!(found.len(), declared.len());
        for (name, params) in found {
            let d = declared
                .iter()
                .find(|d| d.1 == name)
                .unwrap_or_else(|| panic!("{name} is not declared"));
            assert_eq!(d.2, params, "{name}");
        }
        fn fields<T: CStruct>() -> (&'static str, usize, &'static [(&'static str, &'static str)]) {
            (T::NAME, T::SIZE, T::FIELDS)
        }
        for (name, size, fields) in [
            fields::<GroupKey>(),
            fields::<AggInput>(),
            fields::<ExprOp>(),
            fields::<AggJob>(),
        ] {
            assert_eq!(asserted_size(AGGREGATE_MODULE.source, name), Some(size), "{name}");
            // addresses are pointers in C and u64 in the mirrors
            let got: Vec<(String, String)> = struct_fields(AGGREGATE_MODULE.source, name)
                .unwrap()
                .into_iter()
                .map(|(f, t)| (f, if t.ends_with('*') { "u64".into() } else { t }))
                .collect();
            let want: Vec<(String, String)> = fields
                .iter()
                .map(|(f, t)| (f.to_string(), t.to_string()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    /// The module compiles with NVRTC for the architectures the decoder's do, where NVRTC is
    /// installed (`scripts/nvrtc-compile.sh`); prints why it is skipped elsewhere.
    #[test]
    fn aggregate_kernels_compile_with_nvrtc() {
        if let Err(e) = crate::device::nvrtc::nvrtc_version() {
            eprintln!("skipping the NVRTC compile check: {e}");
            return;
        }
        for arch in ["sm_90", "sm_80"] {
            let cubin = crate::device::nvrtc::compile_cubin(
                AGGREGATE_MODULE.name,
                AGGREGATE_MODULE.source,
                arch,
                AGGREGATE_MODULE.options,
            )
            .unwrap_or_else(|e| panic!("aggregate for {arch}: {e}"));
            assert!(cubin.starts_with(b"\x7fELF"));
        }
    }

    #[test]
    fn expressions_compile_to_postfix() {
        let e = Expr::Mul(
            Box::new(Expr::Column(3)),
            Box::new(Expr::Sub(Box::new(Expr::Literal(1.0)), Box::new(Expr::Column(4)))),
        );
        let mut p = Vec::new();
        let mut inputs = Vec::new();
        compile(&e, &mut p, &mut |c| {
            inputs.push(c);
            inputs.len() as i32 - 1
        });
        let ops: Vec<i32> = p.iter().map(|o| o.op).collect();
        assert_eq!(ops, [OP_COL, OP_LIT, OP_COL, OP_SUB, OP_MUL]);
        assert_eq!(p[1].lit, 1.0f64.to_bits());
        assert_eq!(inputs, [3, 4]);
    }
}
