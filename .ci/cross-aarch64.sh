#!/usr/bin/env bash
# Cross-builds the Python-free plugin and the native C++ test for aarch64 Linux
# with Debian's cross gcc, checks what the plugin exports and links, compiles the
# Android-only code paths, and runs the test under qemu-user against Debian's
# arm64 PoCL. Idempotent; CI runs it as a step of its own. Exits non-zero on failure.
#
# Environment (all optional):
#   CLGPU_CROSS_BUILD_DIR   build folder (default: <repo>/build-aarch64)
#   CLGPU_ARM64_POCL_ROOT   where arm64 PoCL is unpacked (default: /opt/clgpu-arm64-pocl)
#   CLGPU_CROSS_TEST_TIMEOUT  seconds for the emulated test run (default: 1200)
#   CLGPU_CROSS_TEST_ARGS   extra arguments for the emulated clgpu_native_test, e.g.
#                           "--all-algorithms --precision fp16"
#   CLGPU_CROSS_REQUIRE_JIT=1 fail (instead of falling back to device enumeration)
#                           when PoCL cannot compile kernels under qemu
#   CLGPU_CROSS_SKIP_INSTALL=1 do not touch apt (the packages must already be there)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${CLGPU_CROSS_BUILD_DIR:-$ROOT/build-aarch64}
POCL_ROOT=${CLGPU_ARM64_POCL_ROOT:-/opt/clgpu-arm64-pocl}
TEST_TIMEOUT=${CLGPU_CROSS_TEST_TIMEOUT:-1200}
TRIPLE=aarch64-linux-gnu
START=$SECONDS
ulimit -c 0  # an aborting emulated program must not leave core files in the tree

PASSED=0 SKIPPED=0
step() { printf '\n=== [cross-aarch64 %4ds] %s\n' $((SECONDS - START)) "$*"; }
passed() { PASSED=$((PASSED + 1)); }
skipped() { SKIPPED=$((SKIPPED + 1)); }
# The last line is a plain "N passed, N failed" summary of the checks (each step
# below counts as one), so a CI log shows the outcome at the bottom.
die() {
  printf 'cross-aarch64: FAILED: %s\n' "$*" >&2
  printf 'cross-aarch64: %d passed, 1 failed, %d skipped\n' "$PASSED" "$SKIPPED"
  exit 1
}

# Host packages (amd64) and target libraries (arm64, Multi-Arch: same, so they
# install beside the host's own). libpocl2:arm64 itself cannot be installed: it
# depends on clang-15:arm64 -> binutils:arm64, which conflicts with the cross
# binutils; and libclang-cpp15 is not Multi-Arch: same, so installing the arm64
# one would remove the host's libclang-cpp15 and with it the host's PoCL. Those
# three packages are unpacked into $POCL_ROOT instead (see unpack_pocl).
HOST_PACKAGES=(g++-"$TRIPLE" binutils-"$TRIPLE" qemu-user cmake make opencl-headers
               clang-15 android-liblog-dev)
ARM64_PACKAGES=(libc6:arm64 libstdc++6:arm64 ocl-icd-libopencl1:arm64 libllvm15:arm64
                libhwloc15:arm64)
POCL_DEBS=(libpocl2:arm64 pocl-opencl-icd:arm64 libclang-cpp15:arm64 libpocl2-common)

missing_packages() {
  local p
  for p in "${HOST_PACKAGES[@]}" "${ARM64_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      echo "$p"
  done
}

install_packages() {
  local missing
  missing=$(missing_packages)
  if [[ -z $missing ]]; then
    echo "all packages present"
    return
  fi
  [[ ${CLGPU_CROSS_SKIP_INSTALL:-0} == 1 ]] && die "missing packages: $(echo $missing)"
  [[ $(id -u) == 0 ]] || die "missing packages (run as root to install): $(echo $missing)"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  # Never let this step remove anything from the host (see the note above).
  local removals
  removals=$(apt-get install -s -y --no-install-recommends $missing | grep '^Remv' || true)
  [[ -z $removals ]] || die "installing $(echo $missing) would remove host packages:"$'\n'"$removals"
  apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
    die "apt-get install $(echo $missing) failed"
  echo "installed: $(echo $missing)"
}

# Unpacks arm64 PoCL (and the clang/LLVM pieces apt cannot install beside the
# host's) into $POCL_ROOT, keeping Debian's relative layout: PoCL finds its
# headers and kernel library relative to libpocl.so (../../share/pocl).
candidates() {
  local deb
  for deb in "${POCL_DEBS[@]}"; do
    echo "$deb=$(apt-cache policy "$deb" | awk '/Candidate:/ {print $2}')"
  done
}

