//! Host decoding with arrow-rs, over the bytes the I/O stage fetched.
//!
//! Each row group is decoded by arrow-rs's record batch reader over a
//! [`FetchedChunks`]: exactly the planned chunk ranges, one buffer per chunk. If the decoder
//! asks for any byte outside them, that is an error: the plan was incomplete. (The push
//! decoder would also do, but measured 2.5× slower on plain data with arrow-rs 59.) Panics inside arrow-rs on corrupt data are contained and
//! become errors naming the row group and, where it can be found, the column.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::{parquet_to_arrow_schema_by_columns, ProjectionMask};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};

use crate::decode::chunks::FetchedChunks;
use crate::decode::claims::{check_page, ChunkKind};
use crate::decode::decompress::decompress_page;
use crate::decode::levels::check_page_levels;
use crate::decode::page_header::{parse_page_header, PageEntry};
use crate::error::panic_guard::contain;
use crate::error::{Error, Result};
use crate::metadata::clean_parquet_error;

/// Decodes row groups of one file for one projection.
#[derive(Debug, Clone)]
pub(crate) struct HostDecoder {
    path: PathBuf,
    file_len: u64,
    arrow_meta: ArrowReaderMetadata,
    schema: SchemaRef,
    batch_rows: usize,
    /// Pages claiming more uncompressed bytes are refused ([`crate::config::MAX_PAGE_BYTES`]).
    max_page_bytes: u64,
    /// Whether the file's row count is its row groups' sum (else arrow-rs caps what it returns
    /// by the file's, and a row group's decoded rows are not checked against its own).
    counts_agree: bool,
}

/// The top-level string and binary fields of `schema` (a file's Arrow schema) that are flat
/// BYTE_ARRAY columns stored with a dictionary in at least one row group of `metadata`: the
/// fields `keep_dictionaries` turns into `Dictionary(Int32, _)`.
pub(crate) fn dictionary_fields(metadata: &ParquetMetaData, schema: &SchemaRef) -> Vec<String> {
    use arrow::datatypes::DataType;
    use parquet::basic::Encoding;
    let descr = metadata.file_metadata().schema_descr();
    let mut out = Vec::new();
    for field in schema.fields() {
        if !matches!(
            field.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
        ) {
            continue;
        }
        let Some(leaf) = (0..descr.num_columns()).find(|&l| {
            let p = descr.column(l).path().parts().to_vec();
            p.len() == 1 && p[0] == *field.name()
        }) else {
            continue;
        };
        let dictionary = metadata.row_groups().iter().any(|rg| {
            let c = rg.column(leaf);
            c.dictionary_page_offset().is_some()
                || c.encodings()
                    .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY))
        });
        if dictionary {
            out.push(field.name().clone());
        }
    }
    out
}

