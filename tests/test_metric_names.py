"""rlrun/metric_names.py is the one list of metric names: short runs of every algorithm report only names it declares
(and report every name it declares that a CartPole/Pendulum run can), and the docs name exactly its metrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlrun import metric_names as names
from rlrun.app.run import run_experiment
from rlrun.config import compose
from rlrun.logging.fanout import MetricsLogger

DOCS = Path(__file__).resolve().parents[1] / "docs"
QUIET = ["logger=none", "logger.report_interval_s=0", "export.formats=[]", "checkpoint.at_end=false"]

# Short runs (one to a few training steps each; ~1-2 s apiece) that between them reach every reporting path a
# CartPole or Pendulum run on the local executor has: each algorithm, its sync and thread learners, A3C, prioritised
# replay, SAC's temperature, a periodic evaluation.
RUNS = {
    "dqn": ["algo=dqn", "algo.prioritized_replay=true", "algo.learning_starts=64", "stop.env_steps=256",
            "eval.interval_env_steps=128", "eval.episodes=1"],
    "ppo": ["algo=ppo", "stop.env_steps=1"],
    "a2c": ["algo=a2c", "stop.env_steps=1"],
    "a3c": ["algo=a2c", "algo.mode=async", "executor.num_workers=2", "stop.env_steps=200"],
    "trpo": ["algo=trpo", "stop.env_steps=1"],
    "impala": ["algo=impala", "stop.env_steps=200"],
    "impala-thread": ["algo=impala", "algo.learner=thread", "stop.env_steps=400"],
    "appo-thread": ["algo=appo", "algo.learner=thread", "stop.env_steps=400"],
    "c51": ["algo=c51", "algo.prioritized_replay=true", "algo.learning_starts=64", "stop.env_steps=256"],
    "qrdqn": ["algo=qrdqn", "algo.prioritized_replay=true", "algo.learning_starts=64", "stop.env_steps=256"],
    "rainbow": ["algo=rainbow", "algo.learning_starts=64", "stop.env_steps=256"],
    "apex": ["algo=apex", "algo.learning_starts=64", "stop.env_steps=320"],
    "apex-thread": ["algo=apex", "algo.learner=thread", "algo.learning_starts=64", "stop.env_steps=640"],
    "sac": ["algo=sac", "env=pendulum", "algo.learning_starts=64", "stop.env_steps=128"],
    "pqn": ["algo=pqn", "stop.env_steps=1"],
    "td3": ["algo=td3", "env=pendulum", "algo.learning_starts=64", "stop.env_steps=128"],
    "ddpg": ["algo=ddpg", "env=pendulum", "algo.learning_starts=64", "stop.env_steps=128"],
    # the offline learners, on datasets of random actions written by the fixture below under {root}
    "bc": ["algo=bc", "data=minari", "data.id=cartpole/random-v0", "data.root={root}", "stop.gradient_steps=2",
           "algo.updates_per_iteration=1"],
    "iql": ["algo=iql", "env=pendulum", "data=minari", "data.id=pendulum/random-v0", "data.root={root}",
            "stop.gradient_steps=2", "algo.updates_per_iteration=1"],
    "cql": ["algo=cql", "env=pendulum", "data=minari", "data.id=pendulum/random-v0", "data.root={root}",
            "stop.gradient_steps=2", "algo.updates_per_iteration=1"],
}

# Declared names no run above can report: Atari's whole games, the Ray executor's, replay shards', sweeps', and the
# multi-agent templates (tests/algos/test_multiagent.py runs those).
NOT_REACHED = {names.GAMES, names.GAME_SCORE_MEAN, names.GAME_LENGTH_MEAN, names.TIME_TRANSFER, names.TIME_WAIT,
               names.TIME_REPLAY_WAIT, names.LOST_ENV_STEPS, names.REPLAY_SHARD_RESTARTS, names.PER_POLICY,
               names.EVAL_PER_POLICY, names.EVAL_VIDEO, names.EVAL_VIDEOS,  # media, not through log_metrics
               *(m.name for m in names.METRICS.values() if m.reporter == "sweep")}


def random_dataset(root: Path, dataset_id: str, env_id: str) -> None:
    """Two episodes of uniform random actions as a Minari dataset under ``root``."""
    import gymnasium as gym
    import minari
    import numpy as np
    from minari.data_collector import EpisodeBuffer

    from rlrun.execution.dataset import minari_root

    env = gym.make(env_id)
    env.action_space.seed(0)
    episodes = []
    for i in range(2):
        obs, _ = env.reset(seed=i)
        steps: dict[str, list] = {"observations": [obs], "actions": [], "rewards": [], "terminations": [],
                                  "truncations": []}
        while not (steps["terminations"][-1:] == [True] or steps["truncations"][-1:] == [True]):
            action = env.action_space.sample()
            obs, reward, terminated, truncated, _ = env.step(action)
            for k, v in zip(steps, (obs, action, reward, terminated, truncated), strict=True):
                steps[k].append(v)
        episodes.append(EpisodeBuffer(id=i, **{k: np.asarray(v) for k, v in steps.items()}))
    with minari_root(str(root)):
        minari.create_dataset_from_buffers(dataset_id, episodes, env=env.spec, eval_env=env.spec, author="test",
                                           author_email="-", code_permalink="-", description="random actions",
                                           algorithm_name="random")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Every name each run logged (through the fan-out every metric goes through), by run."""
    out: dict[str, set[str]] = {}
    current: set[str] = set()
    original = MetricsLogger.log_metrics

    def record(self: MetricsLogger, metrics: dict[str, float], step: int) -> None:
        current.update(metrics)
        original(self, metrics, step)

    root = tmp_path_factory.mktemp("datasets")
    for dataset_id, env_id in (("cartpole/random-v0", "CartPole-v1"), ("pendulum/random-v0", "Pendulum-v1")):
        random_dataset(root, dataset_id, env_id)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MetricsLogger, "log_metrics", record)
        for run, overrides in RUNS.items():
            current = out.setdefault(run, set())
            run_experiment(compose([*(o.format(root=root) for o in overrides), *QUIET]),
                           tmp_path_factory.mktemp(run))
    return out


