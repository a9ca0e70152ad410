//! Several files read as one: a [`Dataset`] over a list of files or directories (a directory
//! stands for its `*.parquet` files, not recursive, sorted by name, names starting with `_` or
//! `.` skipped), one schema (field names and types must agree; nullability merged), one
//! stream of batches ([`Dataset::batches`]). Each file is a [`ParquetGpuReader`] built with the
//! same options, every one when the dataset is built (footers read in parallel), so that the
//! schema is known, and checked, before the first batch; the next file's reads and decoding
//! start as soon as the current file's last wave is decoded.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use rayon::prelude::*;

use super::stream::Batches;
use super::{LoadReport, ParquetGpuReader, ReaderBuilder};
use crate::array::LoadedBatch;
use crate::error::{Error, Result};
use crate::metadata::merge_schemas;
use crate::plan::RowGroupAccess;

/// Files read as one: a list of files or directories (a directory stands for its `*.parquet`
/// files, not recursive, sorted by name, names starting with `_` or `.` skipped), one schema
/// (field names and types must agree; nullability merged), one stream of batches
/// ([`Dataset::batches`]). Each file is a [`ParquetGpuReader`] built with the same options
/// when the dataset is built (every footer read then, in parallel, and each file's schema
/// checked against the first's); the next file's reads and decoding start as soon as the
/// current file's last wave is decoded. Built by [`ReaderBuilder::build_dataset`]. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Dataset {
    files: Vec<PathBuf>,
    readers: Vec<ParquetGpuReader>,
    /// The files' Arrow schemas merged.
    schema: SchemaRef,
}

/// What [`Dataset::load`] produced: every batch of every file, in file order, with the one
/// schema and each file's report.
#[derive(Debug, Clone)]
pub struct LoadedDataset {
    /// The batches, file after file (each says its file: [`LoadedBatch::file`]).
    pub batches: Vec<LoadedBatch>,
    /// The dataset's schema.
    pub schema: SchemaRef,
    /// One report per file, in order.
    pub reports: Vec<LoadReport>,
}

/// The files of `paths` (files, or directories of `*.parquet` files, listed as a dataset lists
/// them); none at all is an error naming the first path.
pub(super) fn dataset_files<P: AsRef<Path>>(
    paths: impl IntoIterator<Item = P>,
) -> Result<Vec<PathBuf>> {
    let given: Vec<PathBuf> = paths
        .into_iter()
        .map(|p| p.as_ref().to_path_buf())
        .collect();
    let files = crate::source::expand_paths(&given)?;
    if files.is_empty() {
        return Err(Error::SchemaMismatch {
            first: given.first().cloned().unwrap_or_default(),
            second: PathBuf::new(),
            reason: "no Parquet files there".into(),
        });
    }
    Ok(files)
}

impl ReaderBuilder {
    /// Builds a [`Dataset`] over `paths` (files, or directories of `*.parquet` files) with
    /// this builder's options (its own path is ignored): the paths are listed, every file's
    /// footer is read and its plan made here (in parallel), and each file's schema checked
    /// against the first's: a mismatch is an error naming both files and the field.
    pub fn build_dataset<P: AsRef<Path>>(
        self,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Dataset> {
        let files = dataset_files(paths)?;
        let access = vec![None; files.len()];
        Dataset::open(self, files, access)
    }

    /// Builds a [`Dataset`] over `files`, each read as its access plan says (skip / scan /
    /// select per row group, [`ReaderBuilder::with_access_plan`]; `None`: as the builder
    /// says) — the per-file plan a DataFusion scan hands down (`ParquetAccessPlan`). The
    /// files are read in the order given.
    pub fn build_dataset_with_access(
        self,
        files: Vec<(PathBuf, Option<Vec<RowGroupAccess>>)>,
    ) -> Result<Dataset> {
        let (paths, access): (Vec<PathBuf>, Vec<_>) = files.into_iter().unzip();
        if paths.is_empty() {
            return Err(Error::SchemaMismatch {
                first: PathBuf::new(),
                second: PathBuf::new(),
                reason: "no files to read".into(),
            });
        }
        Dataset::open(self, paths, access)
    }
}

impl Dataset {
    /// Every file's reader built (in parallel); their schemas merged in file order, the first
    /// error (in file order) returned.
    fn open(
        builder: ReaderBuilder,
        files: Vec<PathBuf>,
        access: Vec<Option<Vec<RowGroupAccess>>>,
    ) -> Result<Dataset> {
        let built: Vec<Result<ParquetGpuReader>> = (0..files.len())
            .into_par_iter()
            .map(|i| {
                let mut b = builder.clone().with_path(&files[i]);
                if let Some(a) = access[i].clone() {
                    b = b.with_access_plan(a);
                }
                b.build()
            })
            .collect();
        let readers = built.into_iter().collect::<Result<Vec<_>>>()?;
        let mut schema = readers[0].schema().clone();
        for (f, r) in files.iter().zip(&readers).skip(1) {
            schema = merge_schemas(&[(files[0].clone(), schema), (f.clone(), r.schema().clone())])?;
        }
        Ok(Dataset {
            files,
            readers,
            schema,
        })
    }

