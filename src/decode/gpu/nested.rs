//! Nested fields (structs, lists, maps; [`crate::decode::gpu_plan::NestedColumn`]) built on the
//! device from their leaves.
//!
//! The value decoders ([`fixed`](super::fixed), [`bytes`](super::bytes)) decode a nested leaf
//! like a flat column with one slot per level entry, and [`decode_levels`] gives it its
//! repetition and definition levels (a byte per entry, `nested_levels`). [`assemble`] then
//! turns the leaves of each batch into the field's arrays in three launches over every nested
//! field and batch of the wave:
//!
//! 1. `nest_count`: per tile of a leaf's entries, the slots at each list depth;
//! 2. the host reads the counts back (one copy), sizes every array from them, checks that the
//!    leaves agree (rows, struct children) and turns the counts into per-tile bases;
//! 3. `nest_scatter`: each slot's index at each depth, and the tasks: list offsets, struct and
//!    list validity, the leaf values moved from their entries to their slots.
//!
//! The null counters come back in a last copy.

use std::ops::Range;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field};

use super::kernels::{
    LevelOut, NestTask, NestUnit, PageJob, NESTED_ERRORS, NESTED_LEVELS, NESTED_MODULE,
    NEST_COUNT, NEST_DEPTHS, NEST_SCATTER, NEST_TASKS, NEST_THREADS, NEST_TILE,
};
use super::launch::{
    i32s_from_device, u64s, u64s_from_device, upload, upload_table, zeroed, Const, Mut,
};
use super::page_jobs::{page_errors, row_bases, PageName};
use super::{DeviceColumn, PageCounts};
use crate::array::DeviceArray;
use crate::decode::gpu_plan::{Conversion, GpuColumn, NestedColumn, Shape};
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use crate::plan::BatchSpan;

/// A nested leaf's levels for one batch: a byte per level entry.
pub(crate) struct EntryLevels {
    rep: DeviceBuffer,
    def: DeviceBuffer,
    entries: usize,
}

impl EntryLevels {
    /// The repetition levels, copied to the host.
    pub(super) fn rep_to_host(&self) -> Result<Vec<u8>> {
        self.rep.copy_to_host(0..self.entries)
    }
}

/// Where rows begin among the level entries of a column chunk whose repetition levels are
/// `rep` (a row begins at each entry of level 0): (row, entry) for each row of `rows`
/// (ascending). `segments` are the chunk's data pages read, in order, as (their entries, their
/// rows in the row group) — or one segment for a chunk read whole; a row at the end of a
/// segment begins at its last entry + 1. An error when a segment's levels do not hold its rows,
/// a segment's first entry continues a row, or a row lies in no segment.
pub(super) fn row_starts(
    rep: &[u8],
    segments: &[(Range<u64>, Range<u64>)],
    rows: &[u64],
) -> std::result::Result<Vec<(u64, u64)>, String> {
    let mut out = Vec::with_capacity(rows.len());
    let mut want = rows.iter().copied().peekable();
    for (entries, seg_rows) in segments {
        let (e0, e1) = (entries.start as usize, entries.end as usize);
        let Some(levels) = rep.get(e0..e1) else {
            return Err(format!("entries {e0}..{e1} lie past the levels decoded"));
        };
        if levels.first().is_some_and(|&r| r != 0) {
            return Err(format!(
                "entry {e0} begins a page but continues a row (repetition level above 0)"
            ));
        }
        if let Some(&r) = want.peek() {
            if r < seg_rows.start {
                return Err(format!("row {r} is in no page read"));
            }
        }
        let mut row = seg_rows.start;
        for (i, _) in levels.iter().enumerate().filter(|(_, &r)| r == 0) {
            if want.peek() == Some(&row) {
                out.push((row, (e0 + i) as u64));
                want.next();
            }
            row += 1;
        }
        if row != seg_rows.end {
            return Err(format!(
                "the repetition levels of entries {e0}..{e1} hold {} rows, the rows {}..{} \
                 expected",
                row - seg_rows.start,
                seg_rows.start,
                seg_rows.end
            ));
        }
        if want.peek() == Some(&seg_rows.end) {
            out.push((seg_rows.end, e1 as u64));
            want.next();
        }
    }
    match want.next() {
        Some(r) => Err(format!("row {r} is in no page read")),
        None => Ok(out),
    }
}

