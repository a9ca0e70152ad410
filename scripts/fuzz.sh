#!/usr/bin/env bash
# The cargo-fuzz targets (fuzz/): page_header, footer_plan, host_load, each for SECS seconds
# (default 600) from a seed corpus of small files (the parquet-testing corpus's files under
# 16 KiB, bad_data included, and the bundled sample), with a 2 GiB RSS limit. Needs nightly and
# cargo-fuzz (installed here if missing). Prints each target's run count and what it found.
set -u -o pipefail
cd "$(dirname "$0")/../fuzz" || exit 1
secs=${SECS:-600}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
corpus=${PARQUET_TESTING_DIR:-../../shared/parquet-testing}
for t in ${TARGETS:-page_header footer_plan host_load}; do
  mkdir -p "corpus/$t"
  find "$corpus/data" "$corpus/bad_data" ../testdata -name '*.parquet' -size -16k -exec cp {} "corpus/$t/" \; 2>/dev/null
  if [ "$t" = page_header ]; then
    # page headers: the first 256 bytes after each seed's magic
    for f in "corpus/$t"/*.parquet; do tail -c +5 "$f" | head -c 256 > "$f.hdr"; rm -f "$f"; done
  fi
  echo "=== $t ($secs s)"
  cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 \
    -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|SUMMARY|ERROR|panicked|Done" | head -12
  # shellcheck disable=SC2012  # a glance at the artifacts' names
  ls "artifacts/$t" 2>/dev/null | head -5 | sed 's/^/  artifact: /'
done
