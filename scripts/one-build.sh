#!/usr/bin/env bash
# Checks that the workspace is one build: each member built alone (`cargo run --example …`,
# `cargo test -p …`) and the object-store builds (scripts/remote-test.sh) give every dependency
# the features `cargo test --workspace` gives it, so that none of them compiles DataFusion,
# parquet or cuparquet again. A difference is printed with what to add to tools/one-build's
# Cargo.toml. Reads `cargo tree` only (seconds, nothing is built). Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import subprocess, sys

def tree(args):
    out = subprocess.run(
        ["cargo", "tree", "-e", "normal,build,dev", "-f", "{p} {f}", "--prefix", "none"] + args,
        capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        words = line.replace(" (*)", "").replace(" (proc-macro)", "").split()
        if len(words) < 2:
            continue
        # "name vX (path) features": the path names our own packages only
        feats = [w for w in words[2:] if not w.startswith("(")]
        found.setdefault(f"{words[0]} {words[1]}", set()).add(" ".join(feats))
    return found

ours = ("cuparquet ", "cuparquet-")
whole = tree(["--workspace"])
runs = {f"-p {m}": tree(["-p", m]) for m in
        ["cuparquet", "cuparquet-datafusion", "cuparquet-distributed"]}
store = "cuparquet/object-store cuparquet-datafusion/object-store cuparquet-distributed/object-store cuparquet-python/object-store"
# the object-store builds differ in our own crates (the feature itself), nowhere else
runs["--features object-store"] = {k: v for k, v in tree(["--workspace", "--features", store]).items()
                                   if not k.startswith(ours)}
bad = 0
for name, alone in runs.items():
    for dep, feats in sorted(alone.items()):
        if dep in whole and whole[dep] != feats:
            bad += 1
            print(f"{name}: {dep} gets features {sorted(feats)}; the workspace gives it {sorted(whole[dep])}")
if bad:
    print(f"\n{bad} dependencies would be compiled again: name them in tools/one-build/Cargo.toml "
          "with the workspace's features", file=sys.stderr)
    sys.exit(1)
print(f"one build: {len(whole)} packages, the same features alone ({', '.join(runs)}) as in the workspace")
PY
