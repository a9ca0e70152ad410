//! Device decode tests: the GPU kernels against the reference decoder, the plan on a device,
//! nvCOMP. Each test skips with a printed reason where there is no CUDA device (and fails under
//! `CUPARQUET_REQUIRE_GPU=1`). `tests/gpu.rs` stays a binary of its own: it sets
//! `CUPARQUET_KERNEL_CACHE` and measures the device's free memory, alone.

#[path = "../common/mod.rs"]
mod common;
#[path = "../reference_decoder/mod.rs"]
mod reference_decoder;

mod gpu_decode;
mod gpu_plan;
mod nvcomp;
