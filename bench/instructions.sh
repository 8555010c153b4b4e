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
#      callgrind_annotate). Each server runs twice, once only started and
#      stopped, whose count is taken off the loaded run's; under valgrind
#      a server runs about 30-50x slower, which the count does not mind.
#      nginx is not measured (its start script execs it, out of valgrind's
#      sight).
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

# load PORT: prints how many messages or requests were answered.
load() {
  if [[ $mode == echo ]]; then
    "$peers/bin/echo_load" 127.0.0.1 "$1" "$conns" "$secs" 64 |
      sed -n 's/.*msgs=\([0-9]*\).*/\1/p'
  else
    wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$1/plaintext" |
      awk '/requests in/ {print $1}'
  fi
}

# count NAME CMD PORT WITH_LOAD: the server's instructions from start to
# exit, with or without the load; sets `n` (answered) and `ir`.
count() {
  local name=$1 cmd=$2 port=$3 file="$out/$1.cg"
  rm -f "$file"
  n=0 ir=
  # shellcheck disable=SC2086 # the command line is split on purpose
  valgrind --tool=callgrind --callgrind-out-file="$file" ${cmd//%PORT%/$port} \
    >"$out/$name.log" 2>&1 &
  local pid=$! ok=0
  for _ in 1 2 3 4; do ready "$port" && { ok=1; break; }; done
  if ((ok)) && [[ $4 == yes ]]; then
    n=$(load "$port")
  fi
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  ((ok)) && ir=$(callgrind_annotate "$file" 2>/dev/null |
                 awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
}

printf "%-12s %10s %14s %10s\n" server answered instructions per_answer
port=$((20000 + RANDOM % 10000))
for entry in "${servers[@]}"; do
  name=${entry%%=*} cmd=${entry#*=}
  [[ $name == nginx ]] && continue
  # Start-up and exit alone first, to take out of the loaded run's count.
  count "$name" "$cmd" $((port += 1)) no
  idle=$ir
  count "$name" "$cmd" $((port += 1)) yes
  if [[ -z $idle || -z $ir || -z $n || $n -eq 0 ]]; then
    echo "$name: no count (see $out/$name.log)" >&2
    continue
  fi
  printf "%-12s %10d %14d %10d\n" "$name" "$n" $((ir - idle)) $(((ir - idle) / n))
done
