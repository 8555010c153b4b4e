#!/usr/bin/env bash
# Run the IOManager and hook micro-benchmarks (pingpong, timers, tickle,
# sleepers, lateness, hooked_rw) RUNS times each and print every figure's median with
# its individual runs, and the load average as each run started (load.NAME).
#
#   bench/io_hooks.sh [BUILD_DIR (default build)]
#   env: RUNS (3), OUT (/tmp/spindle-bench/io_hooks: raw output, one file
#        per run)
#
# Everything that runs on one thread is pinned to CPU 0. tickle measures a
# wake-up from another thread, so it runs unpinned (two CPUs), and once more
# pinned (both threads on CPU 0) as tickle_1cpu for comparison; lateness
# runs its worker beside a sleeping thread, unpinned too.
set -euo pipefail

suite=io_hooks
. "$(dirname "$0")/lib.sh"

echo "# loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run pingpong taskset -c 0 "$bench" pingpong
run timers taskset -c 0 "$bench" timers
run tickle "$bench" tickle
run tickle_1cpu taskset -c 0 "$bench" tickle
run sleepers taskset -c 0 "$bench" sleepers
run lateness "$bench" lateness
run hooked_rw taskset -c 0 "$bench" hooked_rw
echo "# loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
medians
