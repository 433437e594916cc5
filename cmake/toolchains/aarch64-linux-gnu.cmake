# Cross toolchain for 64-bit Arm Linux with Debian's/Ubuntu's cross compiler
# (apt-get install g++-aarch64-linux-gnu). Use:
#   cmake -S . -B build-aarch64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DCLGPU_BUILD_PYTHON=OFF
# Overridable with -D: CLGPU_CROSS_TRIPLE (default aarch64-linux-gnu) and
# CLGPU_CROSS_SYSROOT (default /usr/<triple>, where Debian's cross libc lives).

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT CLGPU_CROSS_TRIPLE)
  set(CLGPU_CROSS_TRIPLE aarch64-linux-gnu)
endif()
if(NOT CLGPU_CROSS_SYSROOT)
  set(CLGPU_CROSS_SYSROOT /usr/${CLGPU_CROSS_TRIPLE})
endif()
# try_compile() projects re-read this file: hand the two settings on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CLGPU_CROSS_TRIPLE CLGPU_CROSS_SYSROOT)

set(CMAKE_C_COMPILER ${CLGPU_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${CLGPU_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${CLGPU_CROSS_TRIPLE})

# Libraries and headers come from the target's root only; programs (code
# generators, python for the build scripts) from the host.
set(CMAKE_FIND_ROOT_PATH ${CLGPU_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Run target programs (ctest, try_run) under qemu-user when it is installed.
# With Debian's libc6:arm64 installed (multiarch) the target's loader is at
# /lib/ld-linux-aarch64.so.1 and qemu needs no -L; otherwise point qemu at the
# cross libc.
find_program(CLGPU_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(CLGPU_QEMU_AARCH64)
  if(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${CLGPU_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${CLGPU_QEMU_AARCH64} -L ${CLGPU_CROSS_SYSROOT})
  endif()
endif()
