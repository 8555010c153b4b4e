#!/bin/bash
# User-space instructions per message or request of each server, counted by
# valgrind's callgrind. Unlike rates and CPU times, the count does not move
# with the machine's noise, so a change to the hot path shows in one run.
# It counts work, not stalls: cache misses are not in it.
#
#   bench/instructions.sh echo [CONNS]   libev_echo, st_echo, spindle-echo
#   bench/instructions.sh http [CONNS]   libev_http, spindle-httpd
#
# env: PEERS (../shared/bench), BUILD_DIR (build), SECONDS_PER_RUN (4),
#      AB_BIN (another tree's build/bin: its server joins as "base"),
#      OUT (/tmp/spindle-instructions: callgrind's files, for
#      callgrind_annotate). Each server runs twice with the same load, for
#      1 s and for SECONDS_PER_RUN: the difference of the two counts over
#      the difference of the answers is the steady state's, with start-up,
#      exit, the connections' set-up and one-time work on first use (the
#      hooks' libc table, lazy allocations) taken out. Under valgrind a
#      server runs about 30-50x slower, which the count does not mind.
#      nginx is not measured (its start script execs it, out of valgrind's
#      sight). CACHE_SIM=1 also simulates the caches (--cache-sim=yes) and
#      adds simulated D1 misses (reads + writes) and last-level misses
#      (instruction + data) per answer; slower still. LOCKED=1 also counts
#      the locked instructions (lock prefix, xchg with memory: each a full
#      barrier, ~20 cycles, that the instruction count does not weigh) per
#      answer, with bench/locked.py over --dump-instr=yes.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers=${PEERS:-$root/../shared/bench}
bin=${BUILD_DIR:-$root/build}/bin
secs=${SECONDS_PER_RUN:-4}
out=${OUT:-/tmp/spindle-instructions}
mode=${1:?mode: echo or http}
conns=${2:-50}

[[ $mode == echo || $mode == http ]] || { echo "mode: echo or http" >&2; exit 2; }
source "$root/bench/servers.sh"
command -v callgrind_control >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
mkdir -p "$out"

# load PORT SECS: prints how many messages or requests were answered.
load() {
  if [[ $mode == echo ]]; then
    "$peers/bin/echo_load" 127.0.0.1 "$1" "$conns" "$2" 64 |
      sed -n 's/.*msgs=\([0-9]*\).*/\1/p'
  else
    wrk -t1 -c"$conns" -d"${2}s" "http://127.0.0.1:$1/plaintext" |
      awk '/requests in/ {print $1}'
  fi
}

cache_sim=${CACHE_SIM:-0}
sim_opt=()
((cache_sim)) && sim_opt=(--cache-sim=yes)
locked=${LOCKED:-0}
((locked)) && sim_opt+=(--dump-instr=yes)

# totals FILE: "Ir D1-misses LL-misses" of a callgrind file (the misses 0
# without the cache simulation), from the events callgrind_annotate shows.
# Newer callgrind_annotate follows each total with its share, "(100.0%)":
# those are skipped, so the n-th number is the n-th event's.
totals() {
  callgrind_annotate "$1" 2>/dev/null | awk '
    /^Events shown:/ { for (i = 3; i <= NF; i++) ev[$i] = i - 2 }
    /PROGRAM TOTALS/ {
      n = 0
      for (i = 1; i <= NF; i++) { v = $i; gsub(",", "", v); if (v ~ /^[0-9]+$/) f[++n] = v }
      d1 = f[ev["D1mr"]] + f[ev["D1mw"]]; ll = f[ev["ILmr"]] + f[ev["DLmr"]] + f[ev["DLmw"]]
      print f[ev["Ir"]], d1 + 0, ll + 0 }'
}

# count NAME CMD PORT SECS: the server's instructions (and misses, and
# locked instructions) from start to exit, with SECS of load; sets `n`
# (answered), `ir`, `d1`, `ll` and `lk`.
count() {
  local name=$1 cmd=$2 port=$3 file="$out/$1.cg"
  rm -f "$file"
  n=0 ir= d1=0 ll=0 lk=0
  # shellcheck disable=SC2086 # the command line is split on purpose
  valgrind --tool=callgrind "${sim_opt[@]}" --callgrind-out-file="$file" \
    ${cmd//%PORT%/$port} >"$out/$name.log" 2>&1 &
  local pid=$! ok=0
  for _ in 1 2 3 4; do ready "$port" && { ok=1; break; }; done
  ((ok)) && n=$(load "$port" "$4")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  ((ok)) && read -r ir d1 ll < <(totals "$file")
  if ((ok && locked)); then lk=$("$root/bench/locked.py" --total "$file"); fi
}

if ((cache_sim)); then
  printf "%-12s %10s %14s %10s %10s %10s\n" server answered instructions per_answer \
    d1_miss ll_miss
else
  printf "%-12s %10s %14s %10s\n" server answered instructions per_answer
fi
port=$((20000 + RANDOM % 10000))
for entry in "${servers[@]}"; do
  name=${entry%%=*} cmd=${entry#*=}
  [[ $name == nginx ]] && continue
  # A short run first, to take out of the long run's count.
  count "$name" "$cmd" $((port += 1)) 1
  short=$ir short_n=$n short_d1=$d1 short_ll=$ll short_lk=$lk
  count "$name" "$cmd" $((port += 1)) "$secs"
  if [[ -z $short || -z $ir || -z $n || $((n - short_n)) -le 0 ]]; then
    echo "$name: no count (see $out/$name.log)" >&2
    continue
  fi
  n=$((n - short_n))
  if ((locked)); then
    awk -v name="$name" -v n="$n" -v lk=$((lk - short_lk)) 'BEGIN {
      printf "%-12s locked instructions per answer: %.2f\n", name, lk / n }' >&2
  fi
  if ((cache_sim)); then
    awk -v name="$name" -v n="$n" -v ir=$((ir - short)) -v d1=$((d1 - short_d1)) \
      -v ll=$((ll - short_ll)) 'BEGIN {
        printf "%-12s %10d %14d %10d %10.2f %10.2f\n", name, n, ir, int(ir / n), d1 / n, ll / n }'
  else
    printf "%-12s %10d %14d %10d\n" "$name" "$n" $((ir - short)) $(((ir - short) / n))
  fi
done
