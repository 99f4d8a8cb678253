"""Time to threshold: CartPole-v1 to a mean return of 450 (the figure the peers were measured at, MEASURED.md) and
475 (CartPole's "solved"), over the last 20 episodes, for every rlrun algorithm in ``ALGOS`` that exists, and with
the benchmarks' ``peers`` extra installed, Stable-Baselines3 on the same task in the same invocation (RLlib too
when it can be imported). Seeds interleaved across contenders (seed 0 of each, then seed 1, ...), so machine noise
hits all alike; medians over seeds.

Per contender and threshold: ``time_s/<who>/<threshold>`` (median wall seconds from building the env and the
agent to the first iteration at which the 20-episode mean reached it), ``env_steps/<who>/<threshold>`` (median env
steps then), ``fraction_reached/<who>/<threshold>`` (the share of seeds that reached it within the budget; the
medians are null when fewer than half did), and the per-seed values. With peers:
``ratio/time_to_<threshold>/<peer>_over_<who>`` = peer's median time / rlrun's (> 1: rlrun is faster), a ratio of
two times measured in the same run. Only the ``fraction_reached`` and ``ratio`` figures are compared with a
baseline in CI.

rlrun runs are built by the registry from the config ``rlrun algo=<algo> env=cartpole logger=none`` composes, and
stepped with ``algo.training_step()`` and ``rlrun.app.run.RunLoop`` (what ``run_experiment`` does, without checkpoints,
export and loggers) so that the iteration at which each threshold is first crossed is known exactly. The peers use
their tuned CartPole settings (rl-baselines3-zoo's ``hyperparams/ppo.yml`` and ``dqn.yml``, trained for the zoo's
``n_timesteps`` so its linear schedules are the zoo's), one torch thread like rlrun, on ``cpu``.

A run is judged by its env-step budget (``--budget-env-steps``; the peers: the zoo's ``n_timesteps``), not by wall
time, so ``fraction_reached`` does not depend on how loaded the machine is (the per-seed runs are deterministic on
the CPU); ``--budget-s`` is only a safety cap. CI (``--quick``) runs seed 0 of each algorithm.

    python -m benchmarks.time_to_threshold [--quick] [--seeds 0,1,2] [--algos dqn,ppo] [--peers auto|on|off]
        [--variant 'NAME:override override ...' ...]

``--variant`` adds, per algorithm, a contender ``rlrun_<algo>:<NAME>`` run with those config overrides on top (how
a preset's settings are chosen: e.g. ``--variant 'copies_10_epochs:env.vectorization=copies algo.num_epochs=10'``
beside the preset itself). ``time_s_mean/<who>/<threshold>`` is the mean over seeds when every seed reached it.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import re
import statistics
import sys
import time
from typing import Any, Callable

from benchmarks.common import load_average, write_result
from benchmarks.peers.contenders.sb3_cartpole import SETTINGS as SB3_SETTINGS
from benchmarks.peers.contenders.sb3_cartpole import zoo_settings

ALGOS = ("dqn", "ppo")  # rlrun algorithms measured (when registered)
THRESHOLDS = (450.0, 475.0)
WINDOW = 20  # episodes in the mean (rlrun's return_window default)


class Crossings:
    """Records, for each threshold, when the mean of the last ``WINDOW`` episode returns first reached it."""

    def __init__(self, thresholds: tuple[float, ...], start: float) -> None:
        self.thresholds, self.start = thresholds, start
        self.returns: list[float] = []
        self.reached: dict[float, tuple[float, int]] = {}

    def add(self, returns: list[float], env_steps: int) -> None:
        self.returns.extend(returns)
        del self.returns[:-WINDOW]
        if len(self.returns) < WINDOW:
            return
        mean = sum(self.returns) / WINDOW
        for thr in self.thresholds:
            if thr not in self.reached and mean >= thr:
                self.reached[thr] = (time.perf_counter() - self.start, env_steps)

    @property
    def done(self) -> bool:
        return len(self.reached) == len(self.thresholds)


# The env-copy count each algorithm was tuned with where no preset sets it (A2C: 8 copies, its docs; PPO's
# conf/algo_env/ppo_cartpole.yaml sets 8; DQN the default 1).
ALGO_OVERRIDES: dict[str, list[str]] = {"a2c": ["executor.num_envs=8"]}

def rlrun_run(algo: str, seed: int, thresholds: tuple[float, ...], budget_steps: int, budget_s: float,
              extra: tuple[str, ...] = ()) -> Crossings:
    from omegaconf import OmegaConf

    from rlrun.app.run import RunLoop, seed_everything
    from rlrun.config import compose
    from rlrun.devices import resolve_device
    from rlrun.registry import registry

    cfg = compose([f"algo={algo}", "env=cartpole", f"seed={seed}", f"stop.env_steps={budget_steps}",
                   "stop.episode_return_mean=null", f"return_window={WINDOW}", "logger=none",
                   *ALGO_OVERRIDES.get(algo, []), *extra])
    start = time.perf_counter()
    seed_everything(seed)
    device = resolve_device(cfg.device)
    env_factory = registry.build("env", cfg.env.name, cfg.env)
    executor = registry.build("executor", cfg.executor.name, cfg.executor, env_factory, seed)
    plan = registry.get("algo", algo)(OmegaConf.to_object(cfg.algo), env_factory.spec, executor, device, seed)
    loop = RunLoop(cfg, env_factory.spec.frame_skip)
    crossings = Crossings(thresholds, start)
    try:
        while not crossings.done and loop.env_steps < budget_steps and time.perf_counter() - start < budget_s:
            result = plan.training_step()
            loop.add(result)
            crossings.add(result.episode_returns, loop.env_steps)
    finally:
        plan.stop()
    return crossings


# ------------------------------------------------------------------------------------------------ peers

# Stable-Baselines3's settings (SB3_SETTINGS, resolved by zoo_settings): rl-baselines3-zoo's CartPole ones, shared
# with the peers benchmark's SB3 contender, which runs them in SB3's own venv.


def sb3_run(algo: str, seed: int, thresholds: tuple[float, ...], budget_s: float) -> Crossings:
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    n_envs, total, settings = zoo_settings(algo)
    start = time.perf_counter()
    crossings = Crossings(thresholds, start)

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            returns = [float(i["episode"]["r"]) for i in self.locals["infos"] if "episode" in i]
            if returns:
                crossings.add(returns, self.num_timesteps)
            return not crossings.done and time.perf_counter() - start < budget_s

    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
    model = getattr(sb3, algo.upper())("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **settings)
    try:
        model.learn(total_timesteps=total, callback=Watch())
    finally:
        env.close()
    return crossings


def rllib_run(algo: str, seed: int, thresholds: tuple[float, ...], budget_s: float) -> Crossings:
    """RLlib PPO with its defaults on a local Ray instance, its own 20-episode smoothing. Not exercised on the
    machine this was written on (``ray.rllib`` cannot be imported there: ``ray[rllib]`` pins an older gymnasium)."""
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False)
    start = time.perf_counter()
    crossings = Crossings(thresholds, start)
    try:
        config = (PPOConfig().environment("CartPole-v1").debugging(seed=seed)
                  .reporting(metrics_num_episodes_for_smoothing=WINDOW))
        trainer = config.build_algo() if hasattr(config, "build_algo") else config.build()
        while not crossings.done and time.perf_counter() - start < budget_s:
            result = trainer.train()
            runners = result.get("env_runners", {})
            mean = runners.get("episode_return_mean")
            steps = int(result.get("num_env_steps_sampled_lifetime", 0))
            if mean is not None:  # RLlib reports the smoothed mean only, so feed it as a full window
                crossings.add([float(mean)] * WINDOW, steps)
        trainer.stop()
    finally:
        ray.shutdown()
    return crossings


def peers(mode: str) -> tuple[dict[str, Callable[[int, tuple[float, ...], float], Crossings]], dict[str, str]]:
    """The peer contenders to run and, for the others, why not."""
    runs: dict[str, Callable[[int, tuple[float, ...], float], Crossings]] = {}
    skipped: dict[str, str] = {}
    if mode == "off":
        return runs, {"peers": "--peers off"}
    if importlib.util.find_spec("stable_baselines3") is not None:
        for algo in SB3_SETTINGS:
            runs[f"sb3_{algo}"] = functools.partial(sb3_run, algo)
    else:
        skipped["sb3"] = "stable-baselines3 is not installed (pip install -e './benchmarks[peers]')"
    try:
        importable = importlib.util.find_spec("ray.rllib.algorithms.ppo") is not None
    except Exception as e:  # noqa: BLE001 - ray.rllib raises ImportError from its __init__ without its extras
        importable, why = False, f"ray.rllib cannot be imported: {' '.join(str(e).split())[:200]}"
    else:
        why = "ray.rllib is not installed"
    if importable:
        runs["rllib_ppo"] = functools.partial(rllib_run, "ppo")
    else:
        skipped["rllib"] = why
    if mode == "on" and not runs:
        raise SystemExit(f"--peers on, but no peer can run: {skipped}")
    return runs, skipped


# ------------------------------------------------------------------------------------------------ figures


def _median_or_none(values: list[float | None]) -> float | None:
    """The median counting a miss as +inf; None when that median is a miss (fewer than half reached)."""
    m = statistics.median([math.inf if v is None else v for v in values])
    return None if math.isinf(m) else m


def summarize(results: dict[str, list[Crossings]], thresholds: tuple[float, ...]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for who, runs in results.items():
        for thr in thresholds:
            t = f"{thr:g}"
            times = [r.reached[thr][0] if thr in r.reached else None for r in runs]
            steps = [r.reached[thr][1] if thr in r.reached else None for r in runs]
            med_t, med_s = _median_or_none(times), _median_or_none(steps)
            figures[f"time_s/{who}/{t}"] = None if med_t is None else round(med_t, 2)
            figures[f"time_s_mean/{who}/{t}"] = (round(statistics.fmean(times), 3)  # type: ignore[arg-type]
                                                  if all(v is not None for v in times) else None)
            figures[f"env_steps/{who}/{t}"] = None if med_s is None else int(med_s)
            figures[f"fraction_reached/{who}/{t}"] = round(sum(v is not None for v in times) / len(runs), 4)
            figures[f"time_s/{who}/{t}/seeds"] = [None if v is None else round(v, 2) for v in times]
            figures[f"env_steps/{who}/{t}/seeds"] = steps
    ours = [w for w in results if w.startswith("rlrun_")]
    for peer in [w for w in results if not w.startswith("rlrun_")]:
        for who in ours:
            for thr in thresholds:
                t = f"{thr:g}"
                mine, theirs = figures[f"time_s/{who}/{t}"], figures[f"time_s/{peer}/{t}"]
                if mine and theirs:
                    figures[f"ratio/time_to_{t}/{peer}_over_{who}"] = round(theirs / mine, 4)
    return figures


def _rlrun_contender(algo: str, budget_steps: int, extra: tuple[str, ...] = ()
                     ) -> Callable[[int, tuple[float, ...], float], Crossings]:
    return lambda seed, thresholds, budget_s: rlrun_run(algo, seed, thresholds, budget_steps, budget_s, extra)


def parse_variant(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME:override override ...`` -> ``(NAME, overrides)``; SystemExit naming the form otherwise."""
    name, sep, rest = text.partition(":")
    overrides = tuple(rest.split())
    if not sep or not re.fullmatch(r"[\w.-]+", name) or not overrides or any("=" not in o for o in overrides):
        raise SystemExit(f"--variant {text!r}: write NAME:key=value [key=value ...] (NAME of letters, digits, _ . -: "
                         f"it names MLflow metrics)")
    return name, overrides


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="CI: seed 0 only, no peers")
    parser.add_argument("--seeds", help="comma-separated seeds (default 0,1,2; --quick 0)")
    parser.add_argument("--algos", default=",".join(ALGOS), help="rlrun algorithms (those registered are run)")
    parser.add_argument("--thresholds", default=",".join(f"{t:g}" for t in THRESHOLDS))
    parser.add_argument("--budget-env-steps", type=int, default=100_000,
                        help="rlrun's env-step budget per run (conf/config.yaml's default stop.env_steps)")
    parser.add_argument("--budget-s", type=float, default=600.0,
                        help="wall-clock safety cap per run, seconds: a run is judged by its env-step budget, so "
                             "that a loaded machine does not change fraction_reached")
    parser.add_argument("--peers", choices=("auto", "on", "off"), help="default: auto (off with --quick)")
    parser.add_argument("--variant", action="append", default=[], type=parse_variant, metavar="NAME:OVERRIDES",
                        help="also run each algorithm with these config overrides (space-separated) as "
                             "rlrun_<algo>:NAME; repeatable")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",") if s]
    thresholds = tuple(sorted(float(t) for t in args.thresholds.split(",") if t))
    budget_s = args.budget_s
    from rlrun.registry import registry

    registered = registry.names("algo")
    wanted = [a for a in args.algos.split(",") if a]
    contenders = {f"rlrun_{a}": _rlrun_contender(a, args.budget_env_steps) for a in wanted if a in registered}
    for name, extra in args.variant:
        contenders.update({f"rlrun_{a}:{name}": _rlrun_contender(a, args.budget_env_steps, extra)
                           for a in wanted if a in registered})
    figures: dict[str, Any] = {"seeds": seeds, "window_episodes": WINDOW, "budget_env_steps": args.budget_env_steps,
                               "budget_s_per_run": budget_s, "load_average_before": load_average(),
                               **{f"variant/{name}": " ".join(extra) for name, extra in args.variant}}
    for a in wanted:
        if a not in registered:
            figures[f"unavailable/rlrun_{a}"] = f"algo={a} does not exist yet; measured here once it is registered"
    peer_runs, skipped = peers(args.peers or ("off" if args.quick else "auto"))
    contenders.update(peer_runs)
    figures.update({f"unavailable/{k}": v for k, v in skipped.items()})
    results: dict[str, list[Crossings]] = {who: [] for who in contenders}
    start = time.perf_counter()
    for seed in seeds:
        for who, run in contenders.items():
            c = run(seed, thresholds, budget_s)
            results[who].append(c)
            reached = ", ".join(f"{thr:g} at {t:.1f} s / {s} steps" for thr, (t, s) in sorted(c.reached.items()))
            print(f"{who} seed {seed}: {reached or 'no threshold reached'}", flush=True)
    figures.update(summarize(results, thresholds))
    figures["wall_time_s"] = round(time.perf_counter() - start, 1)
    figures["load_average_after"] = load_average()
    command = "python -m benchmarks.time_to_threshold " + " ".join(sys.argv[1:] if argv is None else argv)
    path = write_result("time_to_threshold", figures, command.strip())
    print(f"wrote {path}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
