"""TorchRL's DQN on CartPole-v1 with the settings of its own example, ``sota-implementations/dqn/dqn_cartpole.py``
and ``config_cartpole.yaml`` (pytorch/rl at TORCHRL_EXAMPLE_COMMIT): its Q-network (``MLP`` 120-84, ReLU, in a
``QValueActor``), ``EGreedyModule`` annealed from 1.0 to 0.05 over 250k frames, a ``Collector`` of 1,000-frame
batches after 10k random frames, a 10k ``LazyTensorStorage`` replay buffer sampled in batches of 128, 100
``DQNLoss`` (l2, delayed target) Adam steps (lr 2.5e-4) per batch, ``HardUpdate`` every 50 steps, gamma 0.99,
500,100 frames in all. Runs in the torchrl venv.

The example is a Hydra app that logs only batch means to wandb/csv (no episode returns on stdout) and evaluates
and checkpoints on the way; this runner builds the same objects from TorchRL's library in the same order and runs
the same loop (collect -> extend -> epsilon step -> 100 updates -> weights to the collector), without the logging,
evaluation and checkpoint calls, and prints each batch's finished episodes as the peers benchmark reads them. The
example seeds nothing; here torch and the collector's env are seeded with ``--seed``. No TorchRL CartPole PPO
example exists, so TorchRL is a contender of ``cartpole_dqn`` only.
"""

from __future__ import annotations

import argparse
import json

TORCHRL_EXAMPLE_COMMIT = "ae9719f17"  # pytorch/rl main, 2026-08-22 (sota-implementations/dqn)
SETTINGS = {"total_frames": 500_100, "frames_per_batch": 1000, "eps_start": 1.0, "eps_end": 0.05,
            "annealing_frames": 250_000, "init_random_frames": 10_000, "buffer_size": 10_000, "batch_size": 128,
            "lr": 2.5e-4, "gamma": 0.99, "hard_update_freq": 50, "num_updates": 100, "num_cells": (120, 84)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="dqn", choices=["dqn"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=0, help="ignored: the example's total_frames is the budget")
    args = p.parse_args()
    import torch
    from tensordict.nn import TensorDictSequential
    from torchrl.collectors import Collector
    from torchrl.data import Composite, LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.envs import RewardSum, StepCounter, TransformedEnv
    from torchrl.envs.libs.gym import GymEnv
    from torchrl.modules import MLP, EGreedyModule, QValueActor
    from torchrl.objectives import DQNLoss, HardUpdate

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    s = SETTINGS

    def make_env() -> TransformedEnv:  # utils_cartpole.make_env
        env = TransformedEnv(GymEnv("CartPole-v1", device="cpu"))
        env.append_transform(RewardSum())
        env.append_transform(StepCounter())
        return env

    proof = make_env()  # utils_cartpole.make_dqn_model
    action_spec = proof.specs["input_spec", "full_action_spec", "action"]
    mlp = MLP(in_features=proof.observation_spec["observation"].shape[-1], activation_class=torch.nn.ReLU,
              out_features=action_spec.space.n, num_cells=list(s["num_cells"]), device="cpu")
    model = QValueActor(module=mlp, spec=Composite(action=action_spec), in_keys=["observation"])
    del proof
    greedy = EGreedyModule(annealing_num_steps=s["annealing_frames"], eps_init=s["eps_start"], eps_end=s["eps_end"],
                           spec=model.spec, device="cpu")
    model_explore = TensorDictSequential(model, greedy)
    replay = TensorDictReplayBuffer(pin_memory=False, storage=LazyTensorStorage(max_size=s["buffer_size"]),
                                    batch_size=s["batch_size"])
    loss_module = DQNLoss(value_network=model, loss_function="l2", delay_value=True)
    loss_module.make_value_estimator(gamma=s["gamma"], device="cpu")
    target_updater = HardUpdate(loss_module, value_network_update_interval=s["hard_update_freq"])
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=s["lr"])

    def update(sampled):  # the example's update()
        q_loss = loss_module(sampled)["loss"]
        optimizer.zero_grad()
        q_loss.backward()
        optimizer.step()
        target_updater.step()
        return q_loss.detach()

    env = make_env()
    env.set_seed(args.seed)
    collector = Collector(create_env_fn=env, policy=model_explore, frames_per_batch=s["frames_per_batch"],
                          total_frames=s["total_frames"], device="cpu", storing_device="cpu", max_frames_per_traj=-1,
                          init_random_frames=s["init_random_frames"])
    collected = 0
    for data in collector:
        data = data.reshape(-1)
        replay.extend(data)
        collected += data.numel()
        greedy.step(data.numel())
        done = data["next", "done"]
        returns = data["next", "episode_reward"][done]
        if len(returns):
            print(json.dumps({"episodes": [float(r) for r in returns.tolist()], "env_steps": collected}), flush=True)
        if collected < s["init_random_frames"]:
            continue
        for _ in range(s["num_updates"]):
            update(replay.sample(s["batch_size"]))
        collector.update_policy_weights_()
    collector.shutdown()


if __name__ == "__main__":
    main()
