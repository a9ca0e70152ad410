#!/usr/bin/env bash
# Development machine, after ../shared/device/pack.sh: adds the release benchmark binaries to
# .dev/bin and compresses .dev/bin into .dev/bin.tar.xz so that everything fits the 64 MiB that
# can travel to the GPU machine (scripts/device-run.sh unpacks it there).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/bin
cargo bench --workspace --no-run --message-format=json 2>/dev/null | python3 -c 'import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])' | while IFS=$'\t' read -r name exe; do
  cp "$exe" ".dev/bin/bench-$name" && strip ".dev/bin/bench-$name"
done
tar -C .dev -cJf .dev/bin.tar.xz bin && rm -rf .dev/bin
du -sh .dev
