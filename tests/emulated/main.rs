//! The CUDA kernels' own sources run on the host through a small emulation of the CUDA
//! features they use (`emu`), each kernel's results checked against the reference decoder and
//! arrow-rs: one test binary, a module per kernel family.

#[path = "../common/mod.rs"]
mod common;
mod emu;
#[path = "../reference_decoder/mod.rs"]
mod reference_decoder;

mod aggregate;
mod concat;
mod decimals;
mod gzip;
mod kernels;
mod like;
mod lz4;
mod nested;
mod plain;
mod pred_cols;
mod snappy;
mod views;
