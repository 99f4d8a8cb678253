"""The GPU kit: rlrun on a CUDA machine in one call, the most valuable results first.

A GPU machine is lent now and then for minutes, with nothing installable but carried wheels
(``benchmarks/gpu/device_run.sh`` installs them, then runs this). The kit runs four stages in priority order, each a
subprocess in its own session with its own time budget (a stage that hangs is stopped and the next one runs), and
writes each stage's files into the output folder as soon as the stage ends, so a run cut off still returns what
finished:

1. ``cuda_tests``: ``pytest -m cuda tests/devices/test_cuda.py`` (every algorithm's update on the GPU against the
   CPU's, device=cuda/auto runs, device maps, pinned copies, replicas, bf16, torch.compile) ->
   ``cuda_tests.xml`` (JUnit; the output is in ``kit.log``);
2. ``learner``: ``benchmarks.learner_throughput --device cuda`` (each algorithm's update against a hand-written
   PyTorch step of the same network and loss, and DQN's against its compiled, CUDA-graphed step) -> ``learner.json``;
3. ``actors``: ``benchmarks.impala_actors`` with the local executor (the actors' env copies in subprocesses across
   the cores, the learner on the GPU): APPO's frames/s acting alone and while learning -> ``actors.json``;
4. ``pong``: APPO on Pong for the rest of the budget (``benchmarks.gpu.pong``) -> ``pong.json``.

``kit.json`` (rewritten after every stage: the machine, each stage's exit code, seconds and files) and ``kit.log``
(every stage's output) complete the folder: at most 8 files.

``--dry-run`` runs the same stages on the CPU with tiny budgets and the packages the GPU machine lacks made
unimportable (ray, mlflow, mujoco, ...: ``simulated_machine/sitecustomize.py``), so the kit cannot rot between GPU
machines: ``tests/benchmarks/test_gpu_kit.py`` runs it in every ``make test``.

    python -m benchmarks.gpu --out DIR [--budget-s 480] [--dry-run] [--stages cuda_tests,learner,actors,pong]

``DIR`` defaults to ``$OUT`` (the GPU machine's output folder).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SIMULATED_MACHINE = Path(__file__).resolve().parent / "simulated_machine"
# What the GPU machine lacks and the kit does not carry (benchmarks/gpu/wheels.txt carries the rest): the dry run
# makes these unimportable, so a kit stage that needs one fails here first.
NOT_ON_THE_MACHINE = ("ray", "mlflow", "mujoco", "pettingzoo", "mpe2", "envpool", "sqlalchemy", "alembic",
                      "stable_baselines3", "moviepy", "pygame")
LOG_TAIL_BYTES = 4 << 20  # of each stage's output kept in kit.log (the folder's files are capped at 16 MiB)


@dataclass(frozen=True)
class Stage:
    name: str
    share: float
    """Share of the kit's budget this stage may take (pong takes whatever is left)."""
    files: tuple[str, ...]


STAGES = (Stage("cuda_tests", 0.25, ("cuda_tests.xml",)),
          Stage("learner", 0.25, ("learner.json",)),
          Stage("actors", 0.2, ("actors.json",)),
          Stage("pong", 1.0, ("pong.json",)))
INDEX, LOG = "kit.json", "kit.log"


def stage_command(stage: str, out: Path, work: Path, budget_s: float, dry_run: bool) -> list[str]:
    """The command of ``stage``: the GPU run, or its tiny CPU version."""
    py = sys.executable
    device = "cpu" if dry_run else "cuda"
    if stage == "cuda_tests":
        return [py, "-m", "pytest", "-m", "cuda", str(ROOT / "tests" / "devices" / "test_cuda.py"), "-q", "-rA",
                "-p", "no:cacheprovider", f"--rootdir={ROOT}", f"--junitxml={out / 'cuda_tests.xml'}"]
    if stage == "learner":
        sizes = (["--rounds", "1", "--min-time", "0.02", "--cases",
                  "cartpole_mlp,ppo_atari_nature_cnn,sac_pendulum_mlp", "--compiled", "cartpole_mlp"] if dry_run
                 else ["--quick", "--compiled", "atari_nature_cnn"])
        return [py, "-m", "benchmarks.learner_throughput", "--device", device, *sizes]
    if stage == "actors":
        seconds = 3 if dry_run else max(10, int(budget_s / 2) - 10)  # two runs: idle and thread
        return [py, "-m", "benchmarks.impala_actors", "--algos", "appo", "--modes", "idle,thread", "--executor",
                "local", "--envs", "2" if dry_run else "32", "--device", device, "--seconds", str(seconds),
                "--record", *(["--smoke"] if dry_run else [])]
    if stage == "pong":
        seconds = 4 if dry_run else max(20, int(budget_s) - 25)  # start-up and the final report inside the budget
        return [py, "-m", "benchmarks.gpu.pong", "--out", str(out / "pong.json"), "--work", str(work / "pong"),
                "--device", device, "--seconds", str(seconds), *(["--smoke"] if dry_run else [])]
    raise ValueError(f"unknown stage {stage}")


