#!/usr/bin/env bash
# The cargo-fuzz targets, each for SECS seconds (default 600), with a 2 GiB RSS limit; TARGETS
# picks some (default all). Needs nightly and cargo-fuzz (installed here if missing). Prints
# each target's run count and what it found.
#   page_header, footer_plan, host_load (fuzz/): parsers and the host load, seeded with the
#     parquet-testing corpus's files under 16 KiB (bad_data included) and the bundled sample;
#   row_filter (fuzz/): a filter tree and its text over a random batch, the rows kept equal to
#     arrow-rs's compute of the tree (CUPARQUET_FUZZ_DEVICE=cuda:0: the device's too);
#   capi (fuzz/): the C API's entry points with nulls, non-UTF-8, huge column lists, streams
#     used after release;
#   codec (fuzz/codec, a package of its own: it builds DataFusion): the distributed codec's
#     decoding of a shipped scan, raw bytes and edits of a real one.
set -u -o pipefail
cd "$(dirname "$0")/../fuzz" || exit 1
secs=${SECS:-600}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
corpus=${PARQUET_TESTING_DIR:-../../shared/parquet-testing}
for t in ${TARGETS:-page_header footer_plan host_load row_filter capi codec}; do
  dir=() at=.
  [ "$t" = codec ] && dir=(--fuzz-dir codec) at=codec
  mkdir -p "$at/corpus/$t"
  case $t in
    page_header | footer_plan | host_load)
      find "$corpus/data" "$corpus/bad_data" ../testdata -name '*.parquet' -size -16k \
        -exec cp {} "corpus/$t/" \; 2>/dev/null ;;
  esac
  if [ "$t" = page_header ]; then
    # page headers: the first 256 bytes after each seed's magic
    for f in "corpus/$t"/*.parquet; do tail -c +5 "$f" | head -c 256 > "$f.hdr"; rm -f "$f"; done
  fi
  echo "=== $t ($secs s)"
  cargo +nightly fuzz run "${dir[@]}" "$t" "$at/corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 \
    -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|SUMMARY|ERROR|panicked|Done" | head -12
  # shellcheck disable=SC2012  # a glance at the artifacts' names
  ls "$at/artifacts/$t" 2>/dev/null | head -5 | sed 's/^/  artifact: /'
done
