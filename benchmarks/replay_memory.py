"""Replay storage per Atari transition: bytes, frames kept, insert and sample time, with each distinct frame
stored once (``algo.frames_per_record``, rlrun/components/frame_store.py) against every stack stored whole.

A real stream: Pong under the DeepMind protocol (rlrun's Atari factory, ``env=pong``), 8 env copies with random
actions, episodes ending at lost points as the env gives them; transitions inserted as DQN's local plan inserts
them (``rollout_steps`` agent steps of every copy per insert) and as Ape-X actors send them (n-step, 50 steps per
batch). Both memories get the same inserts; then the same sampled batches are checked equal (the dedup store
gives back exactly what went in) and timed.

Figures: ``bytes_per_transition/{whole,dedup}`` (storage over capacity, the frame ring included),
``frames_per_transition/dedup`` (distinct frames written per transition inserted), ``ratio/bytes_whole_vs_dedup``,
``insert_us_per_transition/*``, ``sample_ms_per_batch32/*``, ``ratio/insert_speed_dedup_vs_whole``.

    python -m benchmarks.replay_memory [--transitions 6000] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
import torch


def pong_stream(transitions: int, copies: int = 8, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Per agent step of ``copies`` Pong copies: obs, action, reward, next_obs (the final one at an episode end),
    discount."""
    from omegaconf import OmegaConf

    from rlrun.config import compose
    from rlrun.registry import registry

    cfg = compose(["env=pong"]).env
    factory = registry.build("env", cfg.name, OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)))
    envs = factory.make_vector(copies)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=list(range(seed, seed + copies)))
    steps = []
    while len(steps) * copies < transitions:
        actions = rng.integers(0, envs.single_action_space.n, copies)
        nxt, reward, term, trunc, info = envs.step(actions)
        done = term | trunc
        real_next = nxt.copy()
        for i in np.nonzero(done)[0]:
            real_next[i] = info["final_obs"][i]
        steps.append({"obs": obs, "action": actions, "reward": reward.astype(np.float32), "next_obs": real_next,
                      "discount": np.where(term, 0.0, 0.99).astype(np.float32)})
        obs = nxt
    envs.close()
    return steps


def batches(steps: list[dict], per_insert: int) -> list[dict]:
    return [{k: np.concatenate([s[k] for s in steps[i:i + per_insert]]) for k in steps[0]}
            for i in range(0, len(steps), per_insert)]


def measure(steps: list[dict], per_insert: int, capacity: int, frames_per_record: float) -> dict[str, Any]:
    from rlrun import spaces as sp
    from rlrun.components.memories import ReplayMemory

    obs_space = sp.Box(0, 255, steps[0]["obs"].shape[1:], np.uint8)
    scalar = sp.Box(-np.inf, np.inf, (), np.float32)
    space = sp.Dict({"obs": obs_space, "action": sp.Discrete(6), "reward": scalar, "next_obs": obs_space,
                     "discount": scalar})
    plain = ReplayMemory(capacity, seed=1).build(records=space)
    dedup = ReplayMemory(capacity, seed=1, frames_per_record=frames_per_record).build(records=space)
    inserts = batches(steps, per_insert)
    n = sum(len(b["obs"]) for b in inserts)
    out: dict[str, Any] = {}
    for name, memory in (("whole", plain), ("dedup", dedup)):
        start = time.perf_counter()
        for b in inserts:
            memory.insert(b)
        out[f"insert_us_per_transition/{name}"] = (time.perf_counter() - start) / n * 1e6
        out[f"bytes_per_transition/{name}"] = memory.bytes_per_record()
    out["frames_per_transition/dedup"] = int(dedup.frames.written) / n
    for name, memory in (("whole", plain), ("dedup", dedup)):
        start = time.perf_counter()
        for _ in range(50):
            memory.sample(32)
        out[f"sample_ms_per_batch32/{name}"] = (time.perf_counter() - start) / 50 * 1e3
    for _ in range(20):  # the same draws from both: the dedup store gives back exactly what went in
        a, b = plain.sample(32), dedup.sample(32)
        if not all(torch.equal(a[k], b[k]) for k in a):
            raise AssertionError("the dedup memory sampled records that differ from the whole-stack memory's")
    out["ratio/bytes_whole_vs_dedup"] = out["bytes_per_transition/whole"] / out["bytes_per_transition/dedup"]
    out["ratio/insert_speed_dedup_vs_whole"] = (out["insert_us_per_transition/whole"]
                                               / out["insert_us_per_transition/dedup"])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.common import publish

    p = argparse.ArgumentParser(prog="python -m benchmarks.replay_memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--transitions", type=int, default=6000)
    from rlrun.algos.dqn_config import DQNConfig

    p.add_argument("--frames-per-record", type=float, default=DQNConfig.frames_per_record,
                   help="frame ring per transition (default: DQN's and Ape-X's algo.frames_per_record)")
    p.add_argument("--quick", action="store_true", help="1,600 transitions")
    a = p.parse_args(argv)
    n = 1600 if a.quick else a.transitions
    steps = pong_stream(n)
    figures: dict[str, Any] = {"transitions": len(steps) * 8, "env": "Pong (env=pong, DeepMind protocol), 8 copies"}
    capacity = len(steps) * 8 // 2  # the ring wraps: the steady state, not a filling memory
    for label, per_insert in (("dqn_rollout4", 4), ("apex_batch50", 50), ("per_step", 1)):
        for key, value in measure(steps, per_insert, capacity, a.frames_per_record).items():
            figures[f"{key}/{label}"] = value
    publish("replay_memory", figures, "python -m benchmarks.replay_memory " + " ".join(argv or sys.argv[1:]))
    return figures


if __name__ == "__main__":
    main()
