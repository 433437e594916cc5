#!/usr/bin/env bash
# CI: the extension and the plugin built with AddressSanitizer + UBSan (CMake option
# CLGPU_SANITIZE=ON) and the test suite run against them, LeakSanitizer included.
#
#   .ci/sanitize.sh                 # build/sanitize, the whole suite
#   .ci/sanitize.sh tests/test_faults.py -k invoke   # arguments go to pytest instead of "tests"
#
# Python itself is not instrumented, so gcc's libasan is preloaded into every process (pytest
# and the children the tests start). Reports go to files under build/sanitize/reports; the
# job fails when pytest fails or when any report has a frame in our code (src_cpp/, _core,
# libclgpu_delegate). Reports that only involve other code (TFLite's own out-of-bounds reads
# on the corrupted models of test_faults_models.py, PoCL's and Python's leaks) are listed, not fatal.
# Needs the .venv of .ci/setup. On 2 cores (2026-11-29): 11 min to build, 34 min for the 1,084
# tests with PoCL's kernel cache empty; .ci/run fills the cache first.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${CLGPU_SANITIZE_BUILD:-build/sanitize}
python=${PYTHON:-$root/.venv/bin/python}
reports=$root/$build/reports

# --- 1. build: a separate tree, so the normal build in the package stays untouched ---------
# pip built the package in an isolated environment: the venv itself may lack pybind11.
"$python" -c "import pybind11" 2>/dev/null || "$python" -m pip install -q "pybind11>=2.12"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# -O1 (what ASan's authors advise) and line tables only (-g1: the reports' frames keep file and
# line): a file of the core compiled in 11 s instead of 25 at -O2 -g on the 2-core machine.
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLGPU_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DPython_EXECUTABLE="$python" -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$build" -j"$(nproc)"

# --- 2. the package with the sanitized libraries, in front of the installed one -------------
site=$root/$build/site
rm -rf "$site" && mkdir -p "$site"
cp -r clgpu_delegate "$site/"
find "$site/clgpu_delegate" -name '*.so' -delete
cp "$build"/_core*.so "$build"/libclgpu_delegate.so "$site/clgpu_delegate/"

# --- 3. sanitizer runtime and options ------------------------------------------------------
libasan=$(${CXX:-g++} -print-file-name=libasan.so)
[ -f "$libasan" ] || { echo "sanitize: libasan.so not found (g++ -print-file-name)" >&2; exit 2; }
# libstdc++ must be loaded when ASan starts, or its __cxa_throw interceptor finds no real
# function ("CHECK failed ... real___cxa_throw") at our first exception: python does not
# link libstdc++ itself.
libstdcxx=$(${CXX:-g++} -print-file-name=libstdc++.so.6)
preload="$libasan $libstdcxx"
rm -rf "$reports" && mkdir -p "$reports"
# log_path: one file per process that reports, children included; a memory error ends that
# process with exit code 1 (a child: its test sees a crash; pytest itself: the job fails).
# Leaks are checked once, in the pytest process after the last test
# (__lsan_do_recoverable_leak_check below), not at every exit: the children include PoCL's runs
# of the system linker, which inherit the preload and leak by design, and LeakSanitizer shares
# ASan's exit code, so an exit-time report would read as a crash.
# detect_odr_violation=0: pybind11 and TFLite's pybind11 both define the same inline globals.
# use_sigaltstack=0: at a thread's exit ASan unmaps whatever alternate signal stack the thread
# has, and in the warm-up + plugin children that is a heap block some other library installed
# (not page-aligned: munmap fails, "CHECK failed ... unable to unmap" in every child at exit,
# and the child's exit code was 1 when that thread's Die() beat the main thread's exit).
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:leak_check_at_exit=0:\
detect_odr_violation=0:strict_init_order=1:check_initialization_order=1:\
detect_stack_use_after_return=0:allocator_may_return_null=1:handle_segv=1:use_sigaltstack=0:\
fast_unwind_on_malloc=1:malloc_context_size=30"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0:report_objects=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=0"
# Python objects through malloc: LeakSanitizer then sees the references held by Python objects
# (pymalloc arenas are mmap'ed and not scanned, which makes everything they own look leaked).
export PYTHONMALLOC=malloc

