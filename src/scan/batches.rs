//! [`Batches`]: the one stream of a [`Scan`](super::Scan) — its files one after another (the
//! next file's stream started as soon as the current one's last wave is decoded), or over
//! several devices the passes of the spread in load order.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use super::file::FileScan;
use super::spread::{DeviceWork, SpreadBatches};
use super::stream::FileBatches;
use crate::array::LoadedBatch;
use crate::error::Result;
use crate::io::{IoReport, RangeReader};

/// The stream of a [`Scan`](super::Scan): see [`Scan::batches`](super::Scan::batches).
/// `'static` and `Send`; yields `Err` at most once, then ends. Dropping it stops the reads and
/// decoders (the waves in flight are finished).
pub struct Batches {
    schema: SchemaRef,
    inner: Inner,
    /// Hive-partitioned sources: the partition columns appended to each batch, and the
    /// schema they take.
    partitions: Option<(Arc<super::partitions::Partitions>, SchemaRef)>,
}

enum Inner {
    Files(Box<Files>),
    Spread(SpreadBatches),
}

/// The files of a scan on one device, one after another.
struct Files {
    files: Vec<FileScan>,
    /// The range reader every file reads through, instead of its own.
    reader: Option<Arc<dyn RangeReader>>,
    /// Whether batches take the scan's merged schema (several files).
    restamp: bool,
    /// The file after the current one.
    next_file: usize,
    current: Option<FileBatches>,
    /// Whether the current file goes pass after pass under its memory budget (then the next
    /// file's reads wait for it to end).
    current_budgeted: bool,
    /// The next file's stream, started early.
    next_started: Option<FileBatches>,
    /// What the files before the current one read.
    io: IoReport,
    done: bool,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Batches");
        match &self.inner {
            Inner::Files(x) => d
                .field("files", &x.files.len())
                .field("next_file", &x.next_file)
                .field("current", &x.current),
            Inner::Spread(x) => d.field("spread", x),
        };
        d.finish_non_exhaustive()
    }
}

impl Batches {
    pub(super) fn files(
        files: Vec<FileScan>,
        schema: SchemaRef,
        reader: Option<Arc<dyn RangeReader>>,
    ) -> Self {
        let current = files.first().map(|f| f.stream(reader.clone()));
        let current_budgeted = files.first().is_some_and(FileScan::budgeted);
        Batches {
            schema,
            partitions: None,
            inner: Inner::Files(Box::new(Files {
                restamp: files.len() > 1,
                files,
                reader,
                next_file: 1,
                current,
                current_budgeted,
                next_started: None,
                io: IoReport::default(),
                done: false,
            })),
        }
    }

    pub(super) fn spread(schema: SchemaRef, spread: SpreadBatches) -> Self {
        Batches {
            schema,
            partitions: None,
            inner: Inner::Spread(spread),
        }
    }

    /// The batches with `partitions`' columns appended, taking `schema`.
    pub(super) fn with_partitions(
        mut self,
        partitions: Arc<super::partitions::Partitions>,
        schema: SchemaRef,
    ) -> Self {
        self.partitions = Some((partitions, schema));
        self
    }

    /// The schema of the batches (see [`Scan::schema`](super::Scan::schema)).
    pub fn schema(&self) -> &SchemaRef {
        match &self.partitions {
            Some((_, s)) => s,
            None => &self.schema,
        }
    }

    /// What the batches handed over so far read: every request with the path it took.
    pub fn io_report(&self) -> IoReport {
        match &self.inner {
            Inner::Files(x) => {
                let mut io = x.io.clone();
                if let Some(c) = &x.current {
                    io.absorb(c.io_report());
                }
                io
            }
            Inner::Spread(x) => x.io_report(),
        }
    }

    /// Over several devices: what each device did so far (empty otherwise).
    pub fn work(&self) -> &[DeviceWork] {
        match &self.inner {
            Inner::Files(_) => &[],
            Inner::Spread(x) => x.work(),
        }
    }
}

impl Files {
    /// Starts the next file's stream now (its reads and decoding overlap the current file's
    /// last batches), unless a memory budget keeps the current file's passes alone.
    fn start_next_early(&mut self) {
        if self.next_started.is_some()
            || self.next_file >= self.files.len()
            || self.current_budgeted
        {
            return;
        }
        self.next_started = Some(self.files[self.next_file].stream(self.reader.clone()));
    }

    fn step(&mut self, schema: &SchemaRef) -> Result<Option<LoadedBatch>> {
        loop {
            if let Some(cur) = &mut self.current {
                match cur.next() {
                    Some(b) => {
                        let b = b?;
                        if self.current.as_ref().is_some_and(FileBatches::produced) {
                            self.start_next_early();
                        }
                        return Ok(Some(if self.restamp {
                            b.with_schema(schema)
                        } else {
                            b
                        }));
                    }
                    None => {
                        if let Some(done) = self.current.take() {
                            self.io.absorb(done.io_report());
                        }
                    }
                }
            }
            if self.next_file >= self.files.len() {
                return Ok(None);
            }
            let f = &self.files[self.next_file];
            let s = match self.next_started.take() {
                Some(s) => s,
                None => f.stream(self.reader.clone()),
            };
            self.current_budgeted = f.budgeted();
            self.next_file += 1;
            self.current = Some(s);
        }
    }

    fn next(&mut self, schema: &SchemaRef) -> Option<Result<LoadedBatch>> {
        if self.done {
            return None;
        }
        match self.step(schema) {
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

impl Iterator for Batches {
    type Item = Result<LoadedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = match &mut self.inner {
            Inner::Files(x) => x.next(&self.schema),
            Inner::Spread(x) => x.next(),
        };
        match (&self.partitions, b) {
            (Some((p, schema)), Some(Ok(b))) => Some(p.append(b, schema)),
            (_, b) => b,
        }
    }
}
