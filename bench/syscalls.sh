#!/bin/bash
# System calls per message or request of each server, counted by the
# kernel's tracepoints (perf stat -p) over the middle 2 s of a 5 s load:
# whether a server makes more kernel entries than another, and which.
#
#   bench/syscalls.sh echo CONNS    libev_echo, st_echo, spindle-echo
#   bench/syscalls.sh http CONNS    nginx, libev_http, spindle-httpd
#
# env: PEERS (../shared/bench), BUILD_DIR (build), AB_BIN (another tree's
# build/bin: its server joins as "base"). Needs perf with
# tracepoint access (root). Per server: the load's rate, then each call
# seen, per message or request (the calls over the window divided by the
# load's average rate times the window: an estimate, good to a few %).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers=${PEERS:-$root/../shared/bench}
bin=${BUILD_DIR:-$root/build}/bin
mode=${1:?mode: echo or http}
conns=${2:?number of connections}
window=2

[[ $mode == echo || $mode == http ]] || { echo "mode: echo or http" >&2; exit 2; }
source "$root/bench/servers.sh"
command -v perf >/dev/null || { echo "perf not installed" >&2; exit 1; }

calls=(read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_ctl
       timerfd_settime poll accept4 close)
events=cpu-clock
for c in "${calls[@]}"; do events+=",syscalls:sys_enter_$c"; done

# load PORT: 5 s of load on CPU 1; prints the rate per second.
load() {
  if [[ $mode == echo ]]; then
    taskset -c 1 "$peers/bin/echo_load" 127.0.0.1 "$1" "$conns" 5 64 |
      sed -n 's/.*msgs_per_s=\([0-9]*\).*/\1/p'
  else
    taskset -c 1 wrk -t1 -c"$conns" -d5s "http://127.0.0.1:$1/plaintext" |
      awk '/Requests\/sec/ {print int($2)}'
  fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for entry in "${servers[@]}"; do
  name=${entry%%=*}
  port=$((20000 + RANDOM % 10000))
  cmd=${entry#*=}
  taskset -c 0 bash -c "exec ${cmd//%PORT%/$port}" >/dev/null 2>&1 &
  pid=$!
  if ! ready "$port"; then
    echo "$name: not ready" >&2
    kill "$pid" 2>/dev/null
    continue
  fi
  load "$port" > "$tmp/rate" &
  lpid=$!
  sleep 1.5
  perf stat -x, -p "$pid" -e "$events" -- sleep "$window" 2> "$tmp/stat"
  wait "$lpid"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rate=$(cat "$tmp/rate")
  [[ $rate =~ ^[0-9]+$ && $rate -gt 0 ]] || { echo "$name: no rate" >&2; continue; }
  awk -F, -v name="$name" -v rate="$rate" -v w="$window" '
    BEGIN { n = rate * w; printf "%-11s %8d/s", name, rate }
    $3 == "cpu-clock" { printf "  cpu %.0f ns", $1 * 1e6 / n }
    $3 ~ /^syscalls:/ && $1 > 0 {
      sub("syscalls:sys_enter_", "", $3); printf "  %s %.3f", $3, $1 / n }
    END { print "" }' "$tmp/stat"
done