    /// The files, in the order they are read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The schema of the batches: the first file's, each field nullable where any file has it
    /// nullable. Every batch carries it.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The reader of the first file.
    pub fn first(&self) -> &ParquetGpuReader {
        &self.readers[0]
    }

    /// The readers of the files, in order.
    pub fn readers(&self) -> &[ParquetGpuReader] {
        &self.readers
    }

    /// The batches of every file, in file order, as one stream (`'static`, `Send`).
    pub fn batches(&self) -> DatasetBatches {
        DatasetBatches {
            readers: self.readers.clone(),
            schema: self.schema.clone(),
            next_file: 1,
            current: Some(self.readers[0].batches()),
            current_budgeted: self.readers[0].budgeted(),
            next_started: None,
            done: false,
        }
    }

    /// The [`batches`](Self::batches) of every file as one Arrow C Device Data Interface
    /// stream, with the merged schema (see [`ParquetGpuReader::c_device_stream`]).
    pub fn c_device_stream(&self) -> crate::array::c_device::ArrowDeviceArrayStream {
        crate::array::c_device::export_stream(
            self.schema.clone(),
            self.first().device().location,
            self.batches(),
        )
    }

    /// Every batch of every file, file after file, each file loaded with
    /// [`ParquetGpuReader::load`].
    pub fn load(&self) -> Result<LoadedDataset> {
        let mut batches = Vec::new();
        let mut reports = Vec::with_capacity(self.files.len());
        for r in &self.readers {
            let loaded = r.load()?;
            batches.extend(
                loaded
                    .batches
                    .into_iter()
                    .map(|b| b.with_schema(&self.schema)),
            );
            reports.push(loaded.report);
        }
        Ok(LoadedDataset {
            batches,
            schema: self.schema.clone(),
            reports,
        })
    }
}

/// The stream of a [`Dataset`]: see [`Dataset::batches`]. Yields `Err` at most once, then ends.
pub struct DatasetBatches {
    readers: Vec<ParquetGpuReader>,
    schema: SchemaRef,
    /// The file after the current one.
    next_file: usize,
    current: Option<Batches>,
    /// Whether the current file goes pass after pass under its memory budget (then the next
    /// file's reads wait for it to end).
    current_budgeted: bool,
    /// The next file's stream, started early.
    next_started: Option<Batches>,
    done: bool,
}

impl std::fmt::Debug for DatasetBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetBatches")
            .field("files", &self.readers.len())
            .field("next_file", &self.next_file)
            .finish_non_exhaustive()
    }
}

impl DatasetBatches {
    /// The schema of the batches (see [`Dataset::schema`]).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Starts the next file's stream now (its reads and decoding overlap the current file's
    /// last batches), unless a memory budget keeps the current file's passes alone.
    fn start_next_early(&mut self) {
        if self.next_started.is_some()
            || self.next_file >= self.readers.len()
            || self.current_budgeted
        {
            return;
        }
        self.next_started = Some(self.readers[self.next_file].batches());
    }

    fn step(&mut self) -> Result<Option<LoadedBatch>> {
        loop {
            if let Some(cur) = &mut self.current {
                match cur.next() {
                    Some(b) => {
                        let b = b?;
                        if self.current.as_ref().is_some_and(Batches::produced) {
                            self.start_next_early();
                        }
                        return Ok(Some(b.with_schema(&self.schema)));
                    }
                    None => self.current = None,
                }
            }
            if self.next_file >= self.readers.len() {
                return Ok(None);
            }
            let r = &self.readers[self.next_file];
            let s = match self.next_started.take() {
                Some(s) => s,
                None => r.batches(),
            };
            self.current_budgeted = r.budgeted();
            self.next_file += 1;
            self.current = Some(s);
        }
    }
}

impl Iterator for DatasetBatches {
    type Item = Result<LoadedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                self.current = None;
                self.next_started = None;
                Some(Err(e))
            }
        }
    }
}

impl ParquetGpuReader {
    /// Starts building a [`Dataset`] reader: the options of [`ReaderBuilder`], then
    /// [`ReaderBuilder::build_dataset`] with the files or directories.
    pub fn dataset_builder() -> ReaderBuilder {
        ReaderBuilder::new(Path::new(""))
    }
}
