#!/usr/bin/env bash
# The tests on a second OpenCL implementation: Intel's CPU runtime, from PyPI (intel-opencl-rt,
# in a venv of its own under build/). PoCL, the suite's platform, lacks cl_khr_integer_dot_product,
# so without this the int8 kernels' 'khr' dot product (OpenCL C 3.0) runs on no machine of ours;
# and another compiler and driver answer queries their own way (2026-11-29: no clock, which made
# every fold budget tiny; a build log that numbers its sources; no program cache on disk).
#
#   .ci/second-opencl.sh                       # every 6th test of one interpreter (~800 tests)
#   .ci/second-opencl.sh tests/test_fp16.py    # arguments go to pytest instead
#   CLGPU_TEST_EVERY=6:3 .ci/second-opencl.sh  # another sixth (tests/conftest.py)
#
# Needs the .venv of .ci/setup. On the 2-core machine (2026-11-29): about 230 MB to download,
# then 9-15 minutes for the sixth; Intel's compiler builds each kernel more slowly than PoCL's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rt=$root/build/intel-opencl
if [ ! -x "$rt/bin/python" ]; then
  python3 -m venv "$rt"
  # The runtime, and the compiler runtime libraries it links (libimf, libsvml, libintlc, tbb).
  "$rt/bin/pip" install -q "intel-opencl-rt==2026.*" "intel-cmplr-lib-rt==2026.*"
fi
# Its libraries without its own ICD loader (libOpenCL): the delegate keeps the system's loader,
# which finds the runtime through a vendor file of ours and no other.
deps=$rt/deps
icd=$rt/vendors
rm -rf "$deps" "$icd" && mkdir -p "$deps" "$icd"
for f in "$rt"/lib/*.so*; do
  case $(basename "$f") in libOpenCL*) ;; *) ln -s "$f" "$deps/" ;; esac
done
echo "$rt/lib/libintelocl.so" > "$icd/intel-cpu.icd"
export OCL_ICD_VENDORS=$icd LD_LIBRARY_PATH=$deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

listed=$(cd /tmp && "$root/.venv/bin/clgpu-delegate" devices)
echo "$listed"
[[ $listed == *"Intel(R) OpenCL"* ]] ||
  { echo "second-opencl: Intel's CPU runtime did not load" >&2; exit 2; }
if [ $# -eq 0 ]; then
  export CLGPU_TEST_EVERY=${CLGPU_TEST_EVERY:-6}
  set -- tests -k "not tflite_runtime"
fi
# Its console script, not "python -m pytest" (which would put the source tree on sys.path).
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