unpack_pocl() {
  local stamp=$POCL_ROOT/.versions want deb tmp
  want=$(candidates)
  if grep -q '=\((none)\)\?$' <<<"$want" && [[ $(id -u) == 0 ]]; then
    apt-get update -qq  # package lists missing or cleaned since the install step
    want=$(candidates)
  fi
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
    echo "arm64 PoCL already unpacked in $POCL_ROOT"
    return
  fi
  if grep -q '=\((none)\)\?$' <<<"$want"; then
    die "not in the apt lists (is arm64 enabled?):"$'\n'"$want"
  fi
  tmp=$(mktemp -d)
  chown _apt "$tmp" 2>/dev/null || true  # else apt warns that it downloads unsandboxed
  (cd "$tmp" && apt-get download -qq "${POCL_DEBS[@]}") || die "apt-get download ${POCL_DEBS[*]} failed"
  rm -rf "$POCL_ROOT"
  mkdir -p "$POCL_ROOT/vendors"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$POCL_ROOT"; done
  rm -rf "$tmp"
  local lib
  lib=$(find "$POCL_ROOT/usr/lib/$TRIPLE" -maxdepth 1 -name 'libpocl.so.2.*' -print -quit)
  [[ -n $lib ]] || die "libpocl.so.2.* missing after unpacking into $POCL_ROOT"
  # A vendors folder of our own: the loader gets an absolute path, and the host's
  # /etc/OpenCL/vendors (x86 PoCL) is not consulted.
  echo "$lib" >"$POCL_ROOT/vendors/pocl-arm64.icd"
  echo "$want" >"$stamp"
  echo "unpacked arm64 PoCL into $POCL_ROOT"
}

configure_and_build() {
  # Only CL/ of the host's headers: -isystem /usr/include would put the host's C
  # library headers in front of the target's.
  mkdir -p "$BUILD/opencl-include"
  ln -sfn /usr/include/CL "$BUILD/opencl-include/CL"
  cmake -S "$ROOT" -B "$BUILD" \
    -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCLGPU_BUILD_PYTHON=OFF -DCLGPU_BUILD_PLUGIN=ON -DCLGPU_BUILD_NATIVE_TESTS=ON \
    -DCLGPU_OPENCL_INCLUDE_DIR="$BUILD/opencl-include" \
    -DOpenCL_INCLUDE_DIR="$BUILD/opencl-include"
  # The Python-free build must not have looked for Python or pybind11 at all.
  if grep -Eq '^(pybind11_DIR|Python_EXECUTABLE|Python3_EXECUTABLE|PYTHON_EXECUTABLE):' \
      "$BUILD/CMakeCache.txt"; then
    die "CLGPU_BUILD_PYTHON=OFF still searched for Python/pybind11 (see $BUILD/CMakeCache.txt)"
  fi
  cmake --build "$BUILD" -j"$(nproc)" || die "the aarch64 build failed"
  passed
}