def test_every_reported_metric_is_declared(reported: dict[str, set[str]]) -> None:
    undeclared = {run: sorted(n for n in got if not names.declared(n)) for run, got in reported.items()}
    assert {run: got for run, got in undeclared.items() if got} == {}


def test_every_declared_metric_is_reported_by_some_run(reported: dict[str, set[str]]) -> None:
    """A name declared but never reported is a stale entry (or a reporter that stopped reporting it)."""
    seen = set().union(*reported.values())
    assert sorted(set(names.METRICS) - NOT_REACHED - seen) == []


def test_each_algorithm_reports_the_metrics_declared_for_it(reported: dict[str, set[str]]) -> None:
    """``Metric.algos`` is right: an algorithm's runs report each metric that names it (conditional ones in the run
    that switches them on), and no run reports another algorithm's."""
    runs_of: dict[str, set[str]] = {}
    for run, overrides in RUNS.items():
        algo = next(o for o in overrides if o.startswith("algo=")).removeprefix("algo=")
        runs_of.setdefault(algo, set()).update(reported[run])
    wrong = []
    for m in names.METRICS.values():
        if m.reporter not in ("algorithm", "learner thread"):
            continue
        for algo, got in runs_of.items():
            if (algo in m.algos) != (m.name in got):
                wrong.append(f"{m.name}: declared for {m.algos}, reported by {algo}: {m.name in got}")
    assert wrong == []


def test_per_policy_names_round_trip() -> None:
    name = names.per_policy("adv", names.LOSS_TD)
    assert name == "policy/adv/loss/td" and names.policy_and_metric(name) == ("adv", names.LOSS_TD)
    assert names.declared(name) and names.declared(names.per_policy("good", names.RETURN_MEAN))
    assert names.declared(names.eval_per_policy("adv"))
    assert not names.declared(names.per_policy("adv", "loss/tdd")) and not names.declared("loss/tdd")
    assert names.policy_and_metric(names.LOSS_TD) is None


# A metric name in the docs: `namespace/...` in backticks, with a namespace the table uses (not a path such as
# `rlrun/algos/`); `learner/*` stands for a namespace and is not a name.
NAMESPACES = {name.split("/")[0] for name in names.METRICS}
DOC_NAME = re.compile(r"`((%s)/[a-z_0-9<>/]+)`" % "|".join(sorted(NAMESPACES)))


def _doc_names(path: Path) -> set[str]:
    return {m.group(1) for m in DOC_NAME.finditer(path.read_text())}


def test_the_docs_name_only_declared_metrics() -> None:
    wrong = {f"{p.relative_to(DOCS)}: {n}" for p in DOCS.rglob("*.md") for n in _doc_names(p)
             if not names.declared(n) and n not in names.METRICS}
    assert sorted(wrong) == []


def test_tracking_page_lists_every_run_wide_metric_and_algorithm_pages_their_own() -> None:
    """docs/tracking.md's list has every metric that is not one algorithm's (a sweep's are on the sweeps page); each
    algorithm's page names every metric declared for it (``learn/gradient_steps``, which all report, included)."""
    page = {"sweep": "sweeps.md"}
    missing = [f"{page.get(m.reporter, 'tracking.md')}: {m.name}" for m in names.METRICS.values()
               if m.reporter not in ("algorithm", "learner thread")
               and m.name not in _doc_names(DOCS / page.get(m.reporter, "tracking.md"))]
    for m in names.METRICS.values():
        for algo in m.algos:
            if m.name not in _doc_names(DOCS / "algorithms" / f"{algo}.md"):
                missing.append(f"algorithms/{algo}.md: {m.name}")
    assert missing == []
