#!/usr/bin/env bash
# The GPU kit on the GPU machine, in one call from the repository root: carry .whl (python -m benchmarks.gpu.wheels
# makes it), e.g. the device tool's run with carry=[".whl"] and command `bash benchmarks/gpu/device_run.sh`.
# Installs the carried wheels into /tmp/site (nothing else can be installed there), gives the checkout's rlrun its
# configs where an install would put them (rlrun.conf), then runs the kit into $OUT. Arguments go to the kit.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "device_run.sh: the carried wheels did not install" >&2; exit 3; }
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
[ -e rlrun/conf ] || ln -s ../conf rlrun/conf
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec python3 -m benchmarks.gpu --out "$OUT" "$@"
