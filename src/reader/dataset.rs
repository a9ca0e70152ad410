//! Several files read as one: a [`Dataset`] over a list of files or directories (a directory
//! stands for its `*.parquet` files, not recursive, sorted by name, names starting with `_` or
//! `.` skipped), one schema (field names and types must agree; nullability merged), one
//! stream of batches ([`Dataset::batches`]). Each file is a [`ParquetGpuReader`] built with the
//! same options; the next file's footer is read while the current file streams, and its reads
//! and decoding start as soon as the current file's last wave is decoded.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;

use super::stream::Batches;
use super::{LoadReport, ParquetGpuReader, ReaderBuilder};
use crate::array::LoadedBatch;
use crate::error::{Error, Result};
use crate::metadata::merge_schemas;
use crate::plan::RowGroupAccess;

/// Files read as one: a list of files or directories (a directory stands for its `*.parquet`
/// files, not recursive, sorted by name, names starting with `_` or `.` skipped), one schema
/// (field names and types must agree; nullability merged), one stream of batches
/// ([`Dataset::batches`]). Each file is a [`ParquetGpuReader`] built with the same options;
/// the next file's footer is read while the current file streams, and its reads and decoding
/// start as soon as the current file's last wave is decoded. Built by
/// [`ReaderBuilder::build_dataset`].
#[derive(Debug, Clone)]
pub struct Dataset {
    files: Vec<PathBuf>,
    /// Per file, its access plan ([`ReaderBuilder::build_dataset_with_access`]).
    access: Vec<Option<Vec<RowGroupAccess>>>,
    builder: ReaderBuilder,
    first: ParquetGpuReader,
    /// Each file's Arrow schema as read so far, the first's first.
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

impl ReaderBuilder {
    /// Builds a [`Dataset`] over `paths` (files, or directories of `*.parquet` files) with
    /// this builder's options (its own path is ignored): the paths are listed, the first
    /// file's footer is read and its plan made here; each further file's when the stream
    /// reaches it, its schema checked against the first's then.
    pub fn build_dataset<P: AsRef<Path>>(
        self,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Dataset> {
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
    fn open(
        builder: ReaderBuilder,
        files: Vec<PathBuf>,
        access: Vec<Option<Vec<RowGroupAccess>>>,
    ) -> Result<Dataset> {
        let first = file_builder(&builder, &files, &access, 0).build()?;
        let schema = first.schema().clone();
        Ok(Dataset {
            files,
            access,
            builder,
            first,
            schema,
        })
    }
}

/// The builder of file `i`: `builder`'s options, its path, its access plan.
fn file_builder(
    builder: &ReaderBuilder,
    files: &[PathBuf],
    access: &[Option<Vec<RowGroupAccess>>],
    i: usize,
) -> ReaderBuilder {
    let b = builder.clone().with_path(&files[i]);
    match access.get(i).cloned().flatten() {
        Some(a) => b.with_access_plan(a),
        None => b,
    }
}

impl Dataset {
    /// The files, in the order they are read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The schema of the batches: the first file's, each field nullable where any file read
    /// so far has it nullable (batches of a later file whose fields are nullable where the
    /// first's are not carry the merged schema).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The reader of the first file.
    pub fn first(&self) -> &ParquetGpuReader {
        &self.first
    }

    /// The batches of every file, in file order, as one stream (`'static`, `Send`).
    pub fn batches(&self) -> DatasetBatches {
        DatasetBatches {
            files: self.files.clone(),
            access: self.access.clone(),
            builder: self.builder.clone(),
            first_schema: (self.files[0].clone(), self.schema.clone()),
            schema: self.schema.clone(),
            next_file: 1,
            current: Some(self.first.batches()),
            current_budgeted: self.first.budgeted(),
            next: None,
            next_started: None,
            done: false,
        }
    }

    /// Every batch of every file, file after file, each file loaded with
    /// [`ParquetGpuReader::load`] (the next file's footer read while one loads).
    pub fn load(&self) -> Result<LoadedDataset> {
        let mut batches = Vec::new();
        let mut reports = Vec::with_capacity(self.files.len());
        let mut schema = self.schema.clone();
        let mut reader = self.first.clone();
        for i in 0..self.files.len() {
            let after = (i + 1 < self.files.len())
                .then(|| file_builder(&self.builder, &self.files, &self.access, i + 1));
            let (loaded, next) = std::thread::scope(|s| {
                let h = after.map(|b| s.spawn(move || b.build()));
                (reader.load(), h.map(|h| h.join()))
            });
            let loaded = loaded?;
            schema = merge_schemas(&[
                (self.files[0].clone(), schema),
                (self.files[i].clone(), loaded.schema.clone()),
            ])?;
            batches.extend(loaded.batches);
            reports.push(loaded.report);
            match next {
                Some(Ok(r)) => reader = r?,
                Some(Err(_)) => {
                    return Err(Error::footer(
                        &self.files[i + 1],
                        "the thread reading its footer panicked",
                    ))
                }
                None => {}
            }
        }
        let batches = batches
            .into_iter()
            .map(|b| b.with_schema(&schema))
            .collect();
        Ok(LoadedDataset {
            batches,
            schema,
            reports,
        })
    }
}

/// The stream of a [`Dataset`]: see [`Dataset::batches`]. Yields `Err` at most once, then ends.
pub struct DatasetBatches {
    files: Vec<PathBuf>,
    access: Vec<Option<Vec<RowGroupAccess>>>,
    builder: ReaderBuilder,
    first_schema: (PathBuf, SchemaRef),
    schema: SchemaRef,
    /// The file after the current one.
    next_file: usize,
    current: Option<Batches>,
    /// Whether the current file goes pass after pass under its memory budget (then the next
    /// file's reads wait for it to end).
    current_budgeted: bool,
    /// The next file's reader, its footer being read.
    next: Option<std::thread::JoinHandle<Result<ParquetGpuReader>>>,
    /// The next file's reader and stream, started early.
    next_started: Option<(ParquetGpuReader, Batches)>,
    done: bool,
}

impl std::fmt::Debug for DatasetBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetBatches")
            .field("files", &self.files.len())
            .field("next_file", &self.next_file)
            .finish_non_exhaustive()
    }
}

impl DatasetBatches {
    /// The schema of the batches (see [`Dataset::schema`]).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Starts reading the next file's footer, if there is a next file and it has not started.
    fn prefetch_footer(&mut self) {
        if self.next.is_some() || self.next_started.is_some() {
            return;
        }
        if self.next_file < self.files.len() {
            let b = file_builder(&self.builder, &self.files, &self.access, self.next_file);
            self.next = std::thread::Builder::new()
                .name("cuparquet-footer".into())
                .spawn(move || b.build())
                .ok();
        }
    }

