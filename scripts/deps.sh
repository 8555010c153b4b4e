#!/usr/bin/env bash
# Install the Debian packages spindle needs, only those missing (a no-op when
# everything is present).
#   scripts/deps.sh          build + test dependencies
#   scripts/deps.sh bench    + peers and tools for `make bench`
#   scripts/deps.sh cross    + AArch64 cross toolchain, qemu-user, arm64 Check
set -euo pipefail

core=(cmake make gcc pkg-config libev-dev libhttp-parser-dev check libyaml-dev libunwind-dev
      valgrind curl python3 python3-websockets python3-autobahn netcat-openbsd
      libhiredis-dev libcurl4-openssl-dev redis-server
      libmariadb-dev mariadb-server libmemcached-dev memcached libssl-dev openssl
      zlib1g-dev)
bench=(libboost-context-dev g++ wrk libst-dev nginx-light liburing-dev)
# arm64 libraries come as multiarch packages. libhttp-parser-dev is not
# Multi-Arch: same (its :arm64 would replace the native one), so only its
# runtime is installed; scripts/aarch64-toolchain.cmake links to it for the
# linker, and the header in /usr/include serves both architectures.
cross=(gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross file check:arm64
       libev-dev:arm64 libyaml-dev:arm64 libhttp-parser2.9:arm64 libssl-dev:arm64
       zlib1g-dev:arm64)

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