/// `schema` with the fields named in `names` as `Dictionary(Int32, <their type>)`, and with
/// `views`, its other top-level string and binary fields as views ([`view_type`]).
fn retyped(schema: &SchemaRef, names: &[String], views: bool) -> arrow::datatypes::Schema {
    use arrow::datatypes::{DataType, Field, Schema};
    let fields: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .map(|f| {
            if names.contains(f.name()) {
                let dt = DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                );
                Arc::new(f.as_ref().clone().with_data_type(dt))
            } else if let Some(v) = view_type(f.data_type()).filter(|_| views) {
                Arc::new(f.as_ref().clone().with_data_type(v))
            } else {
                Arc::clone(f)
            }
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The view type a top-level string or binary field takes with string views
/// ([`ScanBuilder::with_string_views`](crate::ScanBuilder::with_string_views)):
/// `Utf8View` for `Utf8` and `LargeUtf8`, `BinaryView` for `Binary` and `LargeBinary`; `None`
/// for every other type.
pub fn view_type(t: &arrow::datatypes::DataType) -> Option<arrow::datatypes::DataType> {
    use arrow::datatypes::DataType;
    match t {
        DataType::Utf8 | DataType::LargeUtf8 => Some(DataType::Utf8View),
        DataType::Binary | DataType::LargeBinary => Some(DataType::BinaryView),
        _ => None,
    }
}

/// `schema` with its top-level string and binary fields as views ([`view_type`]); `None`
/// when it has none.
pub(crate) fn view_schema(schema: &SchemaRef) -> Option<SchemaRef> {
    let any = schema.fields().iter().any(|f| view_type(f.data_type()).is_some());
    any.then(|| Arc::new(retyped(schema, &[], true)))
}

impl HostDecoder {
    /// Rows per batch asked.
    pub(crate) fn batch_rows(&self) -> usize {
        self.batch_rows
    }

    /// A decoder, for a file of `file_len` bytes, of leaf columns `leaves` of the file described by `metadata`, producing
    /// batches of at most `batch_rows` rows (batches never span row groups). With
    /// `keep_dictionaries`, top-level string and binary columns stored with a dictionary
    /// decode to `Dictionary(Int32, _)` arrays instead of their values
    /// ([`dictionary_fields`]); with `string_views`, the other top-level string and binary
    /// columns decode to views ([`view_type`]), which arrow-rs builds as it decodes.
    pub(crate) fn new(
        path: &Path,
        file_len: u64,
        metadata: Arc<ParquetMetaData>,
        leaves: &[usize],
        batch_rows: usize,
        (keep_dictionaries, string_views): (bool, bool),
    ) -> Result<Self> {
        let decode_err = |reason: String| Error::Decode {
            path: path.to_path_buf(),
            row_group: None,
            column: None,
            reason,
        };
        let (arrow_meta, schema) = contain(|| -> parquet::errors::Result<_> {
            let mut arrow_meta =
                ArrowReaderMetadata::try_new(Arc::clone(&metadata), ArrowReaderOptions::new())?;
            let mask = ProjectionMask::leaves(arrow_meta.parquet_schema(), leaves.iter().copied());
            let mut schema = parquet_to_arrow_schema_by_columns(
                arrow_meta.parquet_schema(),
                mask.clone(),
                arrow_meta.metadata().file_metadata().key_value_metadata(),
            )?;
            let keep = if keep_dictionaries {
                dictionary_fields(&metadata, arrow_meta.schema())
            } else {
                Vec::new()
            };
            if !keep.is_empty() || string_views {
                // the file's schema with those fields as dictionaries or views: arrow-rs
                // decodes them so
                let full = retyped(arrow_meta.schema(), &keep, string_views);
                arrow_meta = ArrowReaderMetadata::try_new(
                    metadata,
                    ArrowReaderOptions::new().with_schema(Arc::new(full)),
                )?;
                schema = retyped(&Arc::new(schema), &keep, string_views);
            }
            Ok((arrow_meta, Arc::new(schema)))
        })
        .map_err(|p| {
            decode_err(format!(
                "the Arrow schema could not be derived (panic: {p})"
            ))
        })?
        .map_err(|e| {
            decode_err(format!(
                "the Arrow schema could not be derived: {}",
                clean_parquet_error(&e)
            ))
        })?;
        let md = arrow_meta.metadata();
        let counts_agree = md.file_metadata().num_rows()
            == md.row_groups().iter().map(|g| g.num_rows()).sum::<i64>();
        Ok(HostDecoder {
            path: path.to_path_buf(),
            file_len,
            counts_agree,
            arrow_meta,
            schema,
            batch_rows: batch_rows.max(1),
            max_page_bytes: crate::config::MAX_PAGE_BYTES,
        })
    }

    /// The largest uncompressed page this decoder (and the GPU decoder beside it) accepts.
    pub(crate) fn max_page_bytes(&self) -> u64 {
        self.max_page_bytes
    }

    /// The same decoder, refusing pages that claim more than `bytes` uncompressed bytes.
    pub(crate) fn with_max_page_bytes(mut self, bytes: u64) -> Self {
        self.max_page_bytes = bytes;
        self
    }

    /// The Arrow schema of the decoded batches.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Decodes leaves `leaves` (whole top-level fields of the projection, ascending) of row group
    /// `rg` from their chunks' bytes (file range, bytes: whole chunks, or the parts of chunks
    /// that read some pages), the rows `rows` (ascending ranges of the row group's rows; `None`:
    /// all), which the batches hold end to end. Batches have one column per top-level field
    /// those leaves belong to; for the same row group, rows and batch size, every subset yields
    /// batches of the same row counts, so subsets decoded apart can be joined column-wise.
    pub(crate) fn decode_leaves(
        &self,
        rg: usize,
        leaves: &[usize],
        chunks: &[(Range<u64>, Bytes)],
        rows: Option<&[Range<u64>]>,
    ) -> Result<Vec<RecordBatch>> {
        let schema = self.arrow_meta.parquet_schema();
        let mask = ProjectionMask::leaves(schema, leaves.iter().copied());
        let selection = rows.map(|r| {
            let all = self.arrow_meta.metadata().row_group(rg).num_rows().max(0) as usize;
            RowSelection::from_consecutive_ranges(
                r.iter().map(|r| r.start as usize..r.end as usize),
                all,
            )
        });
        let selection = selection.as_ref();
        self.check_claims(rg, leaves, chunks)?;
        // the rows asked for: arrow-rs reads a chunk's records until its pages end, so a
        // repeated column whose pages hold more rows than the row group says comes back longer
        let want: u64 = match rows {
            Some(r) => r.iter().map(|r| r.end - r.start).sum(),
            None => self.arrow_meta.metadata().row_group(rg).num_rows().max(0) as u64,
        };
        match self.try_decode(rg, chunks, &mask, selection) {
            // (where the footer's row counts disagree, arrow-rs caps what it returns by the
            // file's: that is what the load returns, as the GPU decoder does)
            Ok(b) if leaves.is_empty() => Ok(b),
            Ok(b) if !self.counts_agree => self.checked_output(rg, b),
            Ok(b) => {
                let got: u64 = b.iter().map(|b| b.num_rows() as u64).sum();
                if got == want {
                    return self.checked_output(rg, b);
                }
                Err(Error::Decode {
                    path: self.path.clone(),
                    row_group: Some(rg),
                    column: None,
                    reason: format!(
                        "the pages hold {got} rows where the row group has {want}{}",
                        if rows.is_some() { " (selected)" } else { "" }
                    ),
                })
            }
            Err(reason) => {
                // Find the column to blame: decode the leaves one at a time (error path only).
                let name = |leaf: usize| schema.column(leaf).path().string();
                let leaf = match leaves {
                    [] => None,
                    [only] => Some(*only),
                    _ => leaves.iter().copied().find(|&leaf| {
                        let m = ProjectionMask::leaves(schema, [leaf]);
                        self.try_decode(rg, chunks, &m, selection).is_err()
                    }),
                };
                let reason = match leaf {
                    Some(l) => self.fault_in_chunk(rg, l, chunks, reason),
                    None => reason,
                };
                Err(Error::Decode {
                    path: self.path.clone(),
                    row_group: Some(rg),
                    column: leaf.map(name),
                    reason,
                })
            }
        }
    }

    /// Where in leaf `leaf`'s chunk of row group `rg` the decode failure `reason` lies, as far
    /// as the host's own page walk finds it (arrow-rs's messages do not say): the first page
    /// that does not decompress (the file offset of its header, and why), else `reason` and the
    /// chunk's byte range. Error path only.
    fn fault_in_chunk(
        &self,
        rg: usize,
        leaf: usize,
        chunks: &[(Range<u64>, Bytes)],
        reason: String,
    ) -> String {
        let Some(col) = self.arrow_meta.metadata().row_group(rg).columns().get(leaf) else {
            return reason;
        };
        for (whole, range, bytes) in pieces_of(col, chunks) {
            let (mut off, mut page) = (0usize, 0usize);
            while off < bytes.len() {
                let Ok(header) = parse_page_header(&bytes[off..]) else {
                    break;
                };
                let entry = PageEntry {
                    offset: off,
                    header,
                };
                if entry.data().end > bytes.len() {
                    break;
                }
                if let Err(e) = decompress_page(bytes, page, &entry, col.compression()) {
                    let which = if whole {
                        format!("page {page}")
                    } else {
                        "a page".to_string()
                    };
                    return format!(
                        "{which} (header at byte {} of the file): {}",
                        range.start + off as u64,
                        e.error.reason
                    );
                }
                off = entry.data().end;
                page += 1;
            }
        }
        let (start, len) = crate::plan::chunk_bytes(col);
        format!(
            "{reason} (in the chunk at bytes {start}..{})",
            start.saturating_add(len)
        )
    }

    /// `batches`, whose decimals (at any depth) must be within their declared precision and
    /// whose maps must have no null key: a stored value past the precision (a corrupt page, or
    /// a file whose schema contradicts its data), or a null key of a map whose key field the
    /// schema makes OPTIONAL (arrow-rs reads such a legacy schema; pyarrow refuses it), is an
    /// error naming the column, never an invalid Arrow array.
    fn checked_output(&self, rg: usize, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
        fn check(a: &dyn arrow::array::Array) -> std::result::Result<(), String> {
            use arrow::array::AsArray;
            use arrow::datatypes::{DataType as D, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type};
            let e = |e: arrow::error::ArrowError| {
                format!("a decimal outside its declared precision: {e}")
            };
            match a.data_type() {
                D::Decimal32(p, _) => a.as_primitive::<Decimal32Type>().validate_decimal_precision(*p).map_err(e),
                D::Decimal64(p, _) => a.as_primitive::<Decimal64Type>().validate_decimal_precision(*p).map_err(e),
                D::Decimal128(p, _) => a.as_primitive::<Decimal128Type>().validate_decimal_precision(*p).map_err(e),
                D::Decimal256(p, _) => a.as_primitive::<Decimal256Type>().validate_decimal_precision(*p).map_err(e),
                D::Struct(_) => a.as_struct().columns().iter().try_for_each(|c| check(c.as_ref())),
                D::List(_) => check(a.as_list::<i32>().values().as_ref()),
                D::LargeList(_) => check(a.as_list::<i64>().values().as_ref()),
                D::FixedSizeList(..) => check(a.as_fixed_size_list().values().as_ref()),
                D::Map(..) => match a.as_map().keys().null_count() {
                    0 => check(a.as_map().entries()),
                    n => Err(format!(
                        "{n} null map keys (the schema makes the key field OPTIONAL; map keys \
                         must be present)"
                    )),
                },
                D::Dictionary(..) => a.as_any_dictionary_opt().map_or(Ok(()), |d| check(d.values().as_ref())),
                _ => Ok(()),
            }
        }
        for b in &batches {
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                if let Err(reason) = check(c.as_ref()) {
                    return Err(Error::Decode {
                        path: self.path.clone(),
                        row_group: Some(rg),
                        column: Some(f.name().clone()),
                        reason,
                    });
                }
            }
        }
        Ok(batches)
    }

    /// Every page of the chunks of `leaves` checked against what its bytes can hold
    /// ([`claims`](crate::decode::claims)) before arrow-rs allocates by its header, and its
    /// levels against the column's maxima ([`levels`](crate::decode::levels)); a whole
    /// chunk's pages must hold the row group's rows. Pages are walked until a header does not
    /// parse: arrow-rs then reports that one.
    fn check_claims(
        &self,
        rg: usize,
        leaves: &[usize],
        chunks: &[(Range<u64>, Bytes)],
    ) -> Result<()> {
        let group = self.arrow_meta.metadata().row_group(rg);
        for &leaf in leaves {
            let Some(col) = group.columns().get(leaf) else {
                continue;
            };
            let kind = ChunkKind {
                codec: col.compression(),
                physical: col.column_type(),
                type_length: col.column_descr().type_length(),
            };
            let (max_rep, max_def) = (
                col.column_descr().max_rep_level(),
                col.column_descr().max_def_level(),
            );
            let bad = |reason: String| Error::Decode {
                path: self.path.clone(),
                row_group: Some(rg),
                column: Some(col.column_descr().path().string()),
                reason,
            };
            for (whole, range, bytes) in pieces_of(col, chunks) {
                // data pages' values, v2 pages' rows, whether every data page is v2
                let (mut values, mut rows, mut all_v2) = (0i64, 0i64, true);
                let mut off = 0usize;
                let mut page = 0usize;
                let mut walked = true;
                while off < bytes.len() {
                    let header = match parse_page_header(&bytes[off..]) {
                        Ok(h) => h,
                        // a header arrow-rs would read next (the pages so far hold fewer values
                        // than the chunk): refused here, where the twin's bounded walk says
                        // why, for arrow-rs's Thrift reader can spend seconds skipping the
                        // nested containers a corrupt header claims (found by cargo-fuzz
                        // host_load: 104 bytes of junk before a chunk's first page, 2.7 s)
                        Err(e) if whole && values < col.num_values() => {
                            return Err(bad(format!(
                                "page {page} (header at byte {} of the file): the page header does not parse: {e}",
                                range.start + off as u64
                            )));
                        }
                        // bytes after the last page arrow-rs reads are not its to parse
                        Err(_) => {
                            walked = false;
                            break;
                        }
                    };
                    if let Some(v1) = &header.data_v1 {
                        values += i64::from(v1.num_values);
                        all_v2 = false;
                    }
                    if let Some(v2) = &header.data_v2 {
                        values += i64::from(v2.num_values);
                        rows += i64::from(v2.num_rows);
                    }
                    let entry = PageEntry {
                        offset: off,
                        header,
                    };
                    let checked = check_page(&entry, bytes, kind, self.max_page_bytes).and_then(
                        |()| check_page_levels(bytes, page, &entry, kind.codec, max_rep, max_def),
                    );
                    if let Err(reason) = checked {
                        return Err(bad(format!(
                            "page {page} (header at byte {} of the file): {reason}",
                            range.start + off as u64
                        )));
                    }
                    off = entry.data().end;
                    page += 1;
                }
                // a whole chunk's pages hold the row group's rows: a flat column one value
                // per row, v2 pages their rows (the GPU decoder checks the same)
                let want = group.num_rows();
                let flat = col.column_descr().max_rep_level() == 0;
                let held = if flat {
                    Some(values)
                } else {
                    all_v2.then_some(rows)
                };
                if let Some(held) = held.filter(|&h| whole && walked && h != want) {
                    return Err(bad(format!(
                        "the pages hold {held} {}, the row group {want} rows",
                        if flat { "values" } else { "rows" }
                    )));
                }
            }
        }
        Ok(())
    }

    fn try_decode(
        &self,
        rg: usize,
        chunks: &[(Range<u64>, Bytes)],
        mask: &ProjectionMask,
        selection: Option<&RowSelection>,
    ) -> std::result::Result<Vec<RecordBatch>, String> {
        let run = || -> std::result::Result<Vec<RecordBatch>, String> {
            let pe = |e: parquet::errors::ParquetError| clean_parquet_error(&e);
            let fetched = FetchedChunks::new(self.file_len, chunks.to_vec());
            let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
                fetched,
                self.arrow_meta.clone(),
            )
            .with_projection(mask.clone())
            .with_row_groups(vec![rg])
            .with_batch_size(self.batch_rows);
            if let Some(sel) = selection {
                builder = builder.with_row_selection(sel.clone());
            }
            let reader = builder.build().map_err(pe)?;
            reader
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| clean_parquet_error(&parquet::errors::ParquetError::from(e)))
        };
        match contain(run) {
            Ok(r) => r,
            Err(panic) => Err(format!(
                "corrupt data (the arrow-rs decoder panicked: {})",
                crate::metadata::rephrase(panic)
            )),
        }
    }
}

