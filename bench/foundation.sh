#!/usr/bin/env bash
# Run the foundation micro-benchmarks (spindle-bench) RUNS times each, and
# the peer switch benchmarks of the shared harness in the same session, then
# print every figure's median with its individual runs.
#
#   bench/foundation.sh [BUILD_DIR (default build)]
#   env: RUNS (3), OUT (/tmp/spindle-bench: raw output, one file per run),
#        PEERS (../shared/bench relative to the project root)
#
# Single-threaded benchmarks are pinned to CPU 0 so a migration does not
# land in the middle of a timing loop; wake and idle need both workers'
# CPUs, and parked measures memory, so those run unpinned.
set -euo pipefail

suite=foundation
OUT=${OUT:-/tmp/spindle-bench}
. "$(dirname "$0")/lib.sh"

# The peers print prose; turn their summary lines into `name value unit`.
peer_figures() {
  sed -n -e 's/^ucontext swapcontext: \([0-9.]*\) ns.*/peer.swapcontext \1 ns/p' \
         -e 's/^boost.context fiber: \([0-9.]*\) ns.*/peer.boost_fiber \1 ns/p' \
         -e 's/^boost.context jump_fcontext: \([0-9.]*\) ns.*/peer.boost_fcontext \1 ns/p'
}

run_peer() {
  local name=$1 exe=$peers/bin/$1
  if [[ ! -x $exe ]]; then
    echo "foundation.sh: $exe missing (make -C $peers $1)" >&2
    return
  fi
  for i in $(seq "$runs"); do
    echo "+ taskset -c 0 $exe" >&2
    taskset -c 0 "$exe" | tee "$out/$name.$i.raw" | peer_figures >> "$out/all.txt"
  done
}

echo "# loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run switch taskset -c 0 "$bench" switch
run_peer switch_bench
run_peer switch_bench_boost
run spawn taskset -c 0 "$bench" spawn
run parked "$bench" parked
run wake "$bench" wake
run idle "$bench" idle
echo "# loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
medians
