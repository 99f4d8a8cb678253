"""rlrun on Pong (``rlrun algo=ppo env=pong``: the DeepMind protocol, 8 env copies in one local worker, the
Nature-CNN actor-critic and PPO settings of its Atari preset, conf/algo_env/ppo_atari.yaml).

``--mode acting``: no learning; the plan's own worker set samples rollouts of 128 agent steps per copy, as its
training step does, with the untrained network. ``--mode training``: the plan's ``training_step`` (a rollout, then
PPO's 4 epochs of 4 minibatches on it, then the weights to the workers), learning included, as ``rlrun algo=ppo
env=pong`` runs it. Prints one JSON line per rollout / update, ``benchmarks/peers/pong_tasks.py``'s protocol. Runs
in rlrun's venv."""

from __future__ import annotations

import argparse


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("acting", "training"), default="acting")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=20.0, help="acting / training time after the first rollout")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--rollout-steps", type=int, default=128)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="device.precision")
    args = p.parse_args()
    import json
    import time

    from benchmarks.peers.contenders.rlrun_plan import build_plan

    plan, env_factory, _ = build_plan(["algo=ppo", "env=pong", f"seed={args.seed}", "executor=local",
                                       f"executor.num_envs={args.num_envs}", f"algo.rollout_steps={args.rollout_steps}",
                                       f"device.precision={args.precision}", "logger=none"], "ppo", args.seed)

    def one_round() -> int:
        """Agent steps of one rollout (acting) or one training step (a rollout and the update on it)."""
        if args.mode == "training":
            return plan.training_step().env_steps
        return sum(batch.env_steps for batch in plan.workers.sample(args.rollout_steps))

    try:
        steps, start, seconds = 0, None, 0.0
        while start is None or seconds < args.seconds:  # ends on the line that reports >= --seconds
            steps += one_round()
            if start is None:  # the first round is start-up (its time is the harness's start-up figure)
                start, steps = time.perf_counter(), 0
            seconds = time.perf_counter() - start
            print(json.dumps({"agent_steps": steps, "seconds": seconds,
                              "frame_skip": env_factory.spec.frame_skip}), flush=True)
    finally:
        plan.stop()


if __name__ == "__main__":
    main()
