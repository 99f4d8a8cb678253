"""RLlib (new API stack, Ray 2.60) on CartPole-v1 with the settings of its own tuned example
(rllib/tuned_examples/ppo/cartpole_ppo.py: lr 3e-4, 6 epochs, vf_loss_coeff 0.01, one hidden layer of 32, linear,
shared value layers; dqn: tuned_examples/dqn/cartpole_dqn.py, whose stop reward is 450 too; the tuned examples'
evaluation runners are left out: training returns are judged, as for every contender), on a local Ray instance of
2 CPUs. RLlib reports a smoothed mean only: ``metrics_num_episodes_for_smoothing=20`` makes it the same 20-episode
window. Runs in the rllib venv."""

from __future__ import annotations

import argparse
import json


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--algo", default="ppo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-env-steps", type=int, default=200_000)
    args = p.parse_args()
    import ray
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False)
    if args.algo == "ppo":
        from ray.rllib.algorithms.ppo import PPOConfig

        config = (PPOConfig().environment("CartPole-v1")
                  .training(gamma=0.99, lr=0.0003, num_epochs=6, vf_loss_coeff=0.01, use_kl_loss=True)
                  .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[32], fcnet_activation="linear",
                                                             vf_share_layers=True)))
    else:
        from ray.rllib.algorithms.dqn import DQNConfig

        config = (DQNConfig().environment("CartPole-v1")
                  .training(lr=0.0005, train_batch_size_per_learner=32,
                            replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000,
                                                  "alpha": 0.6, "beta": 0.4},
                            n_step=(2, 5), double_q=True, dueling=True, epsilon=[(0, 1.0), (10000, 0.02)])
                  .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[256], fcnet_activation="tanh",
                                                             fcnet_bias_initializer="zeros_",
                                                             head_fcnet_bias_initializer="zeros_",
                                                             head_fcnet_hiddens=[256])))
    config = config.debugging(seed=args.seed).reporting(metrics_num_episodes_for_smoothing=20)
    algo = config.build_algo()
    steps = 0
    try:
        while steps < args.budget_env_steps:
            result = algo.train()
            steps = int(result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0)
                        or result.get("num_env_steps_sampled_lifetime", 0))
            mean = result.get("env_runners", {}).get("episode_return_mean")
            if mean is not None:
                print(json.dumps({"mean": float(mean), "env_steps": steps}), flush=True)
    finally:
        algo.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
