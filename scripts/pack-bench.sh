#!/usr/bin/env bash
# Development machine: adds the release benchmark binaries to .dev/ (after ../shared/device/pack.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/bin
cargo bench --no-run --message-format=json 2>/dev/null | python3 -c 'import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])' | while IFS=$'\t' read -r name exe; do
  cp "$exe" ".dev/bin/bench-$name" && strip ".dev/bin/bench-$name"
done
du -sh .dev
