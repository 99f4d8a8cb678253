"""``rlrun-bench offline`` (benchmarks/offline_table.py): D4RL's normalisation, the table from hand-made records
(mean ± std of the seeds' normalised scores beside CORL's), the page's table markers, the whole path on a tiny
real Hopper dataset (record -> run -> eval -> record -> table), and that the committed table is what its committed
records give."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_rlrun

from benchmarks import offline_table as ot


def test_normalised_score_is_d4rl_s() -> None:
    assert ot.normalised(16.7, random=16.7, expert=3374.2) == 0.0
    assert ot.normalised(3374.2, random=16.7, expert=3374.2) == pytest.approx(100.0)
    assert ot.normalised(1695.45, random=16.7, expert=3374.2) == pytest.approx(50.0)
    assert ot.normalised(-300.0, random=-280.0, expert=1720.0) == pytest.approx(-1.0)


def test_random_return_is_seeded() -> None:
    first, again = ot.random_return("Hopper-v5", episodes=3), ot.random_return("Hopper-v5", episodes=3)
    assert first == again and first["episodes"] == 3
    assert first["return_std"] > 0  # three different episodes


def _write_record(out: Path, env: str, dataset: str, algo: str, seed: int, final: float) -> None:
    path = ot.record_path(out, env, dataset, algo, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"env": env, "dataset": ot.dataset_id(env, dataset), "algo": algo, "seed": seed,
                                "gradient_steps": 1000, "data": {"transitions": 5000},
                                "final_eval": {"return_mean": final, "episodes": 10}}))


def _write_anchors(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "anchors.json").write_text(json.dumps({"hopper": {
        "env_id": "Hopper-v5", "random": {"return_mean": 0.0, "return_std": 1.0, "episodes": 100},
        "expert": {"dataset": "hopper/expert-v0", "return_mean": 2000.0, "episodes": 100}}}))


def test_rows_are_seed_means_of_normalised_scores(tmp_path: Path) -> None:
    _write_anchors(tmp_path)
    for seed, final in enumerate((1000.0, 1200.0, 1400.0)):  # 50, 60, 70
        _write_record(tmp_path, "hopper", "medium-replay", "iql", seed, final)
    _write_record(tmp_path, "hopper", "medium-replay", "bc", 0, 400.0)  # 20, one seed: no spread to show
    for seed, final in enumerate((600.0, 1000.0)):  # 30, 50: two seeds, said
        _write_record(tmp_path, "hopper", "medium-replay", "cql", seed, final)
    rows = ot.build_rows(tmp_path)
    assert [r["dataset"] for r in rows] == ["hopper/medium-replay-v0"]
    iql, bc = rows[0]["cells"]["iql"], rows[0]["cells"]["bc"]
    assert iql["scores"] == [50.0, 60.0, 70.0] and iql["mean"] == pytest.approx(60.0)
    assert iql["std"] == pytest.approx(np.std([50.0, 60.0, 70.0]))
    assert iql["published"] == 97.43 and bc["mean"] == pytest.approx(20.0)
    line = next(x for x in ot.markdown(rows, {}).splitlines() if x.startswith("| hopper/medium-replay-v0"))
    assert line == ("| hopper/medium-replay-v0 | 5,000 | 20.0 (1 seed) | 60.0 ± 8.2 | 40.0 ± 10.0 (2 seeds) "
                    "| 29.8 / 97.4 / 95.1 |")


def test_a_variant_is_its_algorithm_with_keys_changed_in_a_column_of_its_own(tmp_path: Path) -> None:
    assert ot.cell_algo("iql") == ("iql", ())
    assert ot.cell_algo("iql-norm") == ("iql", ("algo.normalize_obs=true",))
    with pytest.raises(ValueError, match="unknown algorithm 'iql-fast'"):
        ot.cell_algo("iql-fast")
    _write_anchors(tmp_path)
    _write_record(tmp_path, "hopper", "medium", "iql", 0, 400.0)  # 20
    _write_record(tmp_path, "hopper", "medium", "iql-norm", 0, 1000.0)  # 50
    rows = ot.build_rows(tmp_path)
    assert rows[0]["cells"]["iql-norm"]["mean"] == pytest.approx(50.0)
    assert rows[0]["cells"]["iql-norm"]["published"] == rows[0]["cells"]["iql"]["published"] == 67.53
    lines = ot.markdown(rows, {}).splitlines()
    assert lines[0] == ("| dataset | transitions | BC | IQL | CQL | IQL, obs. normalised "
                        "| CORL on D4RL's counterpart (BC / IQL / CQL) |")
    assert lines[2] == ("| hopper/medium-v0 | 5,000 | not run | 20.0 (1 seed) | not run | 50.0 (1 seed) "
                        "| 53.5 / 67.5 / 59.1 |")


def test_an_unknown_algorithm_exits_2_naming_the_choices(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        ot.main(["--data-root", str(tmp_path), "--algos", "bc,iql-fast", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "unknown algorithm 'iql-fast': give one of bc, iql, cql, iql-norm" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        ot.main(["--data-root", str(tmp_path), "--torch-threads", "0", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "--torch-threads 0: give 1 or more" in capsys.readouterr().err


def test_table_goes_between_the_page_markers(tmp_path: Path) -> None:
    _write_anchors(tmp_path)
    _write_record(tmp_path, "hopper", "expert", "bc", 0, 2000.0)
    page = tmp_path / "page.md"
    page.write_text(f"before\n{ot.BEGIN}\nold table\n{ot.END}\nafter\n")
    ot.write_table(tmp_path, page)
    text = page.read_text()
    assert text.startswith(f"before\n{ot.BEGIN}\n`rlrun-bench offline`: ") and text.endswith(f"{ot.END}\nafter\n")
    assert "1,000 gradient steps a run; each run's final policy, 10 greedy episodes" in text
    assert "old table" not in text
    assert "| hopper/expert-v0 | 5,000 | 100.0 (1 seed) | not run | not run | (none) |" in text
    assert json.loads((tmp_path / "table.json").read_text())["rows"][0]["cells"]["bc"]["final_returns"] == [2000.0]


def test_the_path_end_to_end_on_a_tiny_hopper_dataset(tmp_path: Path) -> None:
    """A recorded PPO start as the 'expert' dataset, one BC cell of 200 gradient steps on two torch threads: the run,
    its greedy evaluation, its record, the anchors (the expert: that run's policy, greedy) and the table."""
    data = tmp_path / "datasets"
    run_rlrun(["algo=ppo", "env=mujoco", "env.id=Hopper-v5", "stop.env_steps=2048", "export.formats=[]",
               "eval.interval_env_steps=null", "record_dataset.id=hopper/expert-v0", f"record_dataset.root={data}",
               f"hydra.run.dir={tmp_path / 'ppo'}"], tmp_path, check=True)
    out, page = tmp_path / "out", tmp_path / "page.md"
    page.write_text(f"{ot.BEGIN}\n{ot.END}\n")
    assert ot.main(["--data-root", str(data), "--envs", "hopper", "--datasets", "expert,medium", "--algos", "bc",
                    "--seeds", "0", "--gradient-steps", "200", "--torch-threads", "2", "--runs-dir",
                    str(tmp_path / "runs"), "--out", str(out), "--page", str(page)]) == 0
    record = json.loads(ot.record_path(out, "hopper", "expert", "bc", 0).read_text())
    assert record["gradient_steps"] == 200 and record["final_eval"]["episodes"] == ot.EVAL_EPISODES
    assert record["torch_threads"] == 2
    assert "torch_threads: 2" in (tmp_path / "runs" / "hopper" / "expert" / "bc-seed0" / ".hydra" / "config.yaml"
                                  ).read_text()
    from rlrun.app.evaluate import evaluate

    meta = ot.dataset_metadata(data, "hopper/expert-v0")
    anchors = json.loads((out / "anchors.json").read_text())["hopper"]
    greedy = evaluate(tmp_path / "ppo", episodes=ot.EXPERT_EPISODES, write=False)  # the recorded run's policy
    assert anchors["expert"]["return_mean"] == pytest.approx(greedy.return_mean)
    assert anchors["random"]["episodes"] == ot.RANDOM_EPISODES
    assert record["data"]["transitions"] == meta["total_steps"]
    assert "| hopper/expert-v0 |" in page.read_text()  # medium was skipped: not under the root
    assert not ot.record_path(out, "hopper", "medium", "bc", 0).exists()


def test_committed_table_is_what_its_records_give() -> None:
    rows = json.loads((ot.OUT / "table.json").read_text())["rows"]
    assert [r["dataset"] for r in rows] == [ot.dataset_id(env, d) for env in ot.ENVS for d in ot.DATASETS]
    assert rows == json.loads(json.dumps(ot.build_rows(ot.OUT)))
    assert ot.markdown(ot.build_rows(ot.OUT), json.loads((ot.OUT / "anchors.json").read_text()),
                       ot.ran_line(ot.OUT)) == (ot.OUT / "table.md").read_text()
