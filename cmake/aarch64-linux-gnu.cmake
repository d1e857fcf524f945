# Cross-compiling for 64-bit ARM Linux (glibc) with Debian's cross compilers
# (g++-aarch64-linux-gnu), for scripts/cross_test.sh. Test binaries run
# through qemu user-mode emulation (qemu-user-static), which loads the
# target's C and C++ libraries from /usr/aarch64-linux-gnu; anything CMake
# itself must run goes through the same emulator.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(SACKLI_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(SACKLI_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${SACKLI_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
endif()
