#!/bin/bash
# Our echo and HTTP servers against the peers in ../shared/bench, in
# alternating rounds: every round starts each server afresh (pinned to CPU
# 0, the load on CPU 1), so machine noise hits neighbours alike, and the
# figures are medians of per-round ratios to the baseline of that round.
#
#   bench/peers.sh echo CONNS [ROUNDS]       libev_echo, st_echo, spindle-echo
#   bench/peers.sh http CONNS [ROUNDS]       nginx, libev_http, spindle-httpd
#   bench/peers.sh http-pipe CONNS [ROUNDS]  the same, 16 requests per write
#   bench/peers.sh http-burst CONNS [ROUNDS] the same servers, each started
#       afresh, CONNS new connections at once with one request each
#       (spindle-http-burst): the rate is connections/s, the CPU is per
#       connection, the p99 that of the first answers
#
# env: SECONDS_PER_RUN (3), PEERS (../shared/bench), BUILD_DIR (build),
#      RAW (/tmp/spindle-peers.txt: one line per run), AB_BIN (another
#      tree's build/bin: its server joins the rounds as "base").
# Per run: rate (msgs/s or req/s), server CPU per message or request (user
# and system time from /proc over the run), the load's p99, and how often
# the server slept (its main thread's voluntary context switches per 1,000
# messages or requests): near 0 when the server is the bottleneck, higher
# when it keeps up and waits for the load. A run's state moves its figures
# by more than most differences between servers (docs/benchmarks.md).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers=${PEERS:-$root/../shared/bench}
bin=${BUILD_DIR:-$root/build}/bin
secs=${SECONDS_PER_RUN:-3}
raw=${RAW:-/tmp/spindle-peers.txt}
mode=${1:?mode: echo, http or http-pipe}
conns=${2:?number of connections}
rounds=${3:-5}

source "$root/bench/servers.sh"

cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
sleeps() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$1/status"; }

# load PORT: prints "COUNT RATE P99"
load() {
  if [[ $mode == echo ]]; then
    taskset -c 1 "$peers/bin/echo_load" 127.0.0.1 "$1" "$conns" "$secs" 64 |
      sed -n 's/.*msgs=\([0-9]*\) msgs_per_s=\([0-9]*\).*p99_us=\([0-9]*\).*/\1 \2 \3us/p'
  elif [[ $mode == http-burst ]]; then
    taskset -c 1 "$bin/spindle-http-burst" 127.0.0.1 "$1" "$conns" |
      sed -n 's/.*ok=\([0-9]*\) all_ms=\([0-9.]*\).*p99_ms=\([0-9.]*\).*/\1 \2 \3ms/p' |
      awk '{print $1, int($1 * 1000 / $2), $3}'
  else
    local pipe=()
    [[ $mode == http-pipe ]] && pipe=(-s "$peers/pipeline.lua")
    PIPELINE_DEPTH=16 taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency "${pipe[@]}" \
      "http://127.0.0.1:$1/plaintext" |
      awk '/requests in/ {n=$1} /Requests\/sec/ {r=int($2)} $1=="99%" {p=$2} END {print n, r, p}'
  fi
}

: > "$raw"
for round in $(seq "$rounds"); do
  for spec in "${servers[@]}"; do
    name=${spec%%=*}
    cmd=${spec#*=}
    for attempt in 1 2 3; do # a random port may be taken: try another
      port=$((20000 + RANDOM % 20000))
      taskset -c 0 bash -c "exec ${cmd//%PORT%/$port}" >/dev/null 2>&1 &
      pid=$!
      ready "$port" && kill -0 "$pid" 2>/dev/null && break
      kill "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      pid=
    done
    if [[ $pid ]]; then
      read -r u0 s0 < <(cpu_ticks "$pid")
      z0=$(sleeps "$pid")
      read -r count rate p99 < <(load "$port")
      read -r u1 s1 < <(cpu_ticks "$pid")
      z1=$(sleeps "$pid")
      tick_ns=$((1000000000 / $(getconf CLK_TCK)))
      n=${count:-1}
      echo "$round $name $rate $(( (u1 - u0 + s1 - s0) * tick_ns / n )) $(( (u1 - u0) * tick_ns / n )) $p99 $(( (z1 - z0) * 1000 / n ))" >> "$raw"
    else
      echo "$name did not start" >&2
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
done

# Medians, and medians of the per-round ratios to the first server.
python3 - "$raw" "$mode" "$conns" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = []
for r in rows:
    if r[1] not in names:
        names.append(r[1])
by = {(r[0], r[1]): r for r in rows}
rounds = sorted({r[0] for r in rows}, key=int)
unit = {"echo": "msgs", "http-burst": "conn"}.get(sys.argv[2], "req")

def ratio(n, base, col):
    pairs = [(by[(k, n)], by[(k, base)]) for k in rounds if (k, n) in by and (k, base) in by]
    return st.median(int(a[col]) / int(b[col]) for a, b in pairs) if pairs else float("nan")

print(f"{sys.argv[2]}, {sys.argv[3]} connections, {len(rounds)} rounds; ratios are medians of per-round ratios")
head = "".join(f" {'rate/'+b:>14} {'cpu/'+b:>14}" for b in names[:2])
print(f"{'server':12} {unit+'/s':>9} {'cpu ns/'+unit:>12} {'user ns':>8}{head} {'sleeps/1k':>9}  p99s")
for n in names:
    mine = [by[(k, n)] for k in rounds if (k, n) in by]
    rate = st.median(int(r[2]) for r in mine)
    cpu = st.median(int(r[3]) for r in mine)
    usr = st.median(int(r[4]) for r in mine)
    slp = st.median(int(r[6]) for r in mine)
    cols = "".join(f" {ratio(n, b, 2):14.3f} {ratio(n, b, 3):14.3f}" for b in names[:2])
    print(f"{n:12} {rate:9.0f} {cpu:12.0f} {usr:8.0f}{cols} {slp:9.0f}  {' '.join(r[5] for r in mine)}")
PY
