#!/usr/bin/env bash
# Development machine: builds the benchmarks of BENCHES (default decode_device) and the gpu and
# conformance tests (release; AB_TESTS: others, or none when empty) of an earlier COMMIT in a temporary worktree and packs them into .dev/old.tar.xz, for a same-run
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
benches=$(for b in ${BENCHES:-decode_device}; do echo "--bench $b"; done)
# shellcheck disable=SC2086
(cd "$wt" && cargo bench --no-run --workspace $benches --message-format=json 2>/dev/null | pick
 tests=$(for t in ${AB_TESTS-gpu conformance}; do echo "--test $t"; done)
 [ -z "$tests" ] || cargo test --release --no-run $tests --message-format=json 2>/dev/null | pick) \
  | while IFS=$'\t' read -r name exe; do
      case "$name" in *_device) dst=bench-$name ;; *) dst=test-$name ;; esac
      cp "$exe" ".dev/old/$dst" && strip ".dev/old/$dst"
    done
tar -C .dev -cJf .dev/old.tar.xz old && rm -rf .dev/old
du -sh .dev
