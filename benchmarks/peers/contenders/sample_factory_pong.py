"""Sample Factory on Pong, training: its own Atari example, ``sf_examples.atari.train_atari``, run unchanged with
its Atari defaults (``sf_examples/atari/atari_params.py``: the DeepMind protocol with frame skip 4, the Nature CNN,
rollouts of 128, 4 epochs of 4 minibatches of 256, lr 2.5e-4: CleanRL's PPO settings) and ``--device=cpu
--num_workers=2 --num_envs_per_worker=4`` (8 env copies, as the other contenders; its rollout workers, inference and
learner in processes of their own: its asynchronous design). Only ``--mode training``: Sample Factory has no
acting-only entry.

Sample Factory 2.1.1 starts its workers with multiprocessing's spawn, which imports the main module again in each;
under its gymnasium 0.29 pin the ALE ids are registered only by ``import ale_py``, so that import must be in the main
module (``-c`` does not carry it to the workers: ``gymnasium.error.NameNotFound: Environment `PongNoFrameskip`
doesn't exist``). This file is therefore both: run with ``--sf-args ...`` it is Sample Factory's main module; run as a
contender it starts itself that way, reads Sample Factory's ``Total num frames: N`` reports (every 5 s; env frames,
frame skip included, counted in whole rollouts of 1,024 agent steps), prints ``benchmarks/peers/pong_tasks.py``'s
protocol lines from them (the first report with frames as its start), and stops the run after ``--seconds``.
Runs in the sample_factory venv."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import ale_py  # noqa: F401  (registers the ALE ids in every spawned worker: see above)

FRAMES = re.compile(r"Total num frames: (\d+)\.")
FRAME_SKIP = 4
SETTINGS = ["--env=atari_pong", "--device=cpu", "--num_workers=2", "--num_envs_per_worker=4"]


def stop(proc: subprocess.Popen) -> None:
    """Sample Factory's process group: SIGINT (it saves and stops), then SIGKILL."""
    for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def main() -> None:
    if "--sf-args" in sys.argv:  # Sample Factory's own main, as its example runs it
        from sf_examples.atari.train_atari import main as train_atari

        sys.argv = [sys.argv[0], *sys.argv[sys.argv.index("--sf-args") + 1:]]
        sys.exit(train_atari())
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("training",), default="training")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=60.0, help="training time after the first report with frames")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="sf-train-") as train_dir:
        argv = [sys.executable, os.path.abspath(__file__), "--sf-args", *SETTINGS, f"--seed={args.seed}",
                "--experiment=peers", f"--train_dir={train_dir}"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        try:
            start, frames0 = None, 0
            assert proc.stdout is not None
            for line in proc.stdout:
                m = FRAMES.search(line)
                if not m or int(m.group(1)) == 0:
                    continue
                frames, now = int(m.group(1)), time.perf_counter()
                if start is None:
                    start, frames0 = now, frames
                print(json.dumps({"agent_steps": (frames - frames0) // FRAME_SKIP, "seconds": now - start,
                                  "frame_skip": FRAME_SKIP}), flush=True)
                if now - start >= args.seconds:
                    break
            else:
                raise SystemExit(f"Sample Factory exited ({proc.wait()}) before {args.seconds:.0f} s of training")
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
