//! Opening a scan's files: listing the sources, building each file's scan (several in
//! parallel), merging their schemas, and spreading them over several devices.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use rayon::prelude::*;

use super::builder::{default_budget, ScanBuilder};
use super::spread::{OpenPass, Opened, PassFile, Spread, SpreadInput};
use super::{FileScan, Scan};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::metadata::{merge_schemas, FileMetadata};

/// The files of `sources` (files, or directories of `*.parquet` files, listed as
/// [`crate::source::expand_paths`] lists them), each with where its partition directories
/// start; none at all is an error naming the sources.
pub(super) fn list_sources(
    sources: &[PathBuf],
    remote: &crate::config::RemoteSettings,
) -> Result<Vec<(PathBuf, Option<String>)>> {
    let files = crate::source::list_files(sources, remote)?;
    if files.is_empty() {
        return Err(Error::NoFiles {
            sources: sources.to_vec(),
        });
    }
    Ok(files)
}

/// The scan of `files` (access plans not yet applied: `access`) spread over `devices`: the
/// files opened on the first device, each device's budget, and the spread planned
/// ([`Spread::open`]); again with the page index where a row group must be cut into pieces.
pub(super) fn open_spread(
    builder: ScanBuilder,
    files: Vec<PathBuf>,
    access: Vec<Option<Vec<crate::plan::RowGroupAccess>>>,
    mut metas: Vec<Option<Arc<FileMetadata>>>,
    devices: Vec<Device>,
) -> Result<Scan> {
    // every footer read and plan made (in parallel), the schemas checked, on the first device
    let (opened, schema) = open_files_with(
        &builder.clone().with_device(devices[0]),
        &files,
        &access,
        &metas,
    )?;
    let budgets = (devices.iter())
        .map(|d| match (builder.memory_budget, d) {
            (Some(b), _) => Ok(b),
            (None, Device::Cuda(n)) => default_budget(*n, false),
            (None, _) => Ok(u64::MAX / 4),
        })
        .collect::<Result<Vec<u64>>>()?;
    let selected = (access.iter())
        .map(|a| builder.rows.is_some() || a.is_some())
        .collect();
    let b = builder.clone();
    let open_pass: OpenPass = Arc::new(move |p: PassFile<'_>| {
        let mut b = (b.clone())
            .with_path(p.path)
            .with_device(p.device)
            .with_row_groups(p.row_groups.iter().copied())
            .with_memory_budget(p.budget)
            .with_metadata(p.metadata);
        if let Some(rows) = p.rows {
            b = b.with_row_ranges(rows);
        }
        b.build_file()
    });
    let input = SpreadInput {
        files: files.clone(),
        opened,
        schema,
        selected,
        devices: devices.clone(),
        budgets,
        batch_rows: builder.batch_rows as u64,
        keep_dictionaries: builder.keep_dictionaries,
        page_index: builder.page_index,
        open_pass,
    };
    match Spread::open(input)? {
        Opened::Scan(scan) => Ok(scan),
        // a row group too large for a pass: cut into pieces by pages, with the page index
        // (read now when it was not asked for)
        Opened::NeedsPageIndex => {
            open_spread(builder.with_page_index(true), files, access, metas, devices)
        }
        Opened::NeedsHeaderIndex {
            file,
            row_groups,
            leaves,
            meta,
            error,
        } => {
            let f = crate::source::ParquetFile::open_sized(&files[file], &builder.remote, meta.file_len)?;
            match crate::plan::with_header_index(&f, &meta, &row_groups, &leaves)? {
                Some(m) => {
                    metas[file] = Some(Arc::new(m));
                    open_spread(builder, files, access, metas, devices)
                }
                None => Err(error),
            }
        }
    }
}

/// Every file of `files` built with `builder`'s options (several in parallel), each read as
/// its access plan says (`None`: as the builder says), and their schemas merged in file order;
/// the first error in file order is returned.
pub(super) fn open_files(
    builder: &ScanBuilder,
    files: &[PathBuf],
    access: &[Option<Vec<crate::plan::RowGroupAccess>>],
) -> Result<(Vec<FileScan>, SchemaRef)> {
    open_files_with(builder, files, access, &vec![None; files.len()])
}

/// [`open_files`], each file with its footer from `metas` where given.
fn open_files_with(
    builder: &ScanBuilder,
    files: &[PathBuf],
    access: &[Option<Vec<crate::plan::RowGroupAccess>>],
    metas: &[Option<Arc<FileMetadata>>],
) -> Result<(Vec<FileScan>, SchemaRef)> {
    let builders = (0..files.len())
        .map(|i| {
            let mut b = builder.clone().with_path(&files[i]);
            if let Some(a) = access[i].clone() {
                b = b.with_access_plan(a);
            }
            if let Some(m) = metas[i].clone() {
                b = b.with_metadata(m);
            }
            b
        })
        .collect();
    open_builders(builders, files)
}

/// Each of `builders` (one per file of `files`) built (several in parallel), and their
/// schemas merged in file order; the first error in file order is returned.
pub(super) fn open_builders(
    builders: Vec<ScanBuilder>,
    files: &[PathBuf],
) -> Result<(Vec<FileScan>, SchemaRef)> {
    let readers: Vec<FileScan> = if builders.len() == 1 {
        vec![builders.into_iter().next().ok_or(Error::NoFiles {
            sources: files.to_vec(),
        })?
        .build_file()?]
    } else {
        let built: Vec<Result<FileScan>> =
            builders.into_par_iter().map(ScanBuilder::build_file).collect();
        built.into_iter().collect::<Result<_>>()?
    };
    let mut schema = readers[0].schema().clone();
    for (f, r) in files.iter().zip(&readers).skip(1) {
        schema = merge_schemas(&[(files[0].clone(), schema), (f.clone(), r.schema().clone())])?;
    }
    Ok((readers, schema))
}

