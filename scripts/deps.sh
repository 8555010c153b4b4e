#!/usr/bin/env bash
# Install the Debian packages spindle needs, only those missing (a no-op when
# everything is present).
#   scripts/deps.sh          build + test dependencies
#   scripts/deps.sh bench    + peers and tools for `make bench`
#   scripts/deps.sh cross    + AArch64 cross toolchain, qemu-user, arm64 Check
set -euo pipefail

core=(cmake make gcc pkg-config libev-dev libhttp-parser-dev check libyaml-dev
      valgrind curl python3 netcat-openbsd)
bench=(libboost-context-dev g++ wrk)
cross=(gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross check:arm64)

want=("${core[@]}")
for group in "$@"; do
  case "$group" in
    bench) want+=("${bench[@]}") ;;
    cross) want+=("${cross[@]}") ;;
    *) echo "deps.sh: unknown group '$group' (bench, cross)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  # One line per installed architecture of the package.
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' ||
    missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
for p in "${missing[@]}"; do
  if [[ "$p" == *:arm64 ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
  fi
done
echo "deps.sh: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
