//! The host page-header parser and page walk: any bytes give headers or an error, never a
//! panic, and a walk's pages lie inside the bytes.
#![no_main]
use cuparquet::internals::page_header::{page_table, parse_page_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_page_header(data) {
        assert!(h.header_len <= data.len());
    }
    if let Ok(pages) = page_table(data) {
        for p in pages {
            assert!(p.data().end <= data.len());
        }
    }
});
