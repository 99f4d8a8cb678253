"""Raw environment speed with random actions: the physical limit of sampling on this machine (no policy, no learning).

Each line: agent steps/s (summed over env copies) and frames/s (= agent steps x frame skip), median of ``--repeats``
timed blocks of ``--seconds`` each, after a warm-up. Random actions are drawn up front, so their cost is not timed.

- ``pong/rlrun_1proc``: ``env=pong`` (DeepMind protocol, rlrun's wrappers on ale-py), one env copy, this process;
- ``pong/gymnasium_wrappers_1proc``: the same protocol with gymnasium's ``AtariPreprocessing`` +
  ``FrameStackObservation(4)`` on ``ALE/Pong-v5(frameskip=1)`` (what MEASURED.md measured at ~1.6k steps/s);
- ``pong/ale_v5_defaults_1proc``: bare ``ALE/Pong-v5`` (frameskip 4 inside the ALE, RGB frames, no preprocessing);
- ``pong/rlrun_sync_x4``: ``env=pong`` in a gymnasium ``SyncVectorEnv`` of 4 copies (what ``executor.num_envs=4`` does);
- ``pong/rlrun_async_x2``: ``AsyncVectorEnv`` of 2 copies in 2 subprocesses (``executor.vector_mode=async``);
- ``pong/envpool_x8`` (and ``_x16``): ``env.backend=envpool`` (rlrun's SAME_STEP wrapper over a sync envpool pool,
  one C++ thread per core), if envpool is installed;
- ``pong/ale_vector_x8``: ale-py's own C++ vector env (``ale_py.vector_env.AtariVectorEnv``, same protocol, not an
  rlrun backend: a reference for what C++ stepping gives);
- ``cartpole/1env``, ``cartpole/sync_x8``: CartPole-v1 through ``env=cartpole``'s factory;
- ``pong/wrappers_interleaved`` (with both ``_1proc`` Pong lines): rlrun's wrappers against gymnasium's, timed
  alternately, so that load from other work hits both alike; ``ratio/rlrun_wrappers_vs_gymnasium_wrappers*``.

    python -m benchmarks.env_speed [--quick] [--seconds S] [--repeats N] [--only NAME,...]

Results: ``benchmarks/results/<date>-<commit>-env_speed.json`` (benchmarks/common.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from benchmarks.common import interleaved_ratio, write_result


def _atari_factory(**overrides: Any) -> Any:
    from omegaconf import OmegaConf

    from rlrun.config import AtariEnvConfig
    from rlrun.envs.atari import AtariEnvFactory

    return AtariEnvFactory(OmegaConf.structured(AtariEnvConfig(game="Pong", **overrides)))


def _gym_factory(env_id: str = "CartPole-v1") -> Any:
    from omegaconf import OmegaConf

    from rlrun.envs.gym_env import GymEnvFactory

    return GymEnvFactory(OmegaConf.create({"name": "gym", "id": env_id, "max_episode_steps": None, "frame_skip": 1,
                                           "kwargs": {}}))


def _time_single(env: Any, seconds: float, repeats: int, num_actions: int) -> list[float]:
    """Agent steps/s of one gymnasium env (reset on episode end, as an autoreset would)."""
    rng = np.random.default_rng(0)
    acts = rng.integers(0, num_actions, 1 << 16)
    env.reset(seed=0)
    k = 0

    def block(duration: float) -> float:
        nonlocal k
        n, start = 0, time.perf_counter()
        while True:
            for _ in range(100):
                _, _, terminated, truncated, _ = env.step(acts[k & 0xFFFF])
                k += 1
                if terminated or truncated:
                    env.reset()
            n += 100
            elapsed = time.perf_counter() - start
            if elapsed >= duration:
                return n / elapsed

    block(min(seconds, 0.5))
    return [block(seconds) for _ in range(repeats)]


def _time_vector(envs: Any, seconds: float, repeats: int, num_actions: int, seeds: Any = None) -> list[float]:
    """Agent steps/s (summed over copies) of a vector env with SAME_STEP autoreset."""
    n_envs = envs.num_envs
    rng = np.random.default_rng(0)
    acts = rng.integers(0, num_actions, (1024, n_envs))
    envs.reset(seed=list(range(n_envs)) if seeds is None else seeds)
    k = 0

    def block(duration: float) -> float:
        nonlocal k
        n, start = 0, time.perf_counter()
        while True:
            for _ in range(20):
                envs.step(acts[k & 1023])
                k += 1
            n += 20 * n_envs
            elapsed = time.perf_counter() - start
            if elapsed >= duration:
                return n / elapsed

    try:
        block(min(seconds, 0.5))
        return [block(seconds) for _ in range(repeats)]
    finally:
        envs.close()


def _cases(have_envpool: bool) -> dict[str, tuple[int, Callable[[float, int], list[float]]]]:
    """name -> (frame skip, function(seconds, repeats) -> agent steps/s per block)."""
    import gymnasium as gym

    def rlrun_single(s: float, r: int) -> list[float]:
        f = _atari_factory()
        return _time_single(f.make(), s, r, f.spec.action_space.n)

    def gym_wrappers(s: float, r: int) -> list[float]:
        from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

        _atari_factory()  # registers the ALE ids
        env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
        env = FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84), 4)
        return _time_single(env, s, r, 6)

    def ale_defaults(s: float, r: int) -> list[float]:
        _atari_factory()
        return _time_single(gym.make("ALE/Pong-v5"), s, r, 6)

    def rlrun_vector(n: int, mode: str) -> Callable[[float, int], list[float]]:
        def run(s: float, r: int) -> list[float]:
            f = _atari_factory()
            return _time_vector(f.make_vector(n, mode), s, r, f.spec.action_space.n)
        return run

    def envpool_vector(n: int) -> Callable[[float, int], list[float]]:
        def run(s: float, r: int) -> list[float]:
            f = _atari_factory(backend="envpool")
            return _time_vector(f.make_vector(n), s, r, f.spec.action_space.n)
        return run

    def ale_vector(n: int) -> Callable[[float, int], list[float]]:
        def run(s: float, r: int) -> list[float]:
            from ale_py.vector_env import AtariVectorEnv

            envs = AtariVectorEnv("pong", n, num_threads=min(n, os.cpu_count() or 1), autoreset_mode="SameStep",
                                  use_fire_reset=False, episodic_life=True, reward_clipping=True)
            return _time_vector(envs, s, r, 6, seeds=np.arange(n))
        return run

    def cartpole(n: int | None) -> Callable[[float, int], list[float]]:
        def run(s: float, r: int) -> list[float]:
            f = _gym_factory()
            if n is None:
                return _time_single(f.make(), s, r, 2)
            return _time_vector(f.make_vector(n), s, r, 2)
        return run

    cases: dict[str, tuple[int, Callable[[float, int], list[float]]]] = {
        "pong/rlrun_1proc": (4, rlrun_single),
        "pong/gymnasium_wrappers_1proc": (4, gym_wrappers),
        "pong/ale_v5_defaults_1proc": (4, ale_defaults),
        "pong/rlrun_sync_x4": (4, rlrun_vector(4, "sync")),
        "pong/rlrun_async_x2": (4, rlrun_vector(2, "async")),
    }
    if have_envpool:
        cases["pong/envpool_x8"] = (4, envpool_vector(8))
        cases["pong/envpool_x16"] = (4, envpool_vector(16))
    cases["pong/ale_vector_x8"] = (4, ale_vector(8))
    cases["cartpole/1env"] = (1, cartpole(None))
    cases["cartpole/sync_x8"] = (1, cartpole(8))
    return cases


def interleaved_wrapper_ratio(rounds: int) -> dict[str, float]:
    """rlrun's wrappers against gymnasium's on one Pong copy, timed alternately (benchmarks.common.interleaved_ratio)
    so that load from other work hits both alike: the median per-round ratio of seconds per agent step."""
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    f = _atari_factory()
    ours = f.make()
    ref = FrameStackObservation(AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0),
                                                   noop_max=30, frame_skip=4, screen_size=84), 4)
    acts = np.random.default_rng(0).integers(0, 6, 1 << 16)

    def stepper(env: Any) -> Callable[[], None]:
        env.reset(seed=0)
        k = 0

        def hundred_steps() -> None:
            nonlocal k
            for _ in range(100):
                _, _, terminated, truncated, _ = env.step(acts[k & 0xFFFF])
                k += 1
                if terminated or truncated:
                    env.reset()
        return hundred_steps

    t_ours, t_ref, ratio = interleaved_ratio(stepper(ours), stepper(ref), rounds=rounds, min_time_s=0.3)
    return {"rlrun_agent_steps_per_s": round(100 / t_ours, 1), "gymnasium_agent_steps_per_s": round(100 / t_ref, 1),
            "speedup_rlrun_over_gymnasium": round(1 / ratio, 3)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short blocks (a smoke run, not a measurement)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks per case (the median is reported)")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args(argv)
    seconds, repeats = (0.3, 1) if args.quick else (args.seconds, args.repeats)
    try:
        import envpool  # noqa: F401

        have_envpool = True
    except ImportError:
        have_envpool = False
    cases = _cases(have_envpool)
    wanted = [c for c in args.only.split(",") if c] or list(cases)
    figures: dict[str, Any] = {"seconds_per_block": seconds, "repeats": repeats, "envpool_installed": have_envpool,
                               "load_average_1min_before": round(os.getloadavg()[0], 2)}
    for name in wanted:
        frame_skip, run = cases[name]
        rates = run(seconds, repeats)
        steps = statistics.median(rates)
        figures[name] = {"agent_steps_per_s": round(steps, 1), "frames_per_s": round(steps * frame_skip, 1),
                         "frame_skip": frame_skip, "blocks": [round(x, 1) for x in rates]}
        print(f"{name:32s} {steps:10,.0f} agent steps/s {steps * frame_skip:10,.0f} frames/s", flush=True)
    single = figures.get("pong/rlrun_1proc", {}).get("agent_steps_per_s")
    reference = figures.get("pong/gymnasium_wrappers_1proc", {}).get("agent_steps_per_s")
    if single and reference:
        figures["ratio/rlrun_wrappers_vs_gymnasium_wrappers"] = round(single / reference, 3)
        interleaved = interleaved_wrapper_ratio(3 if args.quick else 7)
        figures["pong/wrappers_interleaved"] = interleaved
        figures["ratio/rlrun_wrappers_vs_gymnasium_wrappers_interleaved"] = interleaved["speedup_rlrun_over_gymnasium"]
        print(f"{'pong/wrappers_interleaved':32s} {interleaved}", flush=True)
    figures["load_average_1min_after"] = round(os.getloadavg()[0], 2)  # other work on the cores skews parallel lines
    command = "python -m benchmarks.env_speed " + " ".join(sys.argv[1:] if argv is None else argv)
    path = write_result("env_speed", figures, command.strip())
    print(f"wrote {path}")
    return figures


if __name__ == "__main__":
    main()
