#!/usr/bin/env bash
# Bounded libFuzzer runs (clang, ASan+UBSan) of the HTTP request parser, its
# split invariance (the same bytes in reads of any size get the same
# answers), the WebSocket frame receiver (the same invariance) and the
# config parser, each from its seed corpus. Any crash or difference fails
# the run and leaves the input as ./crash-*.
#
#   scripts/fuzz.sh [BUILD_DIR] [SECONDS_PER_TARGET]   explore: a new random
#       seed each run, for as long as asked (the way to look for new bugs)
#   scripts/fuzz.sh --ci [BUILD_DIR]   the CI stage: a fixed seed and a fixed
#       number of inputs per target (about 30 s each on a 2-core machine),
#       so a tree always fuzzes the same inputs and a fuzz failure in CI is
#       one anyone can reproduce with the same command; a finding becomes a
#       seed in tests/fuzz/<target>/, which every build replays
#
# What libFuzzer tries next also depends on addresses (the stack depth it
# tracks, the values its targets compare, pointers among them) and on the
# clock (corpus reloads), so --ci also pins those: no address randomisation
# (setarch -R, where the kernel allows it), the same environment and
# arguments (env -i, relative paths from the build directory), no reloads,
# and no mutations taken from compared values (-use_cmp=0), which would
# depend on where the tree was cloned.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=false
if [[ ${1:-} == --ci ]]; then
  ci=true
  shift
fi
build=${1:-build-fuzz}
secs=${2:-30}
# The CI stage's inputs per target: 30-60 s each on a 2-core machine at the
# rates libFuzzer reports there (fuzz_http 20,000-90,000/s as its inputs
# grow, the split target ~10,000/s, fuzz_ws and fuzz_config ~5,000/s).
declare -A runs=([fuzz_http]=1000000 [fuzz_http_split]=300000 [fuzz_ws]=150000
                 [fuzz_config]=150000)
CC=clang cmake -S . -B "$build" -DSPINDLE_FUZZ=ON -DSPINDLE_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_http fuzz_http_split fuzz_ws fuzz_config
pin=(env -i PATH=/usr/bin:/bin)
setarch "$(uname -m)" -R true 2>/dev/null && pin+=(setarch "$(uname -m)" -R)
for target in fuzz_http fuzz_http_split fuzz_ws fuzz_config; do
  corpus=$build/corpus/$target
  rm -rf "$corpus" && mkdir -p "$corpus"
  seeds=tests/fuzz/${target#fuzz_}
  seeds=${seeds%_split} # the split target starts from the HTTP seeds
  [[ -d $seeds ]] && cp "$seeds"/* "$corpus"/
  [[ $target == fuzz_config ]] && cp conf/*.yml "$corpus"/ # the shipped configs
  if $ci; then
    run=("${pin[@]}" ./bin/"$target" -seed=1 -runs="${runs[$target]}" -reload=0 -use_cmp=0)
    echo "fuzz: $target, ${runs[$target]} inputs from seed 1"
  else
    run=(./bin/"$target" -max_total_time="$secs")
    echo "fuzz: $target for ${secs}s"
  fi
  status=0
  (cd "$build" && "${run[@]}" -rss_limit_mb=2048 -print_final_stats=1 \
    corpus/"$target") > "$corpus.log" 2>&1 || status=$?
  if ((status)); then
    # The finding itself: the report, not only the run's last lines; the
    # input is in the build directory (crash-*).
    grep -v -e '^#[0-9]' -e '^INFO:' "$corpus.log" | tail -n 60
  else
    tail -n 8 "$corpus.log"
  fi
  rm -rf "$corpus" "$corpus.log"
  ((status == 0)) || exit "$status"
done
echo "fuzz: no crash"