check_plugin() {
  local so=$BUILD/libclgpu_delegate.so exports needed expected
  [[ -f $so ]] || so=$(find "$BUILD" -name libclgpu_delegate.so -print -quit)
  [[ -f $so ]] || die "libclgpu_delegate.so was not built"
  "$TRIPLE"-readelf -h "$so" | grep -q 'Machine:.*AArch64' || die "$so is not an aarch64 binary"
  # Defined dynamic symbols, less the version-node names (type A) a version script adds.
  exports=$("$TRIPLE"-nm -D --defined-only --format=posix "$so" | awk '$2 != "A" {print $1}' |
            sed 's/@.*//' | sort -u)
  expected=$(printf '%s\n' clgpu_driver_lock tflite_plugin_create_delegate tflite_plugin_destroy_delegate)
  echo "exported: $(echo $exports)"
  [[ $exports == "$expected" ]] ||
    die "the plugin must export exactly the two entry points and its driver lock, it exports:"$'\n'"$exports"
  needed=$("$TRIPLE"-readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "DT_NEEDED: $(echo $needed)"
  if grep -qi 'libOpenCL' <<<"$needed"; then die "the plugin links libOpenCL (DT_NEEDED)"; fi
  if grep -qi 'libpython' <<<"$needed"; then die "the plugin links libpython (DT_NEEDED)"; fi
  passed
}

# The __ANDROID__ branches (logcat logging, vendor library paths) compiled with
# clang for aarch64-linux-android26. There is no NDK in Debian's main archive, so
# the headers are glibc's and libstdc++'s aarch64 ones plus AOSP's <android/log.h>
# (android-liblog-dev): a syntax check of our code, not an NDK build.
check_android_syntax() {
  local clang=clang++-15 inc=/usr/$TRIPLE/include gccver flags defines includes std
  command -v $clang >/dev/null || { echo "SKIP: $clang not installed"; skipped; return; }
  if [[ ! -f /usr/include/android/android/log.h ]]; then
    echo "SKIP: android-liblog-dev not installed"
    skipped
    return
  fi
  gccver=$(ls "$inc/c++" | sort -V | tail -n1)
  # The core's own defines and include folders, as CMake wrote them for the build.
  flags=$BUILD/CMakeFiles/clgpu_core.dir/flags.make
  [[ -f $flags ]] || die "$flags not found (expected CMake's Makefile generator)"
  defines=$(sed -n 's/^CXX_DEFINES = //p' "$flags")
  includes=$(sed -n 's/^CXX_INCLUDES = //p' "$flags")
  std=$(grep -o -- '-std=[a-z+0-9]*' "$flags" | head -n1)
  local n=0 fails=0 f running=0 jobs_max
  jobs_max=$(nproc)
  # One clang per core (the files are independent): 131 files one after another took 3 min of
  # the 2-core CI machine.
  while IFS= read -r f; do
    n=$((n + 1))
    # eval: the defines carry shell-escaped quotes (-DCLGPU_VERSION=\"0.1.0\").
    eval "$clang" --target=aarch64-linux-android26 -fsyntax-only "${std:--std=c++17}" \
      -nostdinc++ -isystem "$inc/c++/$gccver" -isystem "$inc/c++/$gccver/$TRIPLE" \
      -isystem /usr/include/android -isystem "$inc" "$defines" "$includes" '"$f"' &
    running=$((running + 1))
    if [[ $running -ge $jobs_max ]]; then
      wait -n || fails=$((fails + 1))
      running=$((running - 1))
    fi
  done < <(find "$ROOT/src_cpp" "$BUILD/generated" -name '*.cc' -not -path '*/src_cpp/python/*' |
           sort)
  for ((; running > 0; running--)); do wait -n || fails=$((fails + 1)); done
  [[ $n -gt 0 ]] || die "no sources found for the Android check"
  [[ $fails == 0 ]] || die "$fails of $n files fail to compile for aarch64-linux-android26"
  echo "android26 syntax check: $n files ok"
  passed
}

run_emulated() {
  local test_bin=$BUILD/tests/native/clgpu_native_test
  [[ -x $test_bin ]] || die "$test_bin was not built"
  # No -L: libc6:arm64 (multiarch) provides /lib/ld-linux-aarch64.so.1, and with
  # -L the PoCL compile step was seen to spin for over ten minutes.
  local -a run=(env OCL_ICD_VENDORS="$POCL_ROOT/vendors"
                LD_LIBRARY_PATH="$POCL_ROOT/usr/lib/$TRIPLE"
                POCL_CACHE_DIR="$BUILD/pocl-cache" CLGPU_LOG=info
                qemu-aarch64 "$test_bin")
  rm -rf "$BUILD/pocl-cache"  # time the real compile every run

  step "device enumeration under qemu"
  timeout 300 "${run[@]}" --list || die "no OpenCL device under qemu (arm64 ocl-icd + PoCL)"
  passed

  step "JIT probe under qemu (PoCL compiles one trivial kernel)"
  local t0=$SECONDS probe_log=$BUILD/jit-probe.log
  if ! timeout 600 "${run[@]}" --jit-probe 2>&1 | tee "$probe_log"; then
    echo "FALLBACK: PoCL could not compile a kernel under qemu-aarch64 (log: $probe_log)."
    echo "Only the build, the symbol check and device enumeration ran for aarch64."
    [[ ${CLGPU_CROSS_REQUIRE_JIT:-0} == 1 ]] && die "CLGPU_CROSS_REQUIRE_JIT=1 and the JIT probe failed"
    skipped  # the probe
    skipped  # the conv + GEMM test
    return 0
  fi
  echo "JIT probe took $((SECONDS - t0))s"
  passed

  step "native conv + GEMM test under qemu (timeout ${TEST_TIMEOUT}s)"
  t0=$SECONDS
  local rc=0
  # shellcheck disable=SC2086
  timeout "$TEST_TIMEOUT" "${run[@]}" ${CLGPU_CROSS_TEST_ARGS:-} || rc=$?
  [[ $rc == 124 ]] && die "the emulated test ran past ${TEST_TIMEOUT}s"
  [[ $rc == 0 ]] || die "the emulated native test failed (exit $rc)"
  echo "emulated native test took $((SECONDS - t0))s"
  passed
}

step "packages"
install_packages
step "arm64 PoCL"
unpack_pocl
step "configure + build ($BUILD)"
configure_and_build
step "plugin exports and DT_NEEDED"
check_plugin
step "Android (__ANDROID__) code paths, clang --target=aarch64-linux-android26 -fsyntax-only"
check_android_syntax
run_emulated
step "done"
printf 'cross-aarch64: %d passed, 0 failed, %d skipped\n' "$PASSED" "$SKIPPED"
