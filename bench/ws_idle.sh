#!/bin/bash
# Memory per idle WebSocket connection, with and without permessage-deflate:
# spindle-httpd --ws-echo /ws (one worker, CPU 0), with --ws-deflate for the
# compressed runs; N Python `websockets` clients (bench/ws_idle_clients.py,
# CPU 1) each exchange one 1 KB text message and stay open. The figure is
# the server's RSS growth over the N connections, per connection; rounds
# alternate plain and deflate, each server started afresh; medians.
#
#   bench/ws_idle.sh [N] [ROUNDS]      (1000, 3)
#
# env: BUILD_DIR (build).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BUILD_DIR:-$root/build}/bin
n=${1:-1000}
rounds=${2:-3}
dir=$(mktemp -d /tmp/ws-idle.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ulimit -n $((n + 1024)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

rss_kib() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status"; }

# run MODE: prints the server's KiB of RSS per connection.
run() {
  local mode=$1 extra=() port spid cpid rss0 rss1
  [[ $mode == deflate ]] && extra=(--ws-deflate)
  taskset -c 0 "$bin/spindle-httpd" --listen 127.0.0.1:0 --workers 1 --ws-echo /ws \
    "${extra[@]}" > "$dir/server.out" 2>&1 &
  spid=$!
  for _ in $(seq 50); do
    port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$dir/server.out")
    [[ $port ]] && break
    sleep 0.1
  done
  [[ $port ]] || { echo "ws_idle.sh: the server did not start" >&2; kill "$spid"; exit 1; }
  rss0=$(rss_kib "$spid")
  rm -f "$dir/fifo" && mkfifo "$dir/fifo"
  taskset -c 1 /usr/bin/python3 "$root/bench/ws_idle_clients.py" "ws://127.0.0.1:$port/ws" \
    "$n" "$mode" < "$dir/fifo" > "$dir/clients.out" &
  cpid=$!
  exec 3> "$dir/fifo"
  for _ in $(seq 600); do
    grep -q '^open' "$dir/clients.out" 2>/dev/null && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^open $n\$" "$dir/clients.out" ||
    { echo "ws_idle.sh: the clients did not all connect" >&2; exec 3>&-; kill "$spid"; exit 1; }
  rss1=$(rss_kib "$spid")
  exec 3>&-
  wait "$cpid"
  kill "$spid"
  wait "$spid" 2>/dev/null
  awk -v a="$rss0" -v b="$rss1" -v n="$n" 'BEGIN {printf "%.2f\n", (b - a) / n}'
}

plain=() deflate=()
for round in $(seq "$rounds"); do
  p=$(run plain) || exit 1
  d=$(run deflate) || exit 1
  echo "round $round: plain $p KiB/connection, deflate $d KiB/connection"
  plain+=("$p") deflate+=("$d")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median KiB of server RSS per idle connection: plain $(median "${plain[@]}"), deflate $(median "${deflate[@]}")"
