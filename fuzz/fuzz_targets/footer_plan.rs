//! Footer and plan: any file gives a reader (footer parsed and checked, the plan made) or a
//! clear error naming the file, never a panic.
#![no_main]
use cuparquet::{Device, Scan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!(
        "cuparquet-fuzz-footer-{}.parquet",
        std::process::id()
    ));
    std::fs::write(&path, data).unwrap();
    for page_index in [false, true] {
        match Scan::builder(&path)
            .with_device(Device::Host)
            .with_page_index(page_index)
            .build()
        {
            Ok(r) => {
                let _ = r.files()[0].plan().requests.len();
            }
            Err(e) => assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
        }
    }
});
