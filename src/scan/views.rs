//! A device's batches finished as the reader yields them: the row filter
//! ([`super::row_filter`]), then string and binary columns as views where they were asked for
//! ([`ScanBuilder::with_string_views`](super::ScanBuilder::with_string_views): the host
//! decodes them as views; a device builds them after the filter, from offsets).

use super::ReaderState;
use crate::array::LoadedBatch;
use crate::error::Result;

impl ReaderState {
    /// Whether decoded batches need finishing ([`Self::finish`]).
    pub(super) fn finishes(&self) -> bool {
        self.row_filter.is_some() || self.views.is_some()
    }

    /// `batches` as the reader yields them: the rows the row filter keeps, and a device's
    /// string and binary columns as views where they were asked for.
    pub(super) fn finish(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        self.with_views(self.filter_rows(batches)?)
    }

    /// A device's `batches` with their string and binary columns as views where they were
    /// asked for; unchanged otherwise.
    pub(super) fn with_views(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        match &self.views {
            None => Ok(batches),
            Some(schema) => batches
                .into_iter()
                .map(|b| {
                    b.map_device(|d, ordinal| crate::decode::gpu::to_views(d, schema, ordinal))
                        .map_err(|e| e.in_file(&self.path))
                })
                .collect(),
        }
    }
}