    /// The next file's reader: its footer read (waiting for the prefetch), its schema checked
    /// against the first file's and merged.
    fn next_reader(&mut self) -> Result<ParquetGpuReader> {
        let path = self.files[self.next_file].clone();
        let r = match self.next.take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::footer(&path, "the thread reading its footer panicked"))??,
            None => {
                file_builder(&self.builder, &self.files, &self.access, self.next_file).build()?
            }
        };
        self.schema = merge_schemas(&[
            (self.first_schema.0.clone(), self.schema.clone()),
            (path, r.schema().clone()),
        ])?;
        Ok(r)
    }

    /// Starts the next file's stream now (its reads and decoding overlap the current file's
    /// last batches), unless a memory budget keeps the current file's passes alone.
    fn start_next_early(&mut self) -> Result<()> {
        if self.next_started.is_some()
            || self.next_file >= self.files.len()
            || self.current_budgeted
        {
            return Ok(());
        }
        let r = self.next_reader()?;
        let s = r.batches();
        self.next_started = Some((r, s));
        Ok(())
    }

    fn step(&mut self) -> Result<Option<LoadedBatch>> {
        loop {
            if self.current.is_some() {
                self.prefetch_footer();
            }
            if let Some(cur) = &mut self.current {
                match cur.next() {
                    Some(b) => {
                        let b = b?;
                        if self.current.as_ref().is_some_and(Batches::produced) {
                            self.start_next_early()?;
                        }
                        return Ok(Some(b.with_schema(&self.schema)));
                    }
                    None => self.current = None,
                }
            }
            if self.next_file >= self.files.len() {
                return Ok(None);
            }
            let (r, s) = match self.next_started.take() {
                Some(x) => x,
                None => {
                    let r = self.next_reader()?;
                    let s = r.batches();
                    (r, s)
                }
            };
            self.next_file += 1;
            self.current_budgeted = r.budgeted();
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
