"""Every metric rlrun reports: its name, what it means and who reports it, in one place.

A reporter (the run loop, an algorithm's plan or agent, an executor, the learner thread, the evaluator, a sweep)
writes ``metrics[LOSS_POLICY] = ...`` with a constant from here rather than the string ``"loss/policy"``: a typo is
then an undefined name that ruff and the import catch, not a new TensorBoard curve nobody reads. The loggers read
the names they show (the console's progress line, ``rlrun-plot``'s curves) from here too.

A name is ``<namespace>/<what>_<unit>`` (STYLE.md, "Names"); the step units are those of docs/tracking.md.
:data:`METRICS` is the table, name -> :class:`Metric`; ``tests/test_metric_names.py`` fails when a run reports a
name missing from it, or when the docs (docs/tracking.md, the algorithm pages) name one it lacks or omit one it
has. A name built per policy, per evaluation policy or per timing stage is built by the function beside it here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    meaning: str
    """One line: what the number is, with its unit."""
    reporter: str
    """Who reports it: one of :data:`REPORTERS`."""
    algos: tuple[str, ...] = ()
    """The algorithms (registry names) that report it, where ``reporter`` is ``"algorithm"`` (or the learner
    thread: the plans that can run one)."""


REPORTERS = ("run loop", "executor", "algorithm", "learner thread", "evaluation", "multi-agent", "sweep")

METRICS: dict[str, Metric] = {}


def _metric(name: str, meaning: str, reporter: str, *algos: str) -> str:
    assert reporter in REPORTERS, reporter  # a table typo, at import
    assert name not in METRICS, f"{name} declared twice"
    METRICS[name] = Metric(name, meaning, reporter, algos)
    return name


ON_POLICY = ("ppo", "a2c", "trpo", "impala", "appo")  # the actor-critic plans: policy loss, value loss, entropy
GRADIENT = ("ppo", "a2c", "impala", "appo")  # their update's info passes through learner_metrics (algos/base.py)
VTRACE = ("impala", "appo")
THREADED = ("apex", "impala", "appo")  # algo.learner=thread
DQN_FAMILY = ("dqn", "c51", "qrdqn", "rainbow")  # DQN's plan and its distributional siblings'
OFFLINE = ("bc", "iql", "cql")  # the plans that learn from a dataset (rlrun/algos/offline.py)

# ---------------------------------------------------------------------------------------------------- run loop
# rlrun/app/run.py (RunLoop.report): every run, every report.

ENV_STEPS = _metric("counters/env_steps", "env steps so far (agent steps summed over every env copy and worker)",
                    "run loop")
FRAMES = _metric("counters/frames", "frames so far: env steps x the env's frame skip", "run loop")
EPISODES = _metric("episode/count", "episodes finished so far", "run loop")
RETURN_TOTAL = _metric("episode/return_total", "sum of the returns of every episode finished so far: the mean return "
                       "of the episodes between two reports is the difference of this over that of episode/count",
                       "run loop")
ENV_STEPS_PER_S = _metric("perf/env_steps_per_s", "env steps per second since the previous report", "run loop")
FRAMES_PER_S = _metric("perf/frames_per_s", "frames per second since the previous report", "run loop")
RETURN_MEAN = _metric("episode/return_mean", "mean return of the last return_window episodes (once one ended)",
                      "run loop")
LENGTH_MEAN = _metric("episode/length_mean", "mean length in agent steps of the last return_window episodes",
                      "run loop")
GAMES = _metric("counters/games", "whole games (Atari: all lives) finished so far, for envs with games", "run loop")
GAME_SCORE_MEAN = _metric("episode/game_score_mean", "mean raw (unclipped) score of the last return_window games",
                          "run loop")
GAME_LENGTH_MEAN = _metric("episode/game_length_mean", "mean length in agent steps of the last return_window games",
                           "run loop")

# ---------------------------------------------------------------------------------------------------- executor
# rlrun/execution/: the local and Ray executors' metrics() (StageTimer.report and restarts).


def stage_seconds(stage: str) -> str:
    """``time/<stage>_s``: the wall-clock seconds spent in a timing stage (``timer("learn")``) since the last
    report (rlrun/execution/timing.py)."""
    return f"time/{stage}_s"


TIME_ENV_STEP = _metric(stage_seconds("env_step"), "seconds stepping the envs since the last report", "executor")
TIME_INFERENCE = _metric(stage_seconds("inference"), "seconds choosing actions since the last report", "executor")
TIME_POSTPROCESS = _metric(stage_seconds("postprocess"), "seconds in the workers' postprocess_batch (A3C: the "
                           "gradient; Ape-X: the n-step transitions and priorities) since the last report",
                           "executor")
TIME_REPLAY = _metric(stage_seconds("replay"), "seconds storing into replay since the last report (DQN, SAC, "
                      "TD3, DDPG, Ape-X)", "executor")
TIME_REPLAY_WAIT = _metric(stage_seconds("replay_wait"), "seconds waiting for replay shards' answers since the "
                           "last report (Ape-X with replay shards)", "executor")
TIME_LEARN = _metric(stage_seconds("learn"), "seconds learning (updates) since the last report", "executor")
TIME_LEARNER_QUEUE_WAIT = _metric(stage_seconds("learner_queue_wait"), "seconds waiting for room in the learner "
                                  "thread's queue since the last report (IMPALA, APPO)", "executor")
TIME_TRANSFER = _metric(stage_seconds("transfer"), "seconds moving batches and weights to and from Ray workers "
                        "since the last report (executor=ray)", "executor")
TIME_WAIT = _metric(stage_seconds("wait"), "seconds waiting for Ray workers' samples since the last report "
                    "(executor=ray)", "executor")
WORKER_RESTARTS = _metric("executor/worker_restarts", "rollout workers restarted after a failure so far (0 with "
                          "executor=local)", "executor")
LOST_ENV_STEPS = _metric("executor/lost_env_steps", "env steps sampled by workers that failed before sending them "
                         "(executor=ray)", "executor")
REPLAY_SHARD_RESTARTS = _metric("executor/replay_shard_restarts", "replay shards restarted after a failure so far "
                                "(with replay shards)", "executor")

# ---------------------------------------------------------------------------------------------------- algorithms
# Each plan's IterationResult.metrics (rlrun/algos/); the algorithm pages in docs/algorithms/ list their own.

LOSS_TOTAL = _metric("loss/total", "the loss the optimizer stepped on (the weighted sum of the terms below)",
                     "algorithm", *GRADIENT)
GRAD_NORM = _metric("learn/grad_norm", "L2 norm of the gradient before clipping (with algo.max_grad_norm)",
                    "algorithm", *GRADIENT, "pqn")
LOSS_POLICY = _metric("loss/policy", "the policy-gradient (surrogate) loss term", "algorithm", *ON_POLICY)
LOSS_VALUE = _metric("loss/value", "the value-function loss term (IQL: the expectile loss of V)", "algorithm",
                     *ON_POLICY, "iql")
ENTROPY = _metric("policy/entropy", "mean entropy of the policy's action distribution, nats", "algorithm",
                  *ON_POLICY, "sac", "cql")
EXPLAINED_VARIANCE = _metric("value/explained_variance", "1 - Var[return - value] / Var[return] of the value "
                             "targets learnt on (1: perfect, 0: no better than a constant)", "algorithm", *ON_POLICY)
LR = _metric("learn/lr", "the learning rate of the update (after its schedule)", "algorithm", *ON_POLICY, "pqn")
UPDATES = _metric("learn/updates", "updates so far: rollouts (or learner batches) learnt on", "algorithm",
                  *ON_POLICY, "pqn")
GRADIENT_STEPS = _metric("learn/gradient_steps", "gradient steps (optimizer updates) so far", "algorithm",
                         "ppo", "a2c", "trpo", "impala", "appo", *DQN_FAMILY, "sac", "apex", "td3", "ddpg", "pqn",
                         *OFFLINE)
POLICY_LAG_MEAN = _metric("learn/policy_lag_mean", "mean number of updates between the weights that acted an "
                          "unroll and those that learn on it", "algorithm", *VTRACE)
POLICY_LAG_MAX = _metric("learn/policy_lag_max", "largest such lag in the update", "algorithm", *VTRACE)

CLIP_FRACTION = _metric("policy/clip_fraction", "fraction of steps whose probability ratio was clipped",
                        "algorithm", "ppo", "appo")
APPROX_KL = _metric("policy/approx_kl", "approximate KL from the rollout's policy, nats (mean of (r - 1) - log r)",
                    "algorithm", "ppo")
CLIP_EPS = _metric("policy/clip_eps", "the clip range of the update (after algo.anneal_clip)", "algorithm", "ppo")
KL = _metric("policy/kl", "mean KL from the acting (old) policy, nats", "algorithm", "appo", "trpo")
SURROGATE_IMPROVEMENT = _metric("policy/surrogate_improvement", "decrease of the surrogate loss over the policy "
                                "step", "algorithm", "trpo")
EXPECTED_IMPROVEMENT = _metric("policy/expected_improvement", "the decrease the linear model predicted for the "
                               "full step (trust-region policy updates)", "algorithm", "trpo")
STEP_FRACTION = _metric("policy/step_fraction", "fraction of the full step the line search took", "algorithm", "trpo")
LINE_SEARCH_ACCEPTED = _metric("policy/line_search_accepted", "1 if the line search accepted a step, else 0",
                               "algorithm", "trpo")
LINE_SEARCH_BACKTRACKS = _metric("policy/line_search_backtracks", "backtracking steps the line search took",
                                 "algorithm", "trpo")

VS_MEAN = _metric("vtrace/vs_mean", "mean V-trace value target", "algorithm", *VTRACE)
RHO_MEAN = _metric("vtrace/rho_mean", "mean importance ratio pi / mu of the learner's and the actors' policies",
                   "algorithm", "impala")
RHO_CLIPPED_FRACTION = _metric("vtrace/rho_clipped_fraction", "fraction of importance ratios above "
                               "algo.clip_rho_threshold", "algorithm", "impala")

LOSS_TD = _metric("loss/td", "mean TD loss of the gradient steps since the last training step (Huber or squared; "
                  "the distributional ones': C51's cross-entropy, QR-DQN's quantile Huber loss)",
                  "algorithm", *DQN_FAMILY, "apex", "pqn")
EPSILON = _metric("explore/epsilon", "the epsilon of epsilon-greedy acting (after its schedule; 0 with noisy nets)",
                  "algorithm", *DQN_FAMILY, "pqn")
REPLAY_SIZE = _metric("replay/size", "transitions held in replay", "algorithm", *DQN_FAMILY, "sac", "apex", "td3",
                      "ddpg")
REPLAY_BETA = _metric("replay/beta", "the importance-sampling exponent of prioritised replay (after its schedule)",
                      "algorithm", *DQN_FAMILY)
REPLAY_MAX_PRIORITY = _metric("replay/max_priority", "the largest priority in prioritised replay (new transitions "
                              "get it)", "algorithm", *DQN_FAMILY)
REPLAY_RATIO = _metric("replay/ratio", "transitions learnt on per env step so far (gradient steps x batch size / env "
                       "steps), algo.learner=thread", "algorithm", "apex")

LOSS_CRITIC = _metric("loss/critic", "the critics' TD loss (SAC, TD3, IQL, CQL: both twins; DDPG: its one critic; "
                      "CQL: without its regulariser)", "algorithm", "sac", "td3", "ddpg", "iql", "cql")
LOSS_ACTOR = _metric("loss/actor", "the actor's loss (SAC, CQL: alpha log pi - min Q; TD3, DDPG: -Q1(s, mu(s)), the "
                     "mean of their delayed actor steps; IQL: the advantage-weighted squared error)", "algorithm",
                     "sac", "td3", "ddpg", "iql", "cql")
LOSS_TEMPERATURE = _metric("loss/temperature", "the temperature's loss (with automatic entropy tuning)", "algorithm",
                           "sac", "cql")
Q_MEAN = _metric("q/mean", "mean of the critics' Q values on the batch (of both twins: SAC, TD3, IQL, CQL)",
                 "algorithm", "sac", "td3", "ddpg", "iql", "cql")
ALPHA = _metric("policy/alpha", "the entropy temperature alpha before the step", "algorithm", "sac", "cql")
LOSS_BC = _metric("loss/bc", "behaviour cloning's loss: the cross-entropy of the dataset's actions (Discrete) or "
                  "their squared error (Box, in [-1, 1])", "algorithm", "bc")
LOSS_CQL = _metric("loss/cql", "CQL's conservative regulariser, alpha_cql (logsumexp_a Q(s, a) - Q(s, a_data)), "
                   "summed over both twins", "algorithm", "cql")

# ---------------------------------------------------------------------------------------------------- learner thread
# rlrun/execution/learner_thread.py (LearnerThread.metrics): plans with algo.learner=thread.

LEARNER_UPDATES = _metric("learner/updates", "updates the learner thread finished so far", "learner thread",
                          *THREADED)
LEARNER_UPDATES_PER_S = _metric("learner/updates_per_s", "the learner thread's updates per second since the last "
                                "report", "learner thread", *THREADED)
LEARNER_BUSY_FRACTION = _metric("learner/busy_fraction", "fraction of the time since the last report the learner "
                                "thread spent updating", "learner thread", *THREADED)
LEARNER_IDLE_S = _metric("learner/idle_s", "seconds the learner thread waited for a batch since the last report",
                         "learner thread", *THREADED)
LEARNER_QUEUE_DEPTH = _metric("learner/queue_depth", "batches waiting in the learner thread's queue",
                              "learner thread", *THREADED)

# ---------------------------------------------------------------------------------------------------- evaluation
# rlrun/app/periodic_eval.py (eval.interval_env_steps) and rlrun/app/evaluate.py (rlrun eval, to MLflow).

EVAL_RETURN_MEAN = _metric("eval/return_mean", "mean return of the evaluation's episodes (no exploration)",
                           "evaluation")
EVAL_RETURN_STD = _metric("eval/return_std", "standard deviation of those returns", "evaluation")
EVAL_LENGTH_MEAN = _metric("eval/length_mean", "mean length in agent steps of those episodes", "evaluation")
# eval.video=true: the recorded episodes, as media rather than scalars (the trackers' own video and image types).
EVAL_VIDEO = _metric("eval/video", "TensorBoard: the first episode of each evaluation, an animated GIF (Images tab)",
                     "evaluation")
EVAL_VIDEOS = _metric("eval/videos", "W&B: every episode of each evaluation, as wandb.Video", "evaluation")

# ---------------------------------------------------------------------------------------------------- multi-agent
# rlrun/algos/multiagent.py: each policy's plan reports its own metrics, under the policy's id.

PER_POLICY = _metric("policy/<id>/<metric>", "a policy's own metric (any name above that its algorithm reports, "
                     "episode/return_mean among them), for a multi-agent run", "multi-agent")
EVAL_PER_POLICY = _metric("eval/policy/<id>/return_mean", "a policy's mean return in a multi-agent evaluation",
                          "multi-agent")


def per_policy(policy_id: str, name: str) -> str:
    """``policy/<id>/<name>``: metric ``name`` of one policy of a multi-agent run."""
    return f"policy/{policy_id}/{name}"


def policy_and_metric(name: str) -> tuple[str, str] | None:
    """``(id, metric)`` of a per-policy name (:func:`per_policy`'s inverse); None for any other name."""
    parts = name.split("/", 2)
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "policy" and "/" in parts[2] else None


def eval_per_policy(policy_id: str) -> str:
    """``eval/policy/<id>/return_mean``: one policy's mean return in a multi-agent evaluation."""
    return f"eval/policy/{policy_id}/return_mean"


# ---------------------------------------------------------------------------------------------------- sweep
# rlrun/app/sweep.py: the sweep's MLflow parent run, once, when the sweep ends.

SWEEP_JOBS = _metric("sweep/jobs", "jobs in the sweep's last invocation", "sweep")
SWEEP_JOBS_BY_STATUS = {status: _metric(f"sweep/jobs_{status}", f"jobs {status}", "sweep")
                        for status in ("completed", "failed", "interrupted", "running", "pending")}
SWEEP_BEST_RETURN_MEAN = _metric("sweep/best_return_mean", "the best final episode/return_mean of its jobs", "sweep")


def declared(name: str) -> bool:
    """Whether ``name`` is a metric declared here (a per-policy name counts when its policy's metric is)."""
    if name in METRICS:
        return True
    parts = name.split("/")
    if len(parts) == 4 and name == eval_per_policy(parts[2]):
        return True
    split = policy_and_metric(name)
    return split is not None and declared(split[1])
