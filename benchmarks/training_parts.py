"""What bounds rlrun's PPO training speed: its training step split into acting and the update, beside the same
parts done by hand, in one process, interleaved round by round.

The task is the peers benchmark's ``pong_training`` (benchmarks/peers/contenders/rlrun_pong.py: ``rlrun algo=ppo
env=pong``, the DeepMind protocol, 8 env copies in one local worker, rollouts of 128, the Nature-CNN actor-critic
with its shared torso, 4 epochs of 4 minibatches of 256). Per round:

(a) **rlrun's training step** (``plan.training_step()``: a rollout of T x 8 agent steps, the PPO update on it, the
    weights to the worker), with the update timed apart (``agent.update``); acting is the rest;
(b) **bare update**: the hand-written PPO update of benchmarks/learner_throughput.py (``ppo_pair``: the same
    network with the agent's weights, the same loss and optimizer settings, the convolutions in the layout rlrun's
    torso gives them) on a rollout of the same size: the value pass for GAE, then the minibatch steps;
(c) **raw env**: the same env copies (what ``executor.num_envs=8`` builds) stepped T times with random actions;
(d) **bare forward**: the hand-written network's forward at batch 8, T times, inference mode (what acting needs
    of the network: logits and value of the 8 copies' observations);
(e) **hand-written acting**: what a single-file script's rollout does with the parts of (c) and (d): T times, the
    bare network on the copies' observations, an action per copy drawn from its logits (``torch.multinomial``), the
    env copies stepped with them, the observations and actions kept in lists and stacked at the end.

(b) + (c) + (d) is the **ceiling**: a training step with no code of its own beside the env, the network and the
update, each timed apart (``ceiling/frames_per_s``); rlrun's step against it is ``fraction_of_ceiling``. Timed apart
they run with warm caches; a loop that alternates them pays more (each evicts the other's data: on Pong the Nature
CNN's 6.4 MB of weights and 8 emulators), so (b) + (e), ``hand_written/frames_per_s``, is what plain code reaches,
and rlrun's step against it is ``fraction_of_hand_written``. The process runs on one core (one torch thread, the env
copies in it), so frames/s is also frames per CPU-second. Each timed block is one call; medians over rounds. Given
a peers record with Sample Factory's ``pong_training`` frames per CPU-second (``--peers-record``; default: the
newest one in benchmarks/results), the three are set against it: ``ratio/ceiling_over_sample_factory`` says how
far "2x Sample Factory per core at equal settings" (issue #19) is within reach of any runner built on the same env
and torch kernels. That ratio compares two runs (the peers record's and this one), so both records name their
machine.

    python -m benchmarks.training_parts [--quick] [--rounds N] [--peers-record PATH] [--rollout-steps T]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import load_average, publish, results_dir
from benchmarks.records import flatten_figures, read_records

PONG_ROLLOUT_STEPS = 128  # the peers task's; a test runs the same path with fewer (--rollout-steps)


def overrides(rollout_steps: int | None = None) -> list[str]:
    """The run's overrides: benchmarks/peers/contenders/rlrun_pong.py's, training mode (the preset's 4 minibatches of
    256 at 128 steps; fewer steps give minibatches of a quarter of the rollout, as many as the preset's)."""
    t = rollout_steps or PONG_ROLLOUT_STEPS
    return ["algo=ppo", "env=pong", "seed=0", "executor=local", "executor.num_envs=8", f"algo.rollout_steps={t}",
            f"algo.minibatch_size={2 * t}", "device.precision=fp32", "logger=none"]


SF_KEY = "pong_training/sample_factory/frames_per_cpu_s"


def sample_factory_per_cpu_s(path: Path | None) -> tuple[float, str] | None:
    """Sample Factory's Pong training frames per CPU-second from a peers result file (a record or a suite file; the
    newest one holding it when ``path`` is None, files that are not results skipped): ``(value, file name)``, or
    None when there is none."""
    candidates = [path] if path is not None else sorted(results_dir().glob("*-peers*.json"), reverse=True)
    for candidate in candidates:
        try:
            records = read_records(candidate)
        except ValueError:  # SchemaError, or not JSON
            if path is not None:
                raise
            continue
        for record in records:
            value = flatten_figures(record["figures"]).get(SF_KEY)
            if isinstance(value, (int, float)):
                return float(value), Path(candidate).name
    return None


class Parts:
    """rlrun's plan for the task and the hand-written parts beside it, each timed per call."""

    def __init__(self, rollout_steps: int | None = None) -> None:
        from omegaconf import OmegaConf

        from benchmarks.learner_throughput import bare_actor_critic, ppo_pair
        from benchmarks.peers.contenders.rlrun_plan import build_plan
        from rlrun import spaces as sp

        # build_plan applies the device strategy: one torch thread, reused CPU memory
        self.plan, self.env_factory, cfg = build_plan(overrides(rollout_steps), "ppo", 0)
        agent, spec = self.plan.agent, self.env_factory.spec
        algo = OmegaConf.to_object(cfg.algo)
        self.T, self.B = int(algo.rollout_steps), int(cfg.executor.num_envs)
        self.frames = self.T * self.B * int(spec.frame_skip)
        self.update_s = 0.0
        update = agent.update

        def timed_update(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return update(*args, **kwargs)
            finally:
                self.update_s += time.perf_counter() - start

        agent.update = timed_update  # this instance only: the plan's training step calls it
        n = int(spec.action_space.n)
        self.bare_update = ppo_pair(agent, algo, spec, self.T, self.B).bare
        self.net = bare_actor_critic(agent.network, spec.observation_space, n)
        rng = np.random.default_rng(0)
        self.obs_in = sp.to_torch(spec.observation_space, sp.sample(spec.observation_space, (self.B,), seed=0))
        self.env = self.env_factory.make_vector(self.B)
        self.last_obs = self.env.reset(seed=0)[0]
        self.actions = rng.integers(0, n, (self.T, self.B))
        self.plan.training_step()  # the first step is start-up (the workers' first reset, first-call costs)
        self.bare_update()
        self.forward()
        self.hand_written()

    def step(self) -> tuple[float, float]:
        """(training step s, of which update s)."""
        self.update_s = 0.0
        start = time.perf_counter()
        self.plan.training_step()
        return time.perf_counter() - start, self.update_s

    @staticmethod
    def timed(fn: Any) -> float:
        """Seconds of one call of ``fn``."""
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def raw_env(self) -> None:
        for a in self.actions:
            self.env.step(a)

    def forward(self) -> None:
        with torch.inference_mode():
            for _ in range(self.T):
                self.net(self.obs_in)

    def hand_written(self) -> None:
        """(e): env and network alternating, as a single-file script's rollout."""
        obs, actions = [], []
        with torch.inference_mode():
            o = self.last_obs
            for _ in range(self.T):
                logits, _ = self.net(torch.from_numpy(o))
                a = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(1).numpy()
                obs.append(o)
                actions.append(a)
                o = self.env.step(a)[0]
            self.last_obs = o
        self.rollout = (np.stack(obs), np.stack(actions))  # the arrays a script hands its update

    def close(self) -> None:
        self.env.close()
        self.plan.stop()


def measure(rounds: int, rollout_steps: int | None = None) -> dict[str, Any]:
    parts = Parts(rollout_steps)
    rows: dict[str, list[float]] = {k: [] for k in ("step", "update", "acting", "bare_update", "raw_env",
                                                    "bare_forward", "hand_written_acting")}
    try:
        for r in range(rounds):
            order = ["rlrun", "bare_update", "raw_env", "bare_forward", "hand_written_acting"]
            for name in order[r % len(order):] + order[:r % len(order)]:  # rotated so drift hits all alike
                if name == "rlrun":
                    step, update = parts.step()
                    rows["step"].append(step)
                    rows["update"].append(update)
                    rows["acting"].append(step - update)
                elif name == "bare_update":
                    rows["bare_update"].append(parts.timed(parts.bare_update))
                elif name == "raw_env":
                    rows["raw_env"].append(parts.timed(parts.raw_env))
                elif name == "hand_written_acting":
                    rows["hand_written_acting"].append(parts.timed(parts.hand_written))
                else:
                    rows["bare_forward"].append(parts.timed(parts.forward))
    finally:
        parts.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    ceiling_s = med["bare_update"] + med["raw_env"] + med["bare_forward"]
    figures: dict[str, Any] = {"frames_per_step": parts.frames, "rollout_steps": parts.T, "rounds": rounds}
    for k, v in med.items():
        key = {"step": "rlrun/step_s", "update": "rlrun/update_s", "acting": "rlrun/acting_s"}.get(k, f"parts/{k}_s")
        figures[key] = round(v, 4)
        figures[f"{key}/rounds"] = [round(x, 4) for x in rows[k]]
    figures["rlrun/frames_per_s"] = round(parts.frames / med["step"], 1)
    figures["ceiling/step_s"] = round(ceiling_s, 4)
    figures["ceiling/frames_per_s"] = round(parts.frames / ceiling_s, 1)
    figures["fraction_of_ceiling"] = round(ceiling_s / med["step"], 4)
    hand_s = med["bare_update"] + med["hand_written_acting"]
    figures["hand_written/step_s"] = round(hand_s, 4)
    figures["hand_written/frames_per_s"] = round(parts.frames / hand_s, 1)
    figures["fraction_of_hand_written"] = round(hand_s / med["step"], 4)
    figures["ratio/acting/hand_written_over_rlrun"] = round(med["hand_written_acting"] / med["acting"], 4)
    figures["ratio/update/bare_over_rlrun"] = round(med["bare_update"] / med["update"], 4)  # > 1: rlrun's faster
    figures["ratio/acting/parts_over_rlrun"] = round((med["raw_env"] + med["bare_forward"]) / med["acting"], 4)
    figures["share/update"] = round(med["update"] / med["step"], 4)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds (CI / tests)")
    parser.add_argument("--rounds", type=int, help="rounds of (a)-(e) (default 8; --quick 2)")
    parser.add_argument("--rollout-steps", type=int,
                        help=f"agent steps per copy per training step (default: the task's, {PONG_ROLLOUT_STEPS}; "
                             f"the Sample Factory ratios only at that default)")
    parser.add_argument("--peers-record", type=Path, help="a peers record with Sample Factory's Pong training "
                                                          "frames per CPU-second (default: the newest one)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 8)
    if rounds < 1:
        parser.error(f"--rounds must be >= 1, got {rounds}")
    if args.rollout_steps is not None and args.rollout_steps < 2:
        parser.error(f"--rollout-steps must be >= 2, got {args.rollout_steps}")
    if args.peers_record is not None and not args.peers_record.is_file():
        parser.error(f"--peers-record {args.peers_record}: no such file")
    before = load_average()
    figures = measure(rounds, args.rollout_steps)
    at_task = args.rollout_steps in (None, PONG_ROLLOUT_STEPS)
    sf = sample_factory_per_cpu_s(args.peers_record) if at_task else None
    if sf is not None:
        value, source = sf
        figures["sample_factory/frames_per_cpu_s"] = value
        figures["sample_factory/source"] = source
        figures["ratio/ceiling_over_sample_factory"] = round(figures["ceiling/frames_per_s"] / value, 4)
        figures["ratio/rlrun_over_sample_factory"] = round(figures["rlrun/frames_per_s"] / value, 4)
        figures["ratio/hand_written_over_sample_factory"] = round(figures["hand_written/frames_per_s"] / value, 4)
    figures["load_average/before"] = before  # the record's own load_average is the one at its end
    command = "python -m benchmarks.training_parts" + (" --quick" if args.quick else "") + (
        f" --rounds {args.rounds}" if args.rounds else "") + (
        f" --rollout-steps {args.rollout_steps}" if args.rollout_steps else "")
    publish("training_parts", figures, command)


if __name__ == "__main__":
    main()
