#!/usr/bin/env bash
# The reference code of Obando-Ceron & Castro 2021 ("Revisiting Rainbow") in a virtual environment of its own, to run
# its Rainbow agent on MinAtar beside rlrun's (README.md here).
#   setup.sh DIR [REFERENCE]   DIR: where the venv and the reference go; REFERENCE: a local clone or archive of
#                              JohanSamir/revisiting_rainbow (default: downloaded from GitHub at the pinned commit)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${1:?usage: setup.sh DIR [REFERENCE]}"
COMMIT=7cd2bc6f64d08ebc2233d93210063cc64d2598a7  # the commit conf/algo_env/rainbow_minatar.yaml cites
mkdir -p "$DIR"
if [ ! -d "$DIR/reference" ]; then
  mkdir -p "$DIR/reference.tmp"
  if [ -n "${2:-}" ] && [ -d "$2" ]; then  # a git directory (a clone, or a bare mirror)
    git -C "$2" archive "$COMMIT" | tar -x -C "$DIR/reference.tmp"
  else
    curl -fsSL "https://github.com/JohanSamir/revisiting_rainbow/archive/$COMMIT.tar.gz" \
      | tar -xz --strip-components=1 -C "$DIR/reference.tmp"
  fi
  mv "$DIR/reference.tmp" "$DIR/reference"
fi
if [ ! -x "$DIR/venv/bin/python" ]; then
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install -q -U pip
  # --no-deps: dopamine-rl 3.1.10 declares tensorflow, opencv-python, pygame and gym[atari]; the lock has
  # tensorflow-cpu and the headless OpenCV instead (the same modules), and MinAtar needs neither pygame nor Atari.
  "$DIR/venv/bin/pip" install -q --no-deps -r "$HERE/requirements.lock"
fi
echo "ready: $DIR/venv/bin/python $HERE/run_minatar.py --reference $DIR/reference --base_dir RUN_DIR --game asterix"
