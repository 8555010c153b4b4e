# Shared by the spindle-bench suite scripts (foundation.sh, io_hooks.sh):
# source it after setting `suite`. It runs benchmarks RUNS times, keeps the
# raw output, and prints every figure's median with the runs behind it.
#
#   env: RUNS (3), OUT (/tmp/spindle-bench/$suite: raw output, one file per
#        run), PEERS (../shared/bench relative to the project root)
#   arg: BUILD_DIR (default build)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=${1:-$root/build}/bin/spindle-bench
runs=${RUNS:-3}
out=${OUT:-/tmp/spindle-bench/$suite}
peers=${PEERS:-$root/../shared/bench}

[[ -x $bench ]] || { echo "$suite: $bench not built" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.raw

# Other processes on the machine skew every figure: the 1-minute load
# average when a run starts becomes a figure of its own, load.NAME.
load_figure() {
  echo "load.$1 $(cut -d' ' -f1 /proc/loadavg) loadavg" >> "$out/all.txt"
}

# run NAME CMD...: RUNS times, figures appended to NAME.N.txt and all.txt.
# Figures are renamed NAME.* (a no-op when NAME is the subcommand), so two
# runs of one subcommand, pinned and not, stay apart.
run() {
  local name=$1; shift
  for i in $(seq "$runs"); do
    echo "+ $*   # load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    load_figure "$name"
    "$@" | sed "s/^[^.]*\./$name./" > "$out/$name.$i.txt"
    cat "$out/$name.$i.txt" >> "$out/all.txt"
  done
}

# Median of each figure, in first-seen order, with the runs behind it.
medians() {
  awk '
    !($1 in n) { order[++k] = $1; unit[$1] = $3 }
    { v[$1, ++n[$1]] = $2 }
    END {
      printf "%-32s %14s %-9s %s\n", "figure", "median", "unit", "runs"
      for (j = 1; j <= k; j++) {
        f = order[j]; m = n[f]; runs = ""
        for (a = 1; a <= m; a++) { s[a] = v[f, a] + 0; runs = runs " " v[f, a] }
        for (a = 2; a <= m; a++)          # insertion sort: m is tiny
          for (b = a; b > 1 && s[b-1] > s[b]; b--) { t = s[b]; s[b] = s[b-1]; s[b-1] = t }
        med = m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
        shown = med == int(med) ? sprintf("%d", med) : sprintf("%.2f", med)
        printf "%-32s %14s %-9s%s\n", f, shown, unit[f], runs
      }
    }' "$out/all.txt"
}