/// Decodes the levels of the nested output columns among `jobs` (whose column jobs number
/// `columns`): `nested` lists (column job, entries) of each nested one. One launch.
pub(super) fn decode_levels(
    gpu: &Arc<Gpu>,
    path: &Path,
    jobs: &[PageJob],
    names: &[PageName],
    columns: usize,
    nested: &[(usize, usize)],
) -> Result<Vec<(usize, EntryLevels)>> {
    if nested.is_empty() {
        return Ok(Vec::new());
    }
    let mut outs = vec![LevelOut::default(); columns];
    let mut levels = Vec::with_capacity(nested.len());
    for &(column, entries) in nested {
        let rep = gpu.alloc(entries.max(1))?;
        let def = gpu.alloc(entries.max(1))?;
        outs[column] = LevelOut {
            rep: rep.device_ptr(),
            def: def.device_ptr(),
        };
        levels.push((column, EntryLevels { rep, def, entries }));
    }
    let is_nested: Vec<bool> = (0..columns)
        .map(|c| nested.iter().any(|&(n, _)| n == c))
        .collect();
    let (mine, my_names): (Vec<PageJob>, Vec<PageName>) = jobs
        .iter()
        .zip(names)
        .filter(|(j, _)| is_nested.get(j.column as usize).copied().unwrap_or(false))
        .map(|(j, n)| (*j, n.clone()))
        .unzip();
    if mine.is_empty() {
        return Ok(levels);
    }
    let module = NESTED_MODULE.load(gpu)?;
    let (base, total) = row_bases(&mine);
    let pages = upload_table(gpu, &mine)?;
    let outs_buf = upload_table(gpu, &outs)?;
    let base_buf = upload(gpu, &u64s(base))?;
    let scratch = gpu.alloc((total as usize * 4).max(4))?;
    let errors = zeroed(gpu, mine.len() * 4)?;
    // SAFETY: one block per page job; each writes the levels of its page's window of entries
    // (`take` from `skip`, inside the page: the kernel refuses other windows) into its column's
    // level arrays from `row_start` on, which `data_page_jobs` set inside the column's entries
    // (the windows of a column disjoint); the u32 scratch holds one entry per page entry at
    // `base` (their prefix sum); every buffer lives until `launch` returns.
    unsafe {
        NESTED_LEVELS.launch(
            gpu,
            &module,
            mine.len() as u32,
            NEST_THREADS,
            (
                Const::at(pages.device_ptr()),
                Const::at(outs_buf.device_ptr()),
                Mut::at(scratch.device_ptr()),
                Const::at(base_buf.device_ptr()),
                Mut::at(errors.device_ptr()),
            ),
        )?
    };
    let errs = i32s_from_device(&errors, mine.len())?;
    page_errors(path, &errs, &my_names, NESTED_ERRORS)?;
    Ok(levels)
}

/// Per leaf of a shape, the definition level a slot at each depth needs (depth 0: 0).
fn slot_defs(shape: &Shape, above: &mut Vec<i16>, out: &mut HashMap<usize, Vec<i16>>) {
    match shape {
        Shape::Leaf { leaf, .. } => {
            out.insert(*leaf, above.clone());
        }
        Shape::Struct { children, .. } => {
            for c in children {
                slot_defs(c, above, out);
            }
        }
        Shape::List {
            elem_def, child, ..
        } => {
            above.push(*elem_def);
            slot_defs(child, above, out);
            above.pop();
        }
    }
}

/// A count unit: one leaf of one batch of a nested field.
struct Unit {
    /// (nested column, batch, leaf)
    key: (usize, usize, usize),
    job: NestUnit,
    tiles: usize,
    /// Slots per depth, and per tile and depth the slots before it (filled after the count).
    totals: Vec<u64>,
    tasks: Vec<NestTask>,
}

