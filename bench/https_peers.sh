#!/bin/bash
# HTTPS against nginx: the same certificate (EC P-256), TLS 1.3 with
# TLS_AES_128_GCM_SHA256 only on both, server pinned to CPU 0, the load on
# CPU 1. Rounds alternate the two servers, each started afresh; figures are
# medians of the per-round ratios spindle/nginx.
#
#   bench/https_peers.sh keepalive [CONNS] [ROUNDS]   wrk GET /plaintext
#       over kept-alive connections: requests/s and server CPU per request
#   bench/https_peers.sh handshakes [CONC] [ROUNDS]   spindle-tls-load: a
#       full handshake + GET + close per request: handshakes/s and server
#       CPU per handshake
#   bench/https_peers.sh idle [N] [ROUNDS]            N TLS connections
#       made (one GET each) and left idle: server RSS per connection
#
# Defaults: 100 connections / 50 concurrent / 2,000 idle, 5 rounds.
# env: SECONDS_PER_RUN (4), BUILD_DIR (build), PEERS (../shared/bench),
#      KEY (ec: P-256, the default; rsa: RSA-2048, whose signing makes the
#      server, not the client, the side that limits the handshake rate).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peers=${PEERS:-$root/../shared/bench}
bin=${BUILD_DIR:-$root/build}/bin
secs=${SECONDS_PER_RUN:-4}
mode=${1:?mode: keepalive, handshakes or idle}
case $mode in
  keepalive) n=${2:-100} ;;
  handshakes) n=${2:-50} ;;
  idle) n=${2:-2000} ;;
  *) echo "mode: keepalive, handshakes or idle" >&2; exit 2 ;;
esac
rounds=${3:-5}
suite=TLS_AES_128_GCM_SHA256
tick_ns=$((1000000000 / $(getconf CLK_TCK)))
dir=$(mktemp -d /tmp/https-peers.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

key_opts=(-newkey ec -pkeyopt ec_paramgen_curve:P-256)
[[ ${KEY:-ec} == rsa ]] && key_opts=(-newkey rsa:2048)
openssl req -x509 "${key_opts[@]}" -nodes -days 2 \
  -subj /CN=bench.test -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null ||
  { echo "https_peers.sh: openssl could not make a certificate" >&2; exit 1; }
# nginx: peers/nginx.conf with its listener on TLS, files in our own dir.
sed -e "s|listen 127.0.0.1:%PORT% backlog=4096;|listen 127.0.0.1:%PORT% ssl backlog=4096; \
ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem; \
ssl_protocols TLSv1.3; ssl_conf_command Ciphersuites $suite;|" \
  -e "s|/tmp/bench-nginx|$dir/nginx|g" "$peers/peers/nginx.conf" > "$dir/nginx.conf.in"
mkdir -p "$dir/nginx"

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# start NAME PORT: the server pinned to CPU 0; prints its PID once it
# accepts connections (empty if it did not come up).
start() {
  local name=$1 port=$2
  if [[ $name == nginx ]]; then
    sed "s/%PORT%/$port/g" "$dir/nginx.conf.in" > "$dir/nginx/nginx.conf"
    taskset -c 0 nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" >/dev/null 2>&1 &
  else
    taskset -c 0 "$bin/spindle-httpd" --listen "127.0.0.1:$port" --workers 1 \
      --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" --tls-ciphersuites "$suite" \
      >/dev/null 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { echo "$pid"; return; }
    kill -0 "$pid" 2>/dev/null || return
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
}

# measure NAME: one round against a fresh server; prints "FIGURE CPU_NS"
# (keepalive: requests/s and CPU ns per request; handshakes: handshakes/s
# and CPU ns per handshake; idle: KiB of RSS per connection and 0).
measure() {
  local name=$1 port pid=
  for attempt in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    pid=$(start "$name" "$port")
    [[ $pid ]] && break
  done
  [[ $pid ]] || { echo "https_peers.sh: $name did not start" >&2; exit 1; }
  local c0 c1 count figure
  c0=$(cpu_ticks "$pid")
  case $mode in
    keepalive)
      count=$(taskset -c 1 wrk -t1 -c"$n" -d"${secs}s" "https://127.0.0.1:$port/plaintext" |
        awk '/requests in/ {print $1}')
      figure=$((count / secs)) ;;
    handshakes)
      read -r _ count _ _ _ figure < <(taskset -c 1 "$bin/spindle-tls-load" \
        "127.0.0.1:$port" handshakes "$secs" "$n") ;;
    idle)
      local r0 r1 open fifo="$dir/hold"
      r0=$(rss_kib "$pid")
      rm -f "$fifo"; mkfifo "$fifo"
      taskset -c 1 "$bin/spindle-tls-load" "127.0.0.1:$port" idle "$n" < "$fifo" > "$dir/idle.out" &
      local load=$!
      exec 4>"$fifo"
      for _ in $(seq 600); do
        [[ -s $dir/idle.out ]] && break
        sleep 0.1
      done
      read -r _ open _ _ < "$dir/idle.out"
      r1=$(rss_kib "$pid")
      exec 4>&-
      wait "$load"
      count=$open
      figure=$(awk -v a="$r0" -v b="$r1" -v n="$open" 'BEGIN {printf "%.1f", (b - a) / n}') ;;
  esac
  c1=$(cpu_ticks "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null
  [[ $count && $count -gt 0 ]] || { echo "https_peers.sh: nothing through $name" >&2; exit 1; }
  echo "$figure $(( (c1 - c0) * tick_ns / count ))"
}

echo "# $mode, n=$n, $rounds rounds, ${KEY:-ec} key; loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for round in $(seq "$rounds"); do
  read -r sfig scpu < <(measure spindle)
  read -r nfig ncpu < <(measure nginx)
  [[ $sfig && $nfig ]] || exit 1
  r=$(awk -v a="$sfig" -v b="$nfig" -v c="$scpu" -v d="$ncpu" \
    'BEGIN {printf "%.3f %.3f", a / b, (d > 0 ? c / d : 0)}')
  echo "round $round: spindle $sfig (cpu ${scpu} ns)  nginx $nfig (cpu ${ncpu} ns)  ratio $r"
  ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" | awk '{a[NR] = $1; b[NR] = $2}
  END { n = asort(a); asort(b); m = int((n + 1) / 2)
        printf "median spindle/nginx: figure %.3f  cpu %.3f\n", a[m], b[m] }'
