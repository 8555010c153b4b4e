# CMake toolchain: cross-build spindle for AArch64 Linux with Debian's
# gcc-aarch64-linux-gnu, against arm64 multiarch packages (check:arm64,
# libev-dev:arm64, ... from `scripts/deps.sh cross`), and run what it builds
# under qemu-user. Used by scripts/cross-aarch64.sh:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-toolchain.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(SP_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${SP_CROSS_TRIPLE}-gcc)
set(CMAKE_ASM_COMPILER ${SP_CROSS_TRIPLE}-gcc)
# find_library/find_path look in /usr/lib/aarch64-linux-gnu (multiarch),
# never in the build machine's /usr/lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${SP_CROSS_TRIPLE})
list(APPEND CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)

# pkg-config sees only the arm64 .pc files (plus arch-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${SP_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest (and anything using CMAKE_CROSSCOMPILING_EMULATOR) runs the tests
# under qemu-user with the cross libc's dynamic loader (-L). The loader and
# libc.so.6 must come from the same glibc build: check:arm64 pulls in the
# multiarch libc6:arm64, which the host's ld.so.cache would hand to the cross
# loader, and with that mix fork() never returns in the child (glibc's
# private loader state differs between the two builds). LD_LIBRARY_PATH pins
# libc to the cross one.
set(SP_CROSS_SYSROOT /usr/${SP_CROSS_TRIPLE})
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${SP_CROSS_SYSROOT}
    -E LD_LIBRARY_PATH=${SP_CROSS_SYSROOT}/lib)

# libhttp-parser-dev is not Multi-Arch: same, so its :arm64 package cannot be
# installed beside the native one; deps.sh installs only the arm64 runtime
# (libhttp_parser.so.2.9). Give the linker the unversioned name it looks for
# through a link in the build tree. The header in /usr/include is shared.
set(_sp_hp /usr/lib/${SP_CROSS_TRIPLE}/libhttp_parser)
if(NOT EXISTS ${_sp_hp}.so AND EXISTS ${_sp_hp}.so.2.9)
  set(_sp_shim ${CMAKE_BINARY_DIR}/aarch64-shim)
  file(MAKE_DIRECTORY ${_sp_shim})
  file(CREATE_LINK ${_sp_hp}.so.2.9 ${_sp_shim}/libhttp_parser.so SYMBOLIC)
  list(APPEND CMAKE_LIBRARY_PATH ${_sp_shim})
endif()