/// Arrays of one type joined end to end, as `arrow::compute::concat` joins them, except for
/// dictionaries whose values together outgrow their keys (the row groups of a batch each with
/// a dictionary, Int8 keys): those are joined as values and encoded again, one dictionary of
/// the distinct values — what arrow-rs returns for a batch spanning such row groups.
pub(crate) fn join_arrays(
    pieces: &[&dyn arrow::array::Array],
) -> std::result::Result<arrow::array::ArrayRef, arrow::error::ArrowError> {
    use arrow::datatypes::DataType;
    use arrow::error::ArrowError;
    match arrow::compute::concat(pieces) {
        Err(ArrowError::DictionaryKeyOverflowError) => {
            let Some(DataType::Dictionary(_, value)) = pieces.first().map(|p| p.data_type())
            else {
                return Err(ArrowError::DictionaryKeyOverflowError);
            };
            let values = pieces
                .iter()
                .map(|p| arrow::compute::cast(*p, value))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let refs: Vec<&dyn arrow::array::Array> = values.iter().map(|a| a.as_ref()).collect();
            arrow::compute::cast(&arrow::compute::concat(&refs)?, pieces[0].data_type())
        }
        other => other,
    }
}

/// Batches of `schema` joined end to end, column by column as [`join_arrays`] joins them.
pub(crate) fn join_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let columns = (0..schema.fields().len())
        .map(|c| {
            let col: Vec<&dyn arrow::array::Array> =
                batches.iter().map(|b| b.column(c).as_ref()).collect();
            join_arrays(&col)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    RecordBatch::try_new_with_options(
        std::sync::Arc::clone(schema),
        columns,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// The pieces of `chunks` (file range, bytes) that lie in column chunk `col`'s byte range: the
/// whole chunk, or the parts of it that read some pages; each with whether it is the whole.
fn pieces_of<'a>(
    col: &ColumnChunkMetaData,
    chunks: &'a [(Range<u64>, Bytes)],
) -> impl Iterator<Item = (bool, &'a Range<u64>, &'a Bytes)> + 'a {
    let (start, len) = crate::plan::chunk_bytes(col);
    let end = start.saturating_add(len);
    chunks
        .iter()
        .filter(move |(r, _)| r.start >= start && r.end <= end)
        .map(move |(r, b)| (r.start == start && r.end == end, r, b))
}
