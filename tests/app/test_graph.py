"""`rlrun graph`: the configured algorithm's component tree, edges and traced calls, as text, dot and TensorBoard."""

from __future__ import annotations

from pathlib import Path

from conftest import run_rlrun


def test_graph_prints_tree_edges_and_calls(workdir: Path) -> None:
    proc = run_rlrun(["graph", "algo.dueling=true", "algo.prioritized_replay=true", "algo.n_step=3",
                      "--dot", str(workdir / "g.dot"), "--tensorboard", str(workdir / "tb")], workdir, check=True)
    out = proc.stdout
    assert "# dqn on CartPole-v1: observation Box(4,) float32, action Discrete(2)" in out
    assert "dqn_agent [DQNAgent] on cpu" in out and "q_head [DuelingQHead]" in out
    assert "memory [PrioritizedReplayMemory]" in out and "n_step [NStepAggregator]" in out
    assert "torso.forward -> q_head.x: Box(64,) float32" in out
    assert "n_step.add -> memory.records:" in out
    assert "<user> -> dqn_agent.get_actions(float32[1, 4]" in out and "q -> q_head.get_q(float32[1, 64])" in out
    assert "boundary violations" not in out
    dot = (workdir / "g.dot").read_text()
    assert dot.startswith("digraph rlrun {") and '"torso" -> "q_head"' in dot
    assert list((workdir / "tb").glob("events.out.tfevents.*"))


def test_graph_of_an_atari_config(workdir: Path) -> None:
    proc = run_rlrun(["graph", "env=pong", "algo.network=nature_cnn"], workdir, check=True)
    assert "observation Box(4, 84, 84) uint8, action Discrete(6)" in proc.stdout
    assert "torso [NatureCNN]" in proc.stdout and "1,687,206 parameters" in proc.stdout


def test_graph_bad_override_is_a_config_error(workdir: Path) -> None:
    proc = run_rlrun(["graph", "algo.network=resnet9000"], workdir)
    assert proc.returncode == 2 and "algo.network=resnet9000" in proc.stderr
