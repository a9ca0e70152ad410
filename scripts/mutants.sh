#!/usr/bin/env bash
# The structured-mutation harness's full run (issue 18): pyarrow, DuckDB and Polars files
# (scripts/py/writers.py, which installs them with pip) and the harness's own, N mutants per class
# and file (default 3; real bombs inflate to 64 MiB), through the host backend and, with
# DEVICE=cuda:0, the GPU; then pyarrow reads every mutant as a second oracle:
#   - a mutant we load that arrow-rs AND pyarrow refuse is a defect (the harness already fails
#     on any load arrow-rs refuses);
#   - the table counts, per class, where pyarrow agrees with our refusals.
# Usage: bash scripts/mutants.sh [OUT_DIR]     (N=3 DEVICE=cuda:0 SEED=... as environment)
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:-target/mutants}
rm -rf "$out"; mkdir -p "$out/files" "$out/kept"
python3 scripts/py/writers.py "$out/files" --rows "${ROWS:-5000}" >/dev/null
CUPARQUET_MUTANTS=${N:-3} CUPARQUET_MUTANTS_FILES="$out/files" CUPARQUET_MUTANTS_KEEP="$out/kept" \
  CUPARQUET_MUTANTS_DEVICE=${DEVICE:-} ${SEED:+CUPARQUET_MUTANTS_SEED=$SEED} \
  cargo test --release --test mutants mutants_load -- --nocapture 2>&1 | grep -vE "^test .* ok$|^\s*$" | tail -60
rc=${PIPESTATUS[0]}
python3 - "$out/kept" <<'PY'
import collections, os, sys
import pyarrow.parquet as pq
kept = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(kept, "mutants.tsv")) if l.strip()]
table = collections.defaultdict(collections.Counter)
bad = []
for name, cls, what, *outcomes in rows:
    try:
        pq.read_table(os.path.join(kept, name))
        py = "reads"
    except Exception:
        py = "refuses"
    for o in outcomes:
        where, label = o.rsplit(":", 1)
        if not where.endswith("/whole"):
            continue
        table[cls][f"{label} / pyarrow {py}"] += 1
        if label in ("equal",) or label.startswith("LOADED"):
            if py == "refuses" and label.startswith("LOADED"):
                bad.append(f"{name} ({what}): loaded; arrow-rs and pyarrow refuse")
print(f"pyarrow over {len(rows)} mutants (whole-file loads):")
for cls in sorted(table):
    print(f"  {cls:<15} " + ", ".join(f"{k} {v}" for k, v in sorted(table[cls].items())))
for b in bad:
    print("DEFECT", b)
sys.exit(1 if bad else 0)
PY
prc=$?
exit $(( rc | prc ))
