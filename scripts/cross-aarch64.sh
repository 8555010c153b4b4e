#!/usr/bin/env bash
# AArch64 proof: cross-build the fiber and scheduler tests with Debian's
# gcc-aarch64-linux-gnu (scripts/aarch64-toolchain.cmake), check that the
# binaries are AArch64 and use the assembly context switch, and run them
# under qemu-user.
#   scripts/cross-aarch64.sh [BUILD_DIR]    (default build-aarch64)
# Environment: TYPE (RelWithDebInfo), JOBS (nproc).
set -euo pipefail

cd "$(dirname "$0")/.."
B=${1:-build-aarch64}
mkdir -p "$B" && B=$(cd "$B" && pwd)
TYPE=${TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc)}
TRIPLE=aarch64-linux-gnu
SYSROOT=/usr/$TRIPLE
TESTS=(test_fiber test_scheduler)

fail() { echo "cross-aarch64: FAIL: $*" >&2; exit 1; }

scripts/deps.sh cross

cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE="$PWD/scripts/aarch64-toolchain.cmake" \
  -DCMAKE_BUILD_TYPE="$TYPE" -DSPINDLE_CONTEXT=asm -DSPINDLE_SANITIZER=none \
  -DSPINDLE_BENCH=OFF >/dev/null
cmake --build "$B" -j"$JOBS" --target "${TESTS[@]}" spindle

# 1. Really AArch64 executables.
for t in "${TESTS[@]}"; do
  desc=$(file -b "$B/bin/$t")
  echo "cross-aarch64: $t: $desc"
  [[ $desc == ELF\ 64-bit*ARM\ aarch64* ]] || fail "$t is not an AArch64 ELF"
done

# 2. The fibers the tests run switch with our assembly: sp__fiber_switch
#    calls sp__asm_ctx_swap (ctx_aarch64.S), never swapcontext. It lives in
#    the test itself when linked statically, else in the libspindle it loads.
lib=$(readlink -f "$B/lib/libspindle.so")
for t in "${TESTS[@]}"; do
  obj="$B/bin/$t"
  # (Outputs captured first: grep -q closing a pipe early trips pipefail.)
  syms=$($TRIPLE-nm "$obj")
  if ! grep -q ' [Tt] sp__fiber_switch$' <<<"$syms"; then
    dyn=$($TRIPLE-readelf -d "$obj")
    grep -q 'NEEDED.*\[libspindle\.so\.' <<<"$dyn" ||
      fail "$t neither contains sp__fiber_switch nor loads libspindle.so"
    obj=$lib
  fi
  sw=$($TRIPLE-objdump -d --no-show-raw-insn "$obj" |
       awk '/<sp__fiber_switch>:$/,/^$/')
  [[ -n $sw ]] || fail "$t: no sp__fiber_switch in $obj"
  grep -q 'bl.*<sp__asm_ctx_swap>' <<<"$sw" ||
    fail "$t: sp__fiber_switch in $obj does not call sp__asm_ctx_swap"
  ! grep -q 'swapcontext' <<<"$sw" || fail "$t: sp__fiber_switch in $obj calls swapcontext"
  echo "cross-aarch64: $t: fibers switch with sp__asm_ctx_swap (${obj#"$B"/})"
done

# 3. And the library says so at run time.
cat >"$B/backend_probe.c" <<'EOF'
#include <stdio.h>
#include <spindle/fiber.h>
int main(void) { puts(sp_fiber_backend()); return 0; }
EOF
$TRIPLE-gcc -Iframework/include "$B/backend_probe.c" -L"$B/lib" -lspindle \
  -o "$B/bin/backend_probe"
# (Same loader and libc as ctest uses: see the emulator in the toolchain.)
backend=$(qemu-aarch64 -L "$SYSROOT" -E LD_LIBRARY_PATH="$B/lib:$SYSROOT/lib" \
  "$B/bin/backend_probe")
echo "cross-aarch64: sp_fiber_backend() = $backend"
[[ $backend == asm-aarch64 ]] || fail "backend is '$backend', want asm-aarch64"

# 4. Run the tests under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR).
regex="^($(IFS='|'; echo "${TESTS[*]}"))\$"
(cd "$B" && ctest --output-on-failure -j"$JOBS" -R "$regex")
echo "cross-aarch64: OK"
