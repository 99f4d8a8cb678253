"""Runner scripts of the peers benchmark, one per contender, each run in its contender's own venv (so each imports
only its own library). Every one prints JSON lines on stdout, flushed, as its contender reports:

- ``{"episodes": [return, ...], "env_steps": N}``: episodes that ended since the last line, and the env steps so
  far; the benchmark times each line as it arrives and stops the contender once the 20-episode mean reaches the
  threshold (or ``--budget-env-steps`` runs out).
- ``{"mean": R, "env_steps": N}``: a contender that only reports a smoothed mean (RLlib's, over its own 20-episode
  window).

They take ``--algo ppo|dqn --seed S --budget-env-steps N`` and use one torch thread (the benchmark also sets
``OMP_NUM_THREADS=1``).
"""
