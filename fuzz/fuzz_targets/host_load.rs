//! Host decode: any file loads (whatever arrow-rs reads, checked as the test suite checks it)
//! or fails with a clear error naming the file, never a panic, an abort or a runaway
//! allocation (run with -rss_limit_mb).
#![no_main]
use cuparquet::{Device, Scan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!(
        "cuparquet-fuzz-load-{}.parquet",
        std::process::id()
    ));
    std::fs::write(&path, data).unwrap();
    let r = Scan::builder(&path)
        .with_device(Device::Host)
        .with_nthreads(1)
        .with_max_page_size(64 << 20)
        .build()
        .and_then(|r| r.load());
    if let Err(e) = r {
        let msg = e.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && !msg.contains('\n'),
            "{msg}"
        );
    }
});
