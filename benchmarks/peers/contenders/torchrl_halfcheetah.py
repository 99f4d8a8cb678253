"""TorchRL's PPO on HalfCheetah with the settings of its own example, ``sota-implementations/ppo/ppo_mujoco.py``,
``utils_mujoco.py`` and ``config_mujoco.yaml`` (pytorch/rl at TORCHRL_EXAMPLE_COMMIT; the one MuJoCo PPO TorchRL
publishes): a ``GymEnv`` with ``VecNorm`` on the observation (decay 0.99999, eps 1e-2) clipped to ±10, ``RewardSum``,
``StepCounter``, ``DoubleToFloat``; a 64x64 tanh ``MLP`` policy (orthogonal init, gain 1) with a state-independent
scale (``AddStateIndependentNormalScale``, exp of a parameter from 0) into a ``TanhNormal`` ``ProbabilisticActor``;
a 64x64 tanh ``MLP`` critic (orthogonal init, gain 0.01); a ``Collector`` of 2,048-frame batches; ``GAE`` (gamma
0.99, lambda 0.95) recomputed every epoch; 10 epochs of 32 minibatches of 64 from a ``SamplerWithoutReplacement``
buffer; ``ClipPPOLoss`` (clip 0.2, l2 critic loss with coefficient 0.25, no entropy bonus, advantages normalised);
two Adam optimisers (lr 3e-4 as a tensor, eps 1e-5) grouped, the lr annealed linearly to 0 over every update.

Where these settings differ from the task's (CleanRL's, benchmarks/peers/mujoco_task.py ``SETTINGS``), the
difference is TorchRL's example's own: a critic coefficient of 0.25 (not 0.5), no clipping of the value loss, no
reward normalisation, no gradient-norm clipping, a tanh-squashed Gaussian (not a Gaussian whose samples the env
clips), the observation statistics a near-cumulative moving average (not Welford's running moments). GAE bootstraps
time-limit truncations from the value, as rlrun and SB3 do.

The example is a Hydra app that logs batch means to wandb and evaluates at the end; this runner builds the same
objects from TorchRL's library in the same order and runs the same loop (collect -> 10 x (GAE -> extend -> 32
updates) -> weights to the collector), without the logger, the timers, the per-update loss bookkeeping, the final
evaluation and the checkpoint, and prints each batch's finished episodes (raw returns, from ``RewardSum``) as the
peers benchmark reads them: ``{"episodes": [...], "env_steps": N}`` once per batch, after it is collected. The
example seeds nothing; here torch and the env are seeded with ``--seed``. One torch thread. Runs in the torchrl venv
(mujoco installed there, the same engine version as rlrun's)."""

from __future__ import annotations

import argparse
import json

