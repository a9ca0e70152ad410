//! Hands batches to other GPU code through the Arrow C Device Data Interface: each batch
//! exported without a copy (its device buffers themselves, on `ARROW_DEVICE_CUDA`, or host
//! buffers where there is no GPU), what a consumer sees of it, and the batch read back by the
//! importer as a check. A C consumer of the same stream is `examples/c/stream.c`.
//!
//! `cargo run --example 03-c-device-export [FILE] [DEVICE]`

use cuparquet::array::c_device::{import_c_device, ARROW_DEVICE_CUDA};
use cuparquet::{Device, Scan};

fn main() -> cuparquet::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "testdata/lineitem-sample.parquet".into());
    let device: Device = args.next().as_deref().unwrap_or("auto").parse()?;
    let scan = Scan::builder(&path).with_device(device).build()?;
    println!(
        "{path} → {} ({})",
        scan.files()[0].device().location,
        scan.files()[0].device().reason
    );
    for batch in scan.batches() {
        let batch = batch?;
        // what another library receives: a schema and a struct array whose children are the
        // columns; it releases them when done (dropping them here does the same)
        let (schema, array) = batch.to_c_device()?;
        let first = (array.array.n_children > 0).then(|| {
            // SAFETY: an exported struct array has n_children valid child pointers, and a
            // child of a fixed-width or string column has its values in buffers[1]
            unsafe {
                let child = &**array.array.children;
                (child.n_buffers > 1).then(|| *child.buffers.add(1))
            }
        });
        println!(
            "{} rows as {} children of {:?}: {} {}, sync_event {:?}, first column's values at {:?}",
            array.array.length,
            array.array.n_children,
            schema.format(),
            if array.device_type == ARROW_DEVICE_CUDA {
                "cuda"
            } else {
                "cpu"
            },
            array.device_id,
            array.sync_event,
            first.flatten(),
        );
        // read back (copied from the device) and compared with the batch
        // SAFETY: an array just exported, with its schema
        let back = unsafe { import_c_device(&schema, array) }?;
        assert_eq!(back.columns(), batch.to_host()?.columns());
    }
    Ok(())
}
