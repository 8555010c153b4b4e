#!/usr/bin/env bash
# The layering rules of framework/src and hooks/ (docs/guide.md, "Layers"):
#   - a file includes internal headers of its own folder (bare name) or of a
#     lower layer ("io/fd_table.h"), public headers (spindle/x.h) of its own
#     layer or a lower one; never a higher layer, never a folder of the
#     same level (so no two folders include each other);
#   - hooks/ sees the framework only through io/hook_bridge.h (and base/):
#     the preload library shares no other internals with it;
#   - no source or header file is over 600 lines, no function over 80
#     (tools/hookcheck/ too)
#     (a function: from a line that is "{" to the next that is "}").
# Exit 1 with one line per violation. Run by `make test` (ctest: layers).
set -euo pipefail
cd "$(dirname "$0")/.."

# Layer levels, bottom up. Folders on one level may not include each other.
declare -A level=(
  [base]=0 [fiber]=1 [metrics]=1 [config]=2 [log]=3 [sched]=4 [io]=5
  [net]=6 [tls]=6 [sync]=6 [hooks]=6 [http]=7 [daemon]=8
)
# The layer each public header belongs to.
declare -A public=(
  [version.h]=base [error.h]=base [spindle.h]=daemon [fiber.h]=fiber [metrics.h]=metrics [config.h]=config [log.h]=log [scheduler.h]=sched [task.h]=sched [debug.h]=sched
  [iomanager.h]=io [timer.h]=io [hook.h]=io
  [net.h]=net [buffer.h]=net [tcp_server.h]=net [tls.h]=tls
  [sync.h]=sync [group.h]=sync [http.h]=http [websocket.h]=http [daemon.h]=daemon
)
MAX_LINES=600
MAX_FUNCTION=80
bad=0
say() {
  echo "layers: $*"
  bad=1
}

# may_include FILE FROM TO WHAT: FROM's file may include TO's header WHAT.
may_include() {
  local file=$1 from=$2 to=$3 what=$4
  [[ -n ${level[$to]:-} ]] || { say "$file: $what: no such layer '$to'"; return; }
  [[ $from == "$to" ]] && return
  if ((level[$to] > level[$from])); then
    say "$file: includes $what from $to, a layer above $from"
  elif ((level[$to] == level[$from])); then
    say "$file: includes $what from $to, a layer beside $from"
  fi
}

check_file() {
  local file=$1 from=$2 dir line inc
  dir=$(dirname "$file")
  local n
  n=$(wc -l <"$file")
  ((n <= MAX_LINES)) || say "$file: $n lines (at most $MAX_LINES)"
  while read -r long; do
    say "$file: $long (at most $MAX_FUNCTION)"
  done < <(awk -v max="$MAX_FUNCTION" \
    '/^\{/ { s = NR } /^\}/ { if (s && NR - s - 1 > max) print "a function of " NR - s - 1 " lines at line " s; s = 0 }' "$file")
  while IFS= read -r line; do
    [[ $line =~ ^#[[:space:]]*include[[:space:]]+\"([^\"]+)\" ]] || continue
    inc=${BASH_REMATCH[1]}
    if [[ $inc == spindle/* ]]; then
      local h=${inc#spindle/}
      [[ -n ${public[$h]:-} ]] || { say "$file: $inc: public header of no layer"; continue; }
      may_include "$file" "$from" "${public[$h]}" "$inc"
    elif [[ $inc == */* ]]; then
      may_include "$file" "$from" "${inc%%/*}" "$inc"
      [[ $from != hooks || $inc == io/hook_bridge.h || $inc == base/* ]] ||
        say "$file: $inc: hooks/ may include only io/hook_bridge.h and base/"
      [[ -f framework/src/$inc ]] || say "$file: $inc: no such header"
    elif [[ ! -f $dir/$inc ]]; then
      say "$file: $inc: not in its folder (name the folder: \"layer/$inc\")"
    fi
  done <"$file"
}

for d in framework/src/*/; do
  layer=$(basename "$d")
  [[ -n ${level[$layer]:-} ]] || say "$d: a folder that is no layer"
  for f in "$d"*.[ch]; do
    check_file "$f" "$layer"
  done
done
for f in hooks/*.[ch]; do
  check_file "$f" hooks
done
# spindle-hookcheck is no layer of the library: its files include only
# their own folder's headers, and the size limits hold for them too.
for f in tools/hookcheck/*.[ch]; do
  check_file "$f" tools
done
# Public headers include only lower or equal layers' public headers.
for f in framework/include/spindle/*.h; do
  h=$(basename "$f")
  [[ -n ${public[$h]:-} ]] || { say "$f: public header of no layer (add it to scripts/layers.sh)"; continue; }
  check_file "$f" "${public[$h]}"
done

((bad == 0)) && echo "layers: ok"
exit "$bad"
