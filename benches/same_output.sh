#!/usr/bin/env bash
# Does this tree print what BASE_REV printed, on every sample trace? Builds BASE_REV in a git
# worktree (its own target directory, kept for the next run) and this tree, both in release,
# writes both builds' outputs with benches/outputs.sh and diffs them.
#
#   benches/same_output.sh BASE_REV
#
# Exit 0 when every output is byte-identical; otherwise the differing files are listed.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:?usage: benches/same_output.sh BASE_REV}"
WORK="${SAME_OUTPUT_DIR:-${TMPDIR:-/tmp}/tracehound-same-output}"
rev="$(git rev-parse --short "$BASE")"
source benches/base_build.sh
BASE_BIN="$(base_build "$BASE")"
cargo build --release -q
TARGET="${CARGO_TARGET_DIR:-target}"
rm -rf "$WORK/out-base" "$WORK/out-head"
# The base's outputs are taken on this tree's sample traces, so only the binary differs.
benches/outputs.sh "$BASE_BIN" "$WORK/out-base" > /dev/null
benches/outputs.sh "$TARGET/release/tracehound" "$WORK/out-head" > /dev/null
sed -i "s#$WORK/out-base#OUT#g; s#$WORK/out-head#OUT#g" "$WORK"/out-*/* 2> /dev/null || true
if diff -rq "$WORK/out-base" "$WORK/out-head"; then
    echo "same output as $rev on $(ls "$WORK/out-head" | wc -l) files"
else
    echo "output differs from $rev (diff -r $WORK/out-base $WORK/out-head)"
    exit 1
fi