/// A node of a field being built: its array (null count to come) and its null counter.
struct Built {
    array: DeviceArray,
    counter: Option<usize>,
    children: Vec<Built>,
}

impl Built {
    fn finish(self, counts: &[u64]) -> DeviceArray {
        let mut a = self.array;
        a.children = self.children.into_iter().map(|c| c.finish(counts)).collect();
        if let Some(k) = self.counter {
            a.null_count = counts.get(k).copied().unwrap_or(0) as usize;
        }
        if a.null_count == 0 {
            a.validity = None;
        }
        a
    }
}

/// What building the fields of a wave needs.
pub(crate) struct Assembly<'a> {
    pub(crate) gpu: &'a Arc<Gpu>,
    pub(crate) path: &'a Path,
    pub(crate) nested: &'a [NestedColumn],
    pub(crate) fields: &'a [Arc<Field>],
    pub(crate) batches: &'a [BatchSpan],
}

/// Builds every nested field of every batch from `leaves` (their leaves' entry-level columns,
/// with levels); returns one column per (field, batch).
pub(crate) fn assemble(a: &Assembly<'_>, leaves: Vec<DeviceColumn>) -> Result<Vec<DeviceColumn>> {
    let gpu = a.gpu;
    let mut by_key: HashMap<(usize, usize, usize), DeviceColumn> = HashMap::new();
    for c in leaves {
        by_key.insert((c.field, c.batch, c.leaf), c);
    }
    let fail = |n: &NestedColumn, b: usize, reason: String| Error::Decode {
        path: a.path.to_path_buf(),
        row_group: a.batches[b].parts.first().map(|p| p.row_group),
        column: Some(a.fields[n.field].name().clone()),
        reason,
    };
    // 1. count units
    let mut units: Vec<Unit> = Vec::new();
    let mut unit_of: HashMap<(usize, usize, usize), usize> = HashMap::new();
    for (ni, n) in a.nested.iter().enumerate() {
        let mut defs = HashMap::new();
        slot_defs(&n.shape, &mut vec![0], &mut defs);
        for b in 0..a.batches.len() {
            for (li, leaf) in n.leaves.iter().enumerate() {
                let col = by_key.get(&(n.field, b, leaf.leaf)).ok_or_else(|| {
                    fail(n, b, format!("leaf {} was not decoded", leaf.leaf))
                })?;
                let lv = col.levels.as_ref().ok_or_else(|| {
                    fail(n, b, format!("leaf {} has no levels", leaf.leaf))
                })?;
                let d = defs.get(&li).cloned().unwrap_or_default();
                if d.len() != leaf.max_rep_level as usize + 1 || d.len() > NEST_DEPTHS {
                    return Err(fail(n, b, format!("leaf {}: list depths disagree", leaf.leaf)));
                }
                let mut elem_defs = 0u64;
                for (k, &v) in d.iter().enumerate() {
                    elem_defs |= (v.clamp(0, 255) as u64) << (8 * k);
                }
                let tiles = (lv.entries as u64).div_ceil(NEST_TILE) as usize;
                unit_of.insert((ni, b, li), units.len());
                units.push(Unit {
                    key: (ni, b, li),
                    job: NestUnit {
                        rep: lv.rep.device_ptr(),
                        def: lv.def.device_ptr(),
                        entries: lv.entries as u64,
                        elem_defs,
                        depths: d.len() as i32,
                        ..NestUnit::default()
                    },
                    tiles,
                    totals: vec![0; NEST_DEPTHS],
                    tasks: Vec::new(),
                });
            }
        }
    }
    if units.is_empty() {
        return Ok(Vec::new());
    }
    let module = NESTED_MODULE.load(gpu)?;
    let all_tiles: usize = units.iter().map(|u| u.tiles).sum();
    let counts = zeroed(gpu, all_tiles.max(1) * NEST_DEPTHS * 4)?;
    let bases_len = all_tiles.max(1) * NEST_DEPTHS * 8;
    let mut bases_buf = gpu.alloc(bases_len)?;
    let mut block_unit: Vec<u8> = Vec::with_capacity(all_tiles * 4);
    let mut tile_at = 0usize;
    for (ui, u) in units.iter_mut().enumerate() {
        u.job.first_block = tile_at as i32;
        u.job.counts = counts.device_ptr() + (tile_at * NEST_DEPTHS * 4) as u64;
        u.job.bases = bases_buf.device_ptr() + (tile_at * NEST_DEPTHS * 8) as u64;
        for _ in 0..u.tiles {
            block_unit.extend((ui as u32).to_le_bytes());
        }
        tile_at += u.tiles;
    }
    let jobs: Vec<NestUnit> = units.iter().map(|u| u.job).collect();
    let units_buf = upload_table(gpu, &jobs)?;
    let block_buf = upload(gpu, &block_unit)?;
    let errors = zeroed(gpu, units.len() * 4)?;
    if all_tiles > 0 {
        // SAFETY: one block per tile of NEST_TILE entries of a unit (`block_unit` names it,
        // `first_block` its first); each reads its unit's entries (`entries` bytes of rep and
        // def, allocated by `decode_levels` for exactly that many) and writes NEST_DEPTHS
        // counts at its tile in `counts` (all_tiles × NEST_DEPTHS u32) and its unit's error
        // word; every buffer lives until `launch` returns.
        unsafe {
            NEST_COUNT.launch(
                gpu,
                &module,
                all_tiles as u32,
                NEST_THREADS,
                (
                    Const::at(units_buf.device_ptr()),
                    Const::at(block_buf.device_ptr()),
                    Mut::at(errors.device_ptr()),
                ),
            )?
        };
    }
    let errs = i32s_from_device(&errors, units.len())?;
    if let Some((ui, &e)) = errs.iter().enumerate().find(|(_, &e)| e != 0) {
        let (ni, b, li) = units[ui].key;
        let n = &a.nested[ni];
        return Err(fail(
            n,
            b,
            format!(
                "leaf {} (decoded on the GPU): {}",
                n.leaves[li].leaf,
                super::kernels::describe_errors(e as u32, NESTED_ERRORS)
            ),
        ));
    }
    // 2. counts → totals and tile bases
    let raw = counts.copy_to_host(0..all_tiles * NEST_DEPTHS * 4)?;
    let count = |t: usize, k: usize| {
        let at = (t * NEST_DEPTHS + k) * 4;
        u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]) as u64
    };
    let mut bases = vec![0u64; all_tiles * NEST_DEPTHS];
    for u in units.iter_mut() {
        let t0 = u.job.first_block as usize;
        for k in 0..NEST_DEPTHS {
            let mut sum = 0u64;
            for t in t0..t0 + u.tiles {
                bases[t * NEST_DEPTHS + k] = sum;
                sum += count(t, k);
            }
            u.totals[k] = sum;
        }
    }
    if !bases.is_empty() {
        bases_buf.copy_from_host(0, &u64s(bases))?;
    }
    for u in &units {
        let (ni, b, li) = u.key;
        let rows = a.batches[b].num_rows();
        if u.totals[0] != rows {
            return Err(fail(
                &a.nested[ni],
                b,
                format!(
                    "leaf {}: its levels hold {} rows, the batch {rows}",
                    a.nested[ni].leaves[li].leaf, u.totals[0]
                ),
            ));
        }
    }
    // 3. the arrays, sized; their tasks
    let mut counters_n = 0usize;
    let mut built: Vec<(usize, usize, Built)> = Vec::new();
    let mut pending = Vec::new();
    {
        let mut b_ctx = Builder {
            gpu,
            units: &mut units,
            unit_of: &unit_of,
            counters: &mut counters_n,
            by_key: &mut by_key,
            keep: &mut pending,
        };
        for (ni, n) in a.nested.iter().enumerate() {
            for b in 0..a.batches.len() {
                let f = b_ctx
                    .build(ni, n, b, &n.shape)
                    .map_err(|reason| fail(n, b, reason))??;
                built.push((ni, b, f));
            }
        }
    }
    let counters = zeroed(gpu, counters_n.max(1) * 8)?;
    // scatter units: each count unit's tasks, NEST_TASKS at a time
    let mut scatter: Vec<NestUnit> = Vec::new();
    let mut tasks: Vec<NestTask> = Vec::new();
    let mut block_unit: Vec<u8> = Vec::new();
    let mut blocks = 0usize;
    for u in &units {
        for group in u.tasks.chunks(NEST_TASKS) {
            let mut job = u.job;
            job.first_task = tasks.len() as i32;
            job.num_tasks = group.len() as i32;
            // the tiles keep their counts and bases; the grid numbers them anew
            let first = job.first_block;
            job.first_block = blocks as i32;
            job.bases = bases_buf.device_ptr() + (first as usize * NEST_DEPTHS * 8) as u64;
            for t in group {
                let mut t = *t;
                if t.null_count != 0 {
                    // counter index + 1 until the counters exist
                    t.null_count = counters.device_ptr() + (t.null_count - 1) * 8;
                }
                tasks.push(t);
            }
            for _ in 0..u.tiles {
                block_unit.extend((scatter.len() as u32).to_le_bytes());
            }
            blocks += u.tiles;
            scatter.push(job);
        }
    }
    if blocks > 0 {
        let units_buf = upload_table(gpu, &scatter)?;
        let block_buf = upload(gpu, &block_unit)?;
        let tasks_buf = upload_table(gpu, &tasks)?;
        // SAFETY: one block per tile of a scatter unit, as nest_count's grid (same entries,
        // same bases, which the host filled for every tile); every task's output was allocated
        // above for the slots the counts give at its depth (offsets: one more), and each slot
        // index a block computes is below those counts (bases + slots before it); gathers
        // read entry `i` of their leaf's entry-level buffers (`entries` values, offsets one
        // more); the leaves' columns (`pending`) and every upload live until `launch` returns.
        unsafe {
            NEST_SCATTER.launch(
                gpu,
                &module,
                blocks as u32,
                NEST_THREADS,
                (
                    Const::at(units_buf.device_ptr()),
                    Const::at(block_buf.device_ptr()),
                    Const::at(tasks_buf.device_ptr()),
                ),
            )?
        };
    }
    drop(pending);
    let nulls = u64s_from_device(&counters, counters_n)?;
    let mut out = Vec::with_capacity(built.len());
    for (ni, b, f) in built {
        let n = &a.nested[ni];
        let mut decompressed = PageCounts::default();
        for leaf in &n.leaves {
            if let Some(c) = by_key.get(&(n.field, b, leaf.leaf)) {
                decompressed += c.decompressed;
            }
        }
        out.push(DeviceColumn {
            field: n.field,
            leaf: n.leaves.first().map_or(0, |l| l.leaf),
            batch: b,
            array: f.finish(&nulls),
            decompressed,
            levels: None,
        });
    }
    Ok(out)
}

