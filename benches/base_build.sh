# Sourced by the benches that compare with an earlier build: `base_build REV` builds REV in a
# git worktree (its own target directory, kept for the next run) and prints the binary's path.
base_build() {
    local rev work
    rev="$(git rev-parse --short "$1")"
    work="${SAME_OUTPUT_DIR:-${TMPDIR:-/tmp}/tracehound-same-output}"
    mkdir -p "$work"
    if [ ! -d "$work/base-$rev" ]; then
        git worktree add --detach "$work/base-$rev" "$rev" > /dev/null
    fi
    (cd "$work/base-$rev" && CARGO_TARGET_DIR="$work/target-base" cargo build --release -q)
    echo "$work/target-base/release/tracehound"
}
