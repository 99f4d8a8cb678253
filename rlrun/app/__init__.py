"""The command-line layer: what ``rlrun`` and ``rlrun-plot`` run. ``cli`` (the entry point: Hydra composition, the
subcommands, exit codes), ``run`` (one experiment: build, train, checkpoint, log), ``sweep`` (``rlrun -m``: the
sweep callback, per-job status, resume), ``periodic_eval`` (evaluation during training), ``evaluate`` (``rlrun
eval``), ``graph`` (``rlrun graph``: the component graph) and ``plot`` (``rlrun-plot``). Everything below this
package (components, executors, algorithms, checkpoints, loggers, the Python API) works without it."""