/// Sizes the arrays of nested fields and gives their units the tasks that fill them.
struct Builder<'a, 'g> {
    gpu: &'g Arc<Gpu>,
    units: &'a mut Vec<Unit>,
    unit_of: &'a HashMap<(usize, usize, usize), usize>,
    counters: &'a mut usize,
    by_key: &'a mut HashMap<(usize, usize, usize), DeviceColumn>,
    /// Entry-level leaf buffers the scatter reads, kept until it is done.
    keep: &'a mut Vec<DeviceArray>,
}

impl Builder<'_, '_> {
    fn counter(&mut self) -> usize {
        *self.counters += 1;
        *self.counters - 1
    }

    /// The node `shape` of field `n` (index `ni`) in batch `b`: an error string for leaves
    /// that disagree, a device error as the inner result.
    fn build(
        &mut self,
        ni: usize,
        n: &NestedColumn,
        b: usize,
        shape: &Shape,
    ) -> std::result::Result<Result<Built>, String> {
        let first = shape.first_leaf();
        let ui = *self
            .unit_of
            .get(&(ni, b, first))
            .ok_or_else(|| format!("leaf {first} has no levels"))?;
        let depth = shape.depth();
        let len = self.units[ui].totals[depth] as usize;
        Ok(match shape {
            Shape::Leaf { leaf, depth } => self.leaf(ui, n, b, &n.leaves[*leaf], *depth, len),
            Shape::Struct {
                valid_def,
                children,
                data_type,
                ..
            } => {
                let mut kids = Vec::with_capacity(children.len());
                for c in children {
                    let k = match self.build(ni, n, b, c)? {
                        Ok(k) => k,
                        Err(e) => return Ok(Err(e)),
                    };
                    if k.array.len != len {
                        return Err(format!(
                            "its struct's fields hold {} and {len} values",
                            k.array.len
                        ));
                    }
                    kids.push(k);
                }
                self.node(ui, depth, len, *valid_def, data_type, Vec::new(), kids)
            }
            Shape::List {
                null_def,
                depth,
                large,
                child,
                data_type,
                ..
            } => {
                let w = if *large { 8 } else { 4 };
                let offsets = match zeroed(self.gpu, (len + 1) * w) {
                    Ok(o) => o,
                    Err(e) => return Ok(Err(e)),
                };
                self.units[ui].tasks.push(NestTask {
                    out: offsets.device_ptr(),
                    kind: 1,
                    level: *depth as i32,
                    width: w as i32,
                    ..NestTask::default()
                });
                let k = match self.build(ni, n, b, child)? {
                    Ok(k) => k,
                    Err(e) => return Ok(Err(e)),
                };
                let want = self.units[ui].totals[depth + 1] as usize;
                if k.array.len != want {
                    return Err(format!(
                        "its list elements hold {} values, its offsets {want}",
                        k.array.len
                    ));
                }
                let buffers = vec![(offsets, (len + 1) * w)];
                self.node(ui, *depth, len, *null_def, data_type, buffers, vec![k])
            }
        })
    }

