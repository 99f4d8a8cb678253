"""The GPU kit: one command that proves rlrun on a CUDA machine within minutes (``python -m benchmarks.gpu``).

- :mod:`benchmarks.gpu.kit`: the stages, in priority order, each with its time budget and its result files;
- :mod:`benchmarks.gpu.pong`: the last stage, Pong learning for the rest of the budget;
- :mod:`benchmarks.gpu.wheels`: the wheel folder that carries what the GPU machine lacks (``wheels.txt``);
- ``device_run.sh``: the one command given to the GPU machine.

``docs/gpu.md`` is the user's page: what runs, what comes back, the figures once measured.
"""
