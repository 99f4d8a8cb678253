"""Runner scripts of the peers benchmark, one per contender and task, each run in its contender's own venv (so each
imports only its own library) with one torch thread (the benchmark also sets ``OMP_NUM_THREADS=1``). Each prints
JSON lines on stdout, flushed, as its contender reports; the benchmark times each line as it arrives:

- ``<contender>_halfcheetah.py``: ``{"episodes": [return, ...], "env_steps": N}``, the episodes that ended since the
  last line and the env steps so far (benchmarks/peers/mujoco_task.py; ``rlrun_td3_halfcheetah.py``: the same
  lines for benchmarks/peers/td3_task.py);
- ``<contender>_pong.py``: ``{"agent_steps": N, "seconds": S, "frame_skip": 4}`` (benchmarks/peers/pong_tasks.py).
"""