    /// A struct or list node of `len` slots at `depth`, valid where the level reaches
    /// `valid_def` (a validity task on unit `ui`).
    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        ui: usize,
        depth: usize,
        len: usize,
        valid_def: Option<i16>,
        data_type: &DataType,
        buffers: Vec<(DeviceBuffer, usize)>,
        children: Vec<Built>,
    ) -> Result<Built> {
        let (validity, counter) = match valid_def {
            Some(def) => {
                let v = zeroed(self.gpu, len.div_ceil(32) * 4)?;
                let c = self.counter();
                self.units[ui].tasks.push(NestTask {
                    out: v.device_ptr(),
                    null_count: c as u64 + 1,
                    kind: 0,
                    level: depth as i32,
                    def: i32::from(def),
                    ..NestTask::default()
                });
                (Some(v), Some(c))
            }
            None => (None, None),
        };
        Ok(Built {
            array: DeviceArray {
                data_type: data_type.clone(),
                len,
                null_count: 0,
                validity,
                buffers,
                children: Vec::new(),
                dictionary: None,
            },
            counter,
            children,
        })
    }

    /// Leaf `leaf` at `depth` with `len` slots: its entry-level column as it is at depth 0,
    /// else its values gathered to their slots.
    fn leaf(
        &mut self,
        ui: usize,
        n: &NestedColumn,
        b: usize,
        leaf: &GpuColumn,
        depth: usize,
        len: usize,
    ) -> Result<Built> {
        let Some(col) = self.by_key.get_mut(&(n.field, b, leaf.leaf)) else {
            return Err(Error::Device {
                device: format!("cuda:{}", self.gpu.ordinal()),
                reason: format!("nested leaf {} missing", leaf.leaf),
            });
        };
        let mut entries = std::mem::replace(
            &mut col.array,
            DeviceArray {
                data_type: leaf.data_type.clone(),
                len: 0,
                null_count: 0,
                validity: None,
                buffers: Vec::new(),
                children: Vec::new(),
                dictionary: None,
            },
        );
        if depth == 0 {
            // one entry per row: the entry-level column is the leaf
            return Ok(Built {
                array: entries,
                counter: None,
                children: Vec::new(),
            });
        }
        let src_valid = entries.validity.as_ref().map_or(0, |v| v.device_ptr());
        let out_valid = if src_valid != 0 {
            Some(zeroed(self.gpu, len.div_ceil(32) * 4)?)
        } else {
            None
        };
        let counter = (src_valid != 0).then(|| self.counter());
        let src = entries.buffers.first().map_or(0, |(bf, _)| bf.device_ptr());
        let mut task = NestTask {
            out_valid: out_valid.as_ref().map_or(0, |v| v.device_ptr()),
            src,
            src_valid,
            null_count: counter.map_or(0, |c| c as u64 + 1),
            level: depth as i32,
            ..NestTask::default()
        };
        let buffers = if leaf.conversion == Conversion::Boolean {
            let out = zeroed(self.gpu, len.div_ceil(32) * 4)?;
            task.out = out.device_ptr();
            task.kind = 3;
            vec![(out, len.div_ceil(8))]
        } else if leaf.conversion == Conversion::Bytes && !leaf.via_bytes {
            let w = if leaf.large_offsets { 8 } else { 4 };
            let out = zeroed(self.gpu, (len + 1) * w)?;
            task.out = out.device_ptr();
            task.kind = 4;
            task.width = w as i32;
            // the characters stay where they are: the entries between slots hold none
            let chars = (entries.buffers.len() > 1).then(|| entries.buffers.remove(1));
            let mut v = vec![(out, (len + 1) * w)];
            v.extend(chars);
            v
        } else {
            let w = leaf.output_width;
            let out = zeroed(self.gpu, (len * w).max(1))?;
            task.out = out.device_ptr();
            task.kind = 2;
            task.width = w as i32;
            vec![(out, len * w)]
        };
        self.units[ui].tasks.push(task);
        self.keep.push(entries);
        Ok(Built {
            array: DeviceArray {
                data_type: leaf.data_type.clone(),
                len,
                null_count: 0,
                validity: out_valid,
                buffers,
                children: Vec::new(),
                dictionary: None,
            },
            counter,
            children: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::row_starts;

    #[test]
    fn rows_begin_at_entries_of_repetition_level_zero() {
        // rows: [0, 1, 2] [3] [4, 5, 6] [7]
        let rep = [0u8, 1, 1, 0, 0, 2, 1, 0];
        let whole = [(0..8, 0..4)];
        assert_eq!(
            row_starts(&rep, &whole, &[1, 2, 3]),
            Ok(vec![(1, 3), (2, 4), (3, 7)])
        );
        assert_eq!(row_starts(&rep, &whole, &[]), Ok(vec![]));
        assert_eq!(row_starts(&rep, &whole, &[0, 4]), Ok(vec![(0, 0), (4, 8)]));
        let five = [(0..8, 0..5)];
        assert!(row_starts(&rep, &five, &[1]).unwrap_err().contains("hold 4 rows"));
        assert!(row_starts(&rep, &whole, &[5]).is_err());
        assert!(row_starts(&[1, 0], &[(0..2, 0..1)], &[1])
            .unwrap_err()
            .contains("continues a row"));
        // pages read: rows 10..12 (entries 0..4) and 20..22 (entries 4..8); a gap between
        let pages = [(0..4, 10..12), (4..8, 20..22)];
        assert_eq!(
            row_starts(&rep, &pages, &[10, 11, 12, 20, 21, 22]),
            Ok(vec![(10, 0), (11, 3), (12, 4), (20, 4), (21, 7), (22, 8)])
        );
        assert!(row_starts(&rep, &pages, &[15])
            .unwrap_err()
            .contains("in no page read"));
    }
}
