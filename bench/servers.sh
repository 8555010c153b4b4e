# Sourced by peers.sh, syscalls.sh and instructions.sh: the servers each
# mode compares, and a readiness check. Expects $mode (echo, or an HTTP mode), $peers (the
# shared bench folder) and $bin (our build/bin); sets `servers` to
# "NAME=COMMAND" entries, %PORT% standing for the port (with AB_BIN set,
# another tree's server too).

case $mode in
echo)
  servers=("libev_echo=$peers/bin/libev_echo %PORT%"
           "st_echo=$peers/bin/st_echo %PORT%"
           "spindle=$bin/spindle-echo --listen 127.0.0.1:%PORT% --workers 1") ;;
http | http-pipe | http-burst)
  servers=("nginx=$peers/peers/run_nginx.sh %PORT%"
           "libev_http=$peers/bin/libev_http %PORT%"
           "spindle=$bin/spindle-httpd --listen 127.0.0.1:%PORT% --workers 1") ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
# A/B of two trees: AB_BIN=/other/build/bin adds that tree's server as
# "base", measured like the others.
if [[ ${AB_BIN:-} ]]; then
  spec=${servers[-1]#spindle=}
  servers+=("base=$AB_BIN${spec#"$bin"}")
fi
[[ -x $peers/bin/echo_load ]] || { echo "build the peers: make -C $peers" >&2; exit 1; }
ulimit -n 100000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# ready PORT: 0 once the server on PORT answers (5 s at most).
ready() {
  for _ in $(seq 100); do
    if [[ $mode == echo ]]; then
      (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    else
      curl -s -o /dev/null "http://127.0.0.1:$1/plaintext" && return 0
    fi
    sleep 0.05
  done
  return 1
}
