"""The metrics fan-out builds its sinks through the registry only (the built-in ones and any registered later)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from omegaconf import OmegaConf

from rlrun.logging.fanout import MetricsLogger, RunContext
from rlrun.registry import registry


class RecordingSink:
    keeps_artifacts: ClassVar[bool] = True
    made: ClassVar[list[RecordingSink]] = []

    def __init__(self, cfg: Any, context: RunContext) -> None:
        self.cfg, self.context, self.calls = cfg, context, []
        RecordingSink.made.append(self)

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> RecordingSink:
        return cls(cfg, context)

    def log_params(self, params: dict[str, Any]) -> None:
        self.calls.append(("params", params))

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.calls.append(("metrics", metrics, step))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.calls.append(("artifact", Path(path).name))

    def close(self, summary: dict[str, Any], status: str) -> None:
        self.calls.append(("close", status))


def test_a_registered_sink_gets_everything_and_disabled_sinks_are_not_built(tmp_path: Path) -> None:
    registry.register("logger", "recording", RecordingSink)
    try:
        cfg = OmegaConf.create({"console": {"enabled": False}, "mlflow": {"enabled": False},
                                "tensorboard": {"enabled": True, "flush_secs": 1},
                                "recording": {"enabled": True, "label": "x"}})
        logger = MetricsLogger.from_config(cfg, tmp_path, "run-a", 1000)
        assert [type(s).__name__ for s in logger.sinks] == ["RecordingSink", "TensorBoardSink"]
        (tmp_path / "f.txt").write_text("x")
        logger.log_params({"lr": 0.1})
        logger.log_metrics({"loss": 1.5}, step=7)
        logger.log_artifact(tmp_path / "f.txt")  # TensorBoard keeps no artifacts: only the recording sink gets it
        logger.close({"env_steps": 7})
        sink = RecordingSink.made[-1]
        assert sink.cfg.label == "x" and sink.context == RunContext(tmp_path, "run-a", 1000)
        assert sink.calls == [("params", {"lr": 0.1}), ("metrics", {"loss": 1.5}, 7), ("artifact", "f.txt"),
                              ("close", "FINISHED")]
        assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))  # the real TensorBoard sink wrote
    finally:
        registry._entries["logger"].pop("recording", None)


def test_the_progress_line_shows_the_learner_when_a_plan_reports_it() -> None:
    import io

    from rlrun.logging.console import ConsoleSink

    out = io.StringIO()
    sink = ConsoleSink(OmegaConf.create({"enabled": True, "interval_s": 0.0}), None, stream=out)
    base = {"perf/frames_per_s": 1354.4, "episode/return_mean": -20.9, "episode/count": 3}
    sink.log_metrics(base, step=100)
    sink.log_metrics({**base, "learner/updates_per_s": 1.2762, "learner/queue_depth": 3.0, "replay/ratio": 0.5603,
                      "learn/policy_lag_mean": 2.25}, step=200)
    first, second = out.getvalue().splitlines()
    assert first == "env_steps 100  frames/s 1354  return -20.9  episodes 3"
    assert second == ("env_steps 200  frames/s 1354  return -20.9  episodes 3  learner 1.28 upd/s  queue 3  "
                      "replay ratio 0.56  lag 2.2")


def test_the_progress_line_of_a_multiagent_run_gives_each_policys_return() -> None:

    from rlrun.logging.console import ConsoleSink, policies_part

    metrics = {"perf/frames_per_s": 900.0, "episode/return_mean": -3.2, "episode/count": 40,
               "policy/adv/episode/return_mean": -19.54, "policy/good/episode/return_mean": 12.0,
               "policy/adv/loss/td": 0.5}
    assert policies_part(metrics) == "(adv -19.5, good 12.0)"
    assert policies_part({"episode/return_mean": 1.0}) == ""
    sink = ConsoleSink.__new__(ConsoleSink)
    sink._eval = None
    assert sink._line(metrics, 1000) == "env_steps 1000  frames/s 900  return -3.2 (adv -19.5, good 12.0)  episodes 40"


def test_tensorboard_hparams_are_in_the_run_itself_with_booleans_as_text(tmp_path: Path) -> None:
    """One run in the TensorBoard folder (no tensorboard/hparams beside it, no one-point hparam/* charts): its
    event file holds the HParams session with the parameters (a bool as the text True, not the number 1.0) and,
    as metrics, the scalar tags the run logged."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from rlrun.logging.tensorboard import TensorBoardSink

    sink = TensorBoardSink(OmegaConf.create({"flush_secs": 1}), tmp_path)
    sink.log_params({"algo.lr": 0.001, "algo.double_q": True, "env.id": "CartPole-v1", "stop.wall_time_s": None})
    sink.log_metrics({"episode/return_mean": 20.0, "perf/frames_per_s": 900.0}, 100)
    sink.log_metrics({"episode/return_mean": 30.0}, 200)
    sink.close({"env_steps": 200, "wall_time_s": 1.5}, "FINISHED")
    assert [p.name for p in (tmp_path / "tensorboard").iterdir() if p.is_dir()] == []
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == ["episode/return_mean", "perf/frames_per_s"]
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["algo.double_q"].string_value == "True" and start.hparams["algo.lr"].number_value == 0.001
    assert start.hparams["env.id"].string_value == "CartPole-v1"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert sorted(m.name.tag for m in experiment.metric_infos) == ["episode/return_mean", "perf/frames_per_s"]
