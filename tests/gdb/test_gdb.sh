#!/usr/bin/env bash
# tools/gdb/spindle.py against tests/gdb/gdb_fibers.c: the fiber list and
# each parked fiber's backtrace, in the live process (gdb attached) and in
# its core dump, and its auto-load from the library's .debug_gdb_scripts.
# Exit 77 (skipped) only without gdb or without ptrace.
#   test_gdb.sh PROGRAM EXTENSION LIBRARY
set -u
prog=$1 ext=$2 lib=$3
command -v gdb >/dev/null || { echo "SKIP: gdb is not installed"; exit 77; }

dir=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# The dump's cwd is $dir, where a plain core_pattern ("core") puts it.
mkfifo "$dir/out"
(cd "$dir" && { ulimit -c unlimited 2>/dev/null || true; } && exec "$prog") >"$dir/out" &
pid=$!
read -r -t 30 line <"$dir/out" || fail "the program did not report its fibers"
echo "program: $line"
id_of() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$line"; }
reader=$(id_of reader) sleeper=$(id_of sleeper)
not_started=$(id_of not-started) finished=$(id_of finished) running=$(id_of running)

# inspect TARGET-ARGS...: the extension's answers, one section per step.
inspect() {
  timeout 120 gdb -batch -nx "$@" -ex "source $ext" \
    -ex 'echo ==list==\n' -ex 'info spindle-fibers' \
    -ex 'echo ==reader==\n' -ex "spindle-fiber $reader" -ex bt \
    -ex 'echo ==sleeper==\n' -ex "spindle-fiber $sleeper" -ex bt \
    -ex 'echo ==done==\n' -ex "spindle-fiber $finished" \
    -ex 'echo ==thread==\n' -ex spindle-fiber -ex bt \
    -ex 'echo ==running==\n' -ex "spindle-fiber $sleeper" -ex "spindle-fiber $running" -ex bt 2>&1
}
section() { sed -n "/^==$2==\$/,/^==/p" <<<"$1"; }

check() { # check WHAT OUTPUT
  local what=$1 out=$2 list
  list=$(section "$out" list)
  grep -Eq "^ +$reader +SUSPENDED .* reader .* reader$" <<<"$list" || fail "$what: reader not listed"
  grep -Eq "^ +$sleeper +SUSPENDED .* sleeper .* sleeper$" <<<"$list" || fail "$what: sleeper not listed"
  grep -Eq "^ +$not_started +READY .* not-started" <<<"$list" || fail "$what: not-started not listed"
  grep -Eq "^ +$finished +DONE .* finished" <<<"$list" || fail "$what: finished not listed"
  grep -Eq "^ +$running +RUNNING .* running .* wait_forever$" <<<"$list" || fail "$what: running not listed"
  grep -q '^5 fibers$' <<<"$list" || fail "$what: not 5 fibers"
  section "$out" reader | grep -q ' park_in_read ()' || fail "$what: reader's bt"
  section "$out" reader | grep -q 'park_in_sleep' && fail "$what: reader's bt shows the sleeper"
  section "$out" sleeper | grep -q ' park_in_sleep ()' || fail "$what: sleeper's bt"
  section "$out" done | grep -q 'is DONE' || fail "$what: a finished fiber is shown"
  section "$out" thread | grep -q ' wait_forever (' || fail "$what: the thread's bt"
  section "$out" thread | grep -q 'park_in' && fail "$what: still on a fiber"
  section "$out" running | grep -q "fiber $running is running on thread 1" ||
    fail "$what: the running fiber's thread"
  section "$out" running | grep -q ' wait_forever (' || fail "$what: the running fiber's bt"
  section "$out" running | grep -q '#[0-9].*park_in' && fail "$what: the running fiber's bt shows a parked one"
  echo "$what: ok"
}

live=$(inspect -p "$pid" -ex "generate-core-file $dir/gcore")
if grep -Eq 'ptrace: Operation not permitted|Could not attach' <<<"$live"; then
  echo "SKIP: ptrace is not permitted here"
  exit 77
fi
echo "$live"
check live "$live"

# Not sourced: loaded with the library, from a directory declared safe.
auto=$(timeout 120 gdb -batch -nx -iex "add-auto-load-safe-path $(dirname "$lib")" \
  -p "$pid" -ex 'info spindle-fibers' 2>&1)
grep -Eq "^ +$reader +SUSPENDED .* reader" <<<"$auto" ||
  fail "auto-load: $(grep -v '^\[' <<<"$auto")"
echo "auto-load: ok"

# A crash's dump, written by the kernel, where core_pattern is a file name.
kill -ABRT "$pid"
wait "$pid" 2>/dev/null
pid=
cores=("$dir"/core*)
if [[ -e ${cores[0]} ]]; then
  out=$(inspect "$prog" "${cores[0]}")
  echo "$out"
  check "kernel core" "$out"
elif grep -q 'Memory read failed' <<<"$live"; then
  # gdb reads a mapping in 1 MiB pieces and drops it at the first page it
  # cannot read: a stack slab with MADV_GUARD_INSTALL guards (Linux >= 6.13).
  echo "note: no kernel core here ($(cat /proc/sys/kernel/core_pattern)), and gcore could not read the fiber stacks: core not checked"
else
  out=$(inspect "$prog" "$dir/gcore")
  echo "$out"
  check gcore "$out"
fi
