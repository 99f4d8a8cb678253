"""The ``rlrun`` command's garbage collection at start-up (rlrun/app/startup_gc.py): no collection while it imports
and builds the run, the start-up's objects frozen out of later collections once the run is built, collection on
again on every way out; a program that calls ``run_experiment`` itself keeps its own collector. Each case runs in a
fresh Python process (the collector is process state)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = ["algo=ppo", "stop.env_steps=1024", "logger=none", "export.formats=[]", "checkpoint.at_end=false"]
TORCH_OBJECTS = 100_000  # torch's import alone leaves ~200k objects; a freeze after it holds more than this


def python(code: str, cwd: Path) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


WATCH = """
import gc, json
frozen_at = []  # the freeze count at the start of every collection from main() on
from rlrun.app.cli import main
gc.callbacks.append(lambda phase, info: phase == "start" and frozen_at.append(gc.get_freeze_count()))
try:
    main({args!r})
    code = 0
except SystemExit as e:
    code = e.code
print(json.dumps({{"code": code, "frozen_at": frozen_at, "frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}}))
"""


def test_a_run_collects_nothing_until_it_is_built_then_collects_without_the_start_ups_objects(tmp_path: Path) -> None:
    out = python(WATCH.format(args=RUN), tmp_path)
    assert out["code"] == 0 and out["enabled"]
    assert out["frozen"] > TORCH_OBJECTS  # torch, Hydra and the run's objects frozen when it was built
    assert out["frozen_at"], "the run itself collects garbage"
    assert min(out["frozen_at"]) > TORCH_OBJECTS  # every collection came after the freeze: none during start-up


def test_a_config_error_leaves_collection_on(tmp_path: Path) -> None:
    out = python(WATCH.format(args=["algo=nope"]), tmp_path)
    assert out["code"] == 2 and out["enabled"] and out["frozen"] > 0


def test_run_experiment_called_by_a_program_keeps_its_collector(tmp_path: Path) -> None:
    code = f"""
import gc, json
from rlrun.app.run import run_experiment
from rlrun.config import compose
run_experiment(compose({RUN!r}), "run")
print(json.dumps({{"frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}}))
"""
    assert python(code, tmp_path) == {"frozen": 0, "enabled": True}


def test_resume_does_nothing_where_nothing_was_paused_and_happens_once(tmp_path: Path) -> None:
    code = """
import gc, json
from rlrun.app.startup_gc import pause_collection, resume_collection
resume_collection()
before = [gc.isenabled(), gc.get_freeze_count()]
gc.disable(); pause_collection(); resume_collection()  # disabled by the program: not rlrun's to turn on
kept = [gc.isenabled(), gc.get_freeze_count()]
gc.enable(); pause_collection()
paused = gc.isenabled()
resume_collection(); frozen = gc.get_freeze_count(); junk = [[] for _ in range(1000)]; resume_collection()
print(json.dumps([before, kept, paused, gc.isenabled(), frozen > 0, gc.get_freeze_count() == frozen]))
"""
    assert python(code, tmp_path) == [[True, 0], [False, 0], False, True, True, True]


def test_objects_frozen_at_start_up_are_finalized_at_exit(tmp_path: Path) -> None:
    """A cycle made during the paused start-up and frozen with it is freed, its finalizer run, when the process
    exits (an ALE env's bindings reported themselves leaked when it was not)."""
    code = """
import sys
from rlrun.app.startup_gc import pause_collection, resume_collection
class Node:
    def __del__(self):
        sys.stdout.write("finalized\\n")
pause_collection()
node = Node()
node.self = node  # only the collector frees a cycle
resume_collection()
del node
print('{"exited": true}')
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ['{"exited": true}', "finalized"]
