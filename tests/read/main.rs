//! Reading files through the public API, host and (where there is one) device: conformance to
//! arrow-rs, datasets, selections, pages, plans, errors, the C API. One test binary, a module
//! per subject. Tests that assume they are alone in the process stay binaries of their own:
//! `stream.rs` and `soak.rs` (they measure the device's live bytes), `faults.rs` (process-wide
//! fault sites), `gpu.rs` (sets an environment variable, measures free device memory).

#[path = "../common/mod.rs"]
mod common;
#[path = "../reference_decoder/mod.rs"]
mod reference_decoder;

mod c_device;
mod conformance;
mod dataset;
mod errors;
mod layout;
mod page_header;
mod pages;
mod plan;
mod reference;
mod selection;
mod spread;