def machine() -> dict[str, Any]:
    """What ran the kit: the interpreter, torch and its CUDA, the GPU."""
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cuda_build": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
                            "cpus": os.cpu_count(), "platform": platform.platform()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    gpu_multiprocessors=props.multi_processor_count)
    return info


def run_stage(command: list[str], env: dict[str, str], timeout_s: float, log: Path) -> tuple[int | None, float]:
    """Run ``command`` in its own session; stop its whole process group at ``timeout_s``. Returns (exit code or
    None when stopped, seconds); appends the tail of its output to ``log``."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # the stage's env subprocesses too, whether it ended or not
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        size = output.seek(0, os.SEEK_END)
        output.seek(max(0, size - LOG_TAIL_BYTES))
        with log.open("ab") as f:
            f.write(f"\n===== {' '.join(command)}\n".encode())
            shutil.copyfileobj(output, f)
            f.write(f"===== exit {code} after {time.monotonic() - start:.1f} s\n".encode())
    return code, time.monotonic() - start


def stage_env(results: Path, dry_run: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RLRUN_BENCH_RESULTS": str(results), "RLRUN_BENCH_LOG": "0",
           "MPLBACKEND": "Agg"}
    if dry_run:
        env["RLRUN_CUDA_TESTS_ON_CPU"] = "1"
        env["RLRUN_KIT_UNIMPORTABLE"] = ",".join(NOT_ON_THE_MACHINE)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SIMULATED_MACHINE), env.get("PYTHONPATH")) if p)
    return env


def newest_result(folder: Path) -> Path | None:
    found = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def main(argv: list[str] | None = None) -> int:
    """Run the kit; the exit status: 0 when every stage that ran exited 0."""
    index = run_kit(argv)
    return 0 if all(s.get("exit_code", 0) == 0 for s in index["stages"].values()) else 1


def run_kit(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="the output folder (default: $OUT)")
    p.add_argument("--budget-s", type=float, default=480.0, help="seconds for the whole kit (default 480)")
    p.add_argument("--dry-run", action="store_true", help="the same stages on the CPU, tiny budgets")
    p.add_argument("--stages", default=",".join(s.name for s in STAGES), help="a subset, in the kit's order")
    a = p.parse_args(argv)
    if a.out is None:
        p.error("no output folder: give --out DIR or set OUT")
    wanted = a.stages.split(",")
    unknown = set(wanted) - {s.name for s in STAGES}
    if unknown:
        p.error(f"unknown stages {', '.join(sorted(unknown))}; stages: {', '.join(s.name for s in STAGES)}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + a.budget_s
    index: dict[str, Any] = {"kit": "benchmarks/gpu", "dry_run": a.dry_run, "budget_s": a.budget_s,
                             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
                             "stages": {}}
    write_index(out, index)
    with tempfile.TemporaryDirectory(prefix="rlrun-gpu-kit-") as tmp:
        work = Path(tmp)
        for stage in (s for s in STAGES if s.name in wanted):
            left = deadline - time.monotonic()
            if left < 5:
                index["stages"][stage.name] = {"skipped": "the budget ran out"}
                continue
            budget = left if stage.name == "pong" else min(left, stage.share * a.budget_s)
            results = work / stage.name
            results.mkdir()
            command = stage_command(stage.name, out, work, budget, a.dry_run)
            print(f"[kit] {stage.name}: {budget:.0f} s", file=sys.stderr, flush=True)
            code, seconds = run_stage(command, stage_env(results, a.dry_run), budget, out / LOG)
            if stage.name in ("learner", "actors") and (found := newest_result(results)) is not None:
                shutil.copyfile(found, out / stage.files[0])
            index["stages"][stage.name] = {"exit_code": code, "timed_out": code is None, "seconds": round(seconds, 1),
                                           "files": [f for f in stage.files if (out / f).is_file()]}
            write_index(out, index)
            print(f"[kit] {stage.name}: exit {code}, {seconds:.0f} s", file=sys.stderr, flush=True)
    index["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_index(out, index)
    return index


def write_index(out: Path, index: dict[str, Any]) -> None:
    tmp = out / f".{INDEX}.tmp"
    tmp.write_text(json.dumps(index, indent=2) + "\n")
    tmp.replace(out / INDEX)


if __name__ == "__main__":
    sys.exit(main())
