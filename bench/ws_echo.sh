#!/bin/bash
# WebSocket echo against the plain TCP echo, same load generator, same
# core: spindle-echo and spindle-httpd --ws-echo /ws pinned to CPU 0 (one
# worker), spindle-echo-load (CONNS connections, 64-byte messages,
# ping-pong) on CPU 1. Rounds alternate the two servers, each started
# afresh; the figure is the median of the per-round ratios ws/plain, of
# messages/s and of server CPU per message.
#
#   bench/ws_echo.sh [CONNS] [ROUNDS]      (100, 5)
#
# env: SECONDS_PER_RUN (3), BUILD_DIR (build), WS_DEFLATE=1 (the WebSocket
# runs with permessage-deflate: spindle-httpd --ws-deflate, the load
# offering it; every message is then compressed both ways).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BUILD_DIR:-$root/build}/bin
secs=${SECONDS_PER_RUN:-3}
conns=${1:-100}
rounds=${2:-5}
tick_ns=$((1000000000 / $(getconf CLK_TCK)))

# run NAME SERVER... : prints "RATE CPU_NS_PER_MSG"; %PORT% in SERVER is a
# random port (another is tried when the server does not come up on it).
run() {
  local name=$1 port pid= ws=()
  shift
  for attempt in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    taskset -c 0 "${@//%PORT%/$port}" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && break
    wait "$pid" 2>/dev/null
    pid=
  done
  [[ $pid ]] || { echo "ws_echo.sh: $name did not start" >&2; exit 1; }
  [[ $name == ws ]] && ws=(--ws /ws "${deflate[@]}")
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  local out
  out=$(taskset -c 1 "$bin/spindle-echo-load" --connect "127.0.0.1:$port" --conns "$conns" \
    --size 64 --duration "$secs" "${ws[@]}")
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null
  local n rate
  n=$(awk '$1 == "messages" {print $2}' <<<"$out")
  rate=$(awk '$1 == "messages/s" {print $2}' <<<"$out")
  [[ $n && $n -gt 0 ]] || { echo "ws_echo.sh: no messages through $name" >&2; exit 1; }
  echo "$rate $(( (u1 - u0 + s1 - s0) * tick_ns / n ))"
}

deflate=()
[[ ${WS_DEFLATE:-} == 1 ]] && deflate=(--ws-deflate)
echo "# loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for round in $(seq "$rounds"); do
  read -r prate pcpu < <(run plain "$bin/spindle-echo" --listen "127.0.0.1:%PORT%" --workers 1)
  read -r wrate wcpu < <(run ws "$bin/spindle-httpd" --listen "127.0.0.1:%PORT%" \
    --workers 1 --ws-echo /ws "${deflate[@]}")
  [[ $prate && $wrate ]] || exit 1
  r=$(awk -v a="$wrate" -v b="$prate" -v c="$wcpu" -v d="$pcpu" \
    'BEGIN {printf "%.3f %.3f", a / b, (d > 0 ? c / d : 0)}')
  echo "round $round: plain $prate msgs/s ${pcpu} ns/msg, ws $wrate msgs/s ${wcpu} ns/msg, ratio rate/cpu $r"
  ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" | sort -n -k1 | awk '{a[NR]=$1} END {print "median ws/plain msgs/s:", a[int((NR+1)/2)]}'
printf '%s\n' "${ratios[@]}" | sort -n -k2 | awk '{a[NR]=$2} END {print "median ws/plain server CPU per message:", a[int((NR+1)/2)]}'
echo "# loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
