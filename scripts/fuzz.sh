#!/usr/bin/env bash
# Short, bounded libFuzzer runs of the HTTP request parser, its split
# invariance (the same bytes in reads of any size get the same answers), the
# WebSocket frame receiver (the same invariance) and the config parser (clang, ASan+UBSan). Any crash or difference fails the
# run.
#   scripts/fuzz.sh [BUILD_DIR] [SECONDS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
secs=${2:-30}
CC=clang cmake -S . -B "$build" -DSPINDLE_FUZZ=ON -DSPINDLE_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_http fuzz_http_split fuzz_ws fuzz_config
for target in fuzz_http fuzz_http_split fuzz_ws fuzz_config; do
  corpus=$(mktemp -d)
  seeds=tests/fuzz/${target#fuzz_}
  seeds=${seeds%_split} # the split target starts from the HTTP seeds
  [[ -d $seeds ]] && cp "$seeds"/* "$corpus"/
  [[ $target == fuzz_config ]] && cp conf/*.yml "$corpus"/ # the shipped configs
  echo "fuzz: $target for ${secs}s"
  "$build/bin/$target" -max_total_time="$secs" -rss_limit_mb=2048 \
    -print_final_stats=1 "$corpus" 2>&1 | tail -n 8
  rm -rf "$corpus"
done
echo "fuzz: no crash"