TORCHRL_EXAMPLE_COMMIT = "ae9719f17"  # pytorch/rl main, 2026-08-22 (sota-implementations/ppo)
# config_mujoco.yaml (total_frames is the task's budget, given with --budget-env-steps).
SETTINGS = {"frames_per_batch": 2048, "lr": 3e-4, "anneal_lr": True, "gamma": 0.99, "mini_batch_size": 64,
            "ppo_epochs": 10, "gae_lambda": 0.95, "clip_epsilon": 0.2, "critic_coeff": 0.25, "entropy_coeff": 0.0,
            "loss_critic_type": "l2", "num_cells": (64, 64), "vecnorm_decay": 0.99999, "vecnorm_eps": 1e-2,
            "obs_clip": 10.0}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=1_000_000)
    p.add_argument("--env-id", default="HalfCheetah-v5")
    args = p.parse_args()
    import torch
    from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
    from torchrl.envs import (
        ClipTransform,
        DoubleToFloat,
        ExplorationType,
        RewardSum,
        StepCounter,
        TransformedEnv,
        VecNorm,
    )
    from torchrl.envs.libs.gym import GymEnv
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss, group_optimizers
    from torchrl.objectives.value.advantages import GAE

    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("high")  # as the example (no effect on a CPU)
    torch.manual_seed(args.seed)
    s = SETTINGS
    device = torch.device("cpu")

    def make_env() -> TransformedEnv:  # utils_mujoco.make_env -> _add_ppo_transforms
        env = TransformedEnv(GymEnv(args.env_id, device=device, from_pixels=False, pixels_only=False))
        env.append_transform(VecNorm(in_keys=["observation"], decay=s["vecnorm_decay"], eps=s["vecnorm_eps"]))
        env.append_transform(ClipTransform(in_keys=["observation"], low=-s["obs_clip"], high=s["obs_clip"]))
        env.append_transform(RewardSum())
        env.append_transform(StepCounter(max_steps=None))
        if env.observation_spec["observation"].dtype is torch.float64:
            env.append_transform(DoubleToFloat(in_keys=["observation"]))
        return env

    proof = make_env()  # utils_mujoco.make_ppo_models -> make_ppo_models_state
    in_features = proof.observation_spec["observation"].shape[-1]
    action_spec = proof.action_spec_unbatched
    policy_mlp = MLP(in_features=in_features, activation_class=torch.nn.Tanh, out_features=action_spec.shape[-1],
                     num_cells=list(s["num_cells"]), device=device)
    for layer in policy_mlp.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.orthogonal_(layer.weight, 1.0)
            layer.bias.data.zero_()
    policy_mlp = torch.nn.Sequential(policy_mlp, AddStateIndependentNormalScale(action_spec.shape[-1],
                                                                                scale_lb=1e-8).to(device))
    actor = ProbabilisticActor(
        TensorDictModule(module=policy_mlp, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"], spec=proof.full_action_spec_unbatched.to(device), distribution_class=TanhNormal,
        distribution_kwargs={"low": action_spec.space.low.to(device), "high": action_spec.space.high.to(device),
                             "tanh_loc": False},
        return_log_prob=True, default_interaction_type=ExplorationType.RANDOM)
    value_mlp = MLP(in_features=in_features, activation_class=torch.nn.Tanh, out_features=1,
                    num_cells=list(s["num_cells"]), device=device)
    for layer in value_mlp.modules():
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.orthogonal_(layer.weight, 0.01)
            layer.bias.data.zero_()
    critic = ValueOperator(value_mlp, in_keys=["observation"])
    proof.close()

    train_env = make_env()
    train_env.set_seed(args.seed)
    collector = Collector(create_env_fn=train_env, policy=actor, frames_per_batch=s["frames_per_batch"],
                          total_frames=args.budget_env_steps, device=device, max_frames_per_traj=-1,
                          compile_policy=False, cudagraph_policy=False)
    data_buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(s["frames_per_batch"], compilable=False,
                                                                   device=device),
                                         sampler=SamplerWithoutReplacement(), batch_size=s["mini_batch_size"],
                                         compilable=False)
    adv_module = GAE(gamma=s["gamma"], lmbda=s["gae_lambda"], value_network=critic, average_gae=False, device=device,
                     vectorized=True)
    loss_module = ClipPPOLoss(actor_network=actor, critic_network=critic, clip_epsilon=s["clip_epsilon"],
                              loss_critic_type=s["loss_critic_type"], entropy_coeff=s["entropy_coeff"],
                              critic_coeff=s["critic_coeff"], normalize_advantage=True)
    actor_optim = torch.optim.Adam(actor.parameters(), lr=torch.tensor(s["lr"], device=device), eps=1e-5)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=torch.tensor(s["lr"], device=device), eps=1e-5)
    optim = group_optimizers(actor_optim, critic_optim)
    num_mini_batches = s["frames_per_batch"] // s["mini_batch_size"]
    total_network_updates = (args.budget_env_steps // s["frames_per_batch"]) * s["ppo_epochs"] * num_mini_batches
    lr = torch.tensor(s["lr"], device=device)

    def update(batch, num_network_updates):  # the example's update(), its loss dict not kept
        optim.zero_grad(set_to_none=True)
        alpha = torch.ones((), device=device)
        if s["anneal_lr"] and total_network_updates > 0:
            alpha = (1 - (num_network_updates / total_network_updates)).clamp_min(0.0)
            for group in optim.param_groups:
                group["lr"] = lr * alpha
        num_network_updates = num_network_updates + 1
        loss = loss_module(batch)
        total_loss = loss["loss_critic"] + loss["loss_objective"] + loss["loss_entropy"]
        total_loss.backward()
        optim.step()
        return num_network_updates

    num_network_updates = torch.zeros((), dtype=torch.int64, device=device)
    collected = 0
    for data in collector:
        collected += data.numel()
        done = data["next", "done"]
        returns = data["next", "episode_reward"][done]
        print(json.dumps({"episodes": [float(r) for r in returns.tolist()], "env_steps": collected}), flush=True)
        for _ in range(s["ppo_epochs"]):
            with torch.no_grad():
                data = adv_module(data)
            data_buffer.extend(data.reshape(-1))
            for batch in data_buffer:
                num_network_updates = update(batch, num_network_updates)
        collector.update_policy_weights_()
    collector.shutdown()


if __name__ == "__main__":
    main()
