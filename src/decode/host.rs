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
use parquet::file::metadata::ParquetMetaData;

use crate::decode::chunks::FetchedChunks;
use crate::decode::claims::{check_page, ChunkKind};
use crate::decode::page_header::{parse_page_header, PageEntry};
use crate::decode::panic_guard::contain;
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

/// `schema` with the fields named in `names` as `Dictionary(Int32, <their type>)`.
fn with_dictionaries(schema: &SchemaRef, names: &[String]) -> arrow::datatypes::Schema {
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
            } else {
                Arc::clone(f)
            }
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

impl HostDecoder {
    /// A decoder, for a file of `file_len` bytes, of leaf columns `leaves` of the file described by `metadata`, producing
    /// batches of at most `batch_rows` rows (batches never span row groups). With
    /// `keep_dictionaries`, top-level string and binary columns stored with a dictionary
    /// decode to `Dictionary(Int32, _)` arrays instead of their values
    /// ([`dictionary_fields`]).
    pub(crate) fn new(
        path: &Path,
        file_len: u64,
        metadata: Arc<ParquetMetaData>,
        leaves: &[usize],
        batch_rows: usize,
        keep_dictionaries: bool,
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
            if !keep.is_empty() {
                // the file's schema with those fields as dictionaries: arrow-rs decodes them so
                let full = with_dictionaries(arrow_meta.schema(), &keep);
                arrow_meta = ArrowReaderMetadata::try_new(
                    metadata,
                    ArrowReaderOptions::new().with_schema(Arc::new(full)),
                )?;
                schema = with_dictionaries(&Arc::new(schema), &keep);
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
        Ok(HostDecoder {
            path: path.to_path_buf(),
            file_len,
            arrow_meta,
            schema,
            batch_rows: batch_rows.max(1),
            max_page_bytes: crate::config::MAX_PAGE_BYTES,
        })
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
        match self.try_decode(rg, chunks, &mask, selection) {
            Ok(b) => Ok(b),
            Err(reason) => {
                // Find the column to blame: decode the leaves one at a time (error path only).
                let name = |leaf: usize| schema.column(leaf).path().string();
                let column = match leaves {
                    [] => None,
                    [only] => Some(name(*only)),
                    _ => leaves
                        .iter()
                        .find(|&&leaf| {
                            let m = ProjectionMask::leaves(schema, [leaf]);
                            self.try_decode(rg, chunks, &m, selection).is_err()
                        })
                        .map(|&leaf| name(leaf)),
                };
                Err(Error::Decode {
                    path: self.path.clone(),
                    row_group: Some(rg),
                    column,
                    reason,
                })
            }
        }
    }

    /// Every page of the chunks of `leaves` checked against what its bytes can hold
    /// ([`claims`](crate::decode::claims)) before arrow-rs allocates by its header. Pages are
    /// walked until a header does not parse: arrow-rs then reports that one.
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
            let (start, len) = col.byte_range();
            let end = start.saturating_add(len);
            let kind = ChunkKind {
                codec: col.compression(),
                physical: col.column_type(),
                type_length: col.column_descr().type_length(),
            };
            for (range, bytes) in chunks
                .iter()
                .filter(|(r, _)| r.start >= start && r.end <= end)
            {
                let mut off = 0usize;
                let mut page = 0usize;
                while off < bytes.len() {
                    let Ok(header) = parse_page_header(&bytes[off..]) else {
                        break;
                    };
                    let entry = PageEntry {
                        offset: off,
                        header,
                    };
                    if let Err(reason) = check_page(&entry, bytes, kind, self.max_page_bytes) {
                        return Err(Error::Decode {
                            path: self.path.clone(),
                            row_group: Some(rg),
                            column: Some(col.column_descr().path().string()),
                            reason: format!(
                                "page {page} (header at byte {} of the file): {reason}",
                                range.start + off as u64
                            ),
                        });
                    }
                    off = entry.data().end;
                    page += 1;
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