# --- 4. the tests ----------------------------------------------------------------------------
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(tests)
# The random graphs repeat code paths the other tests cover; under the sanitizers a quarter of
# them keeps this pass inside its time budget (the plain run after it runs them all).
export CLGPU_RANDOM_CASES=${CLGPU_RANDOM_CASES:-150}
start=$(date +%s)
status=0
status_file=$reports/pytest-status
# sys.path.pop(0): the working directory must not shadow $site. pytest's own status is written
# before the leak check: when LeakSanitizer cannot stop the process's threads ("LeakSanitizer
# has encountered a fatal error", seen on a CI machine) it exits with ASan's exit code, and the
# job must tell that apart from a failed test. gc + a short pause first, so that thread pools
# released by the last tests have exited when the tracer suspends the threads.
LD_PRELOAD="$preload" PYTHONPATH="$site" "$python" -c '
import ctypes, gc, sys, time
sys.path.pop(0)
import pytest
status = int(pytest.main(sys.argv[2:]))
with open(sys.argv[1], "w") as f:
    f.write(str(status))
print("sanitize: pytest status", status, flush=True)
gc.collect()
time.sleep(1)
leaks = ctypes.CDLL(None).__lsan_do_recoverable_leak_check()
print("sanitize: leak check in the pytest process:", "leaks reported" if leaks else "clean")
sys.exit(status)
' "$status_file" -q -p no:cacheprovider "${args[@]}" || status=$?
echo "sanitize: pytest process exit $status after $(( $(date +%s) - start )) s"
leak_check_ran=1
if [ $status -ne 0 ] && [ -f "$status_file" ] && [ "$(cat "$status_file")" = 0 ]; then
  # Every test passed; the process died in the leak check. A leak in our code still fails the
  # job below (its report names our frames); a tracer that could not run is reported, not fatal.
  leak_check_ran=0
  status=0
fi
rm -f "$status_file"

# --- 5. judge the reports ------------------------------------------------------------------
ours='src_cpp/|clgpu_delegate/_core|libclgpu_delegate\.so|clgpu::'
bad=0
shopt -s nullglob
for f in "$reports"/*; do
  kind=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer)[^ ]*|runtime error|LeakSanitizer has encountered a fatal error' "$f" || true)
  if [[ $kind == "LeakSanitizer has encountered a fatal error" ]]; then
    echo "sanitize: the leak check could not run (not a leak, not fatal): $f"
    sed -n '1,15p' "$f"
    continue
  fi
  # The delegate is the only OpenCL client in these processes: a memory error made by the
  # driver (PoCL's worker threads copying to or from host memory) acts on our behalf, e.g. a
  # read still in flight into a tensor TFLite has freed. The first stack is the access.
  driver_access=0
  if [[ $kind == "ERROR: AddressSanitizer:" ]] &&
     awk 'NR > 1 && /^$/ {exit} {print}' "$f" | grep -q 'libpocl'; then
    driver_access=1
  fi
  if [ $driver_access -eq 1 ] || grep -qE "$ours" "$f"; then
    echo "sanitize: REPORT IN OUR CODE ($kind): $f"
    sed -n '1,60p' "$f"
    bad=1
  else
    frame=$(grep -m1 -oE '#[0-9]+ 0x[0-9a-f]+ in [^ ]+ \([^)]*\)' "$f" | sed 's/.* in //' || true)
    echo "sanitize: report outside our code ($kind), not fatal: $f ($frame)"
    # A report of no known kind or with no frame (an ASan CHECK): show it, so that the log says
    # what it was.
    [ -n "$kind" ] && [ -n "$frame" ] || sed -n '1,15p' "$f"
  fi
done
[ $bad -eq 0 ] || { echo "sanitize: FAILED: sanitizer reports in our code" >&2; exit 1; }
[ $status -eq 0 ] || { echo "sanitize: FAILED: pytest exit $status" >&2; exit "$status"; }
if [ $leak_check_ran -eq 0 ]; then
  echo "sanitize: OK (no sanitizer report in our code; the final leak check could not run, see above)"
else
  echo "sanitize: OK (no sanitizer report in our code)"
fi
