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

root=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:-$root/build}/bin/spindle-bench
runs=${RUNS:-3}
out=${OUT:-/tmp/spindle-bench}
peers=${PEERS:-$root/../shared/bench}

[[ -x $bench ]] || { echo "foundation.sh: $bench not built" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.txt

# run NAME CMD...: RUNS times, figures appended to NAME.N.txt and all.txt.
run() {
  local name=$1; shift
  for i in $(seq "$runs"); do
    echo "+ $*" >&2
    "$@" > "$out/$name.$i.txt"
    cat "$out/$name.$i.txt" >> "$out/all.txt"
  done
}

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

# Other processes on the machine skew every figure: record the load.
echo "# loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run switch taskset -c 0 "$bench" switch
run_peer switch_bench
run_peer switch_bench_boost
run spawn taskset -c 0 "$bench" spawn
run parked "$bench" parked
run wake "$bench" wake
run idle "$bench" idle
echo "# loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Median of each figure, in first-seen order, with the runs behind it.
awk '
  !($1 in n) { order[++k] = $1; unit[$1] = $3 }
  { v[$1, ++n[$1]] = $2 }
  END {
    printf "%-28s %14s %-9s %s\n", "figure", "median", "unit", "runs"
    for (j = 1; j <= k; j++) {
      f = order[j]; m = n[f]; runs = ""
      for (a = 1; a <= m; a++) { s[a] = v[f, a] + 0; runs = runs " " v[f, a] }
      for (a = 2; a <= m; a++)          # insertion sort: m is tiny
        for (b = a; b > 1 && s[b-1] > s[b]; b--) { t = s[b]; s[b] = s[b-1]; s[b-1] = t }
      med = m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
      shown = med == int(med) ? sprintf("%d", med) : sprintf("%.2f", med)
      printf "%-28s %14s %-9s%s\n", f, shown, unit[f], runs
    }
  }' "$out/all.txt"
