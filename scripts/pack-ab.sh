#!/usr/bin/env bash
# Development machine: builds the decode benchmark and the gpu and conformance tests (release) of
# an earlier COMMIT in a temporary worktree and packs them into .dev/old.tar.xz, for a same-run
# A/B on the GPU machine (scripts/device-ab.sh). Run after ../shared/device/pack.sh.
set -euo pipefail
commit=${1:?usage: pack-ab.sh COMMIT}
root=$(git rev-parse --show-toplevel); cd "$root"
wt=${AB_WORKTREE:-/tmp/cuparquet-ab-$commit}
[ -d "$wt" ] || git worktree add --detach "$wt" "$commit"
mkdir -p .dev/old
git rev-parse --short HEAD > .dev/COMMIT; git -C "$wt" rev-parse --short HEAD > .dev/old/COMMIT
pick() { python3 -c 'import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"] + "\t" + m["executable"])'; }
(cd "$wt" && cargo bench --no-run --bench decode_device --message-format=json 2>/dev/null | pick
 cd "$wt" && cargo test --release --no-run --test gpu --test conformance --message-format=json 2>/dev/null | pick) \
  | while IFS=$'\t' read -r name exe; do
      case "$name" in decode_device) dst=bench-decode_device ;; *) dst=test-$name ;; esac
      cp "$exe" ".dev/old/$dst" && strip ".dev/old/$dst"
    done
tar -C .dev -cJf .dev/old.tar.xz old && rm -rf .dev/old
du -sh .dev
