"""Docs that cannot rot: every ``rlrun`` command and every Python example in README.md and docs/ runs.

What counts: in a fenced block of language ``bash`` (or ``sh``/``shell``/``console``), each line that starts with
``rlrun`` or ``rlrun-plot`` (after an optional ``$ ``; ``\\`` continues a line; a trailing ``# comment`` is
dropped); every fenced ``python`` block. A block right after the line ``<!-- illustrative: REASON -->`` is not run
(REASON says why: a GPU, a cluster, hours of compute); ``rlrun-bench`` and ``make`` lines, which run benchmarks or
this test suite itself, must be in such a block.

How a command runs: in a fresh working directory, with a tiny budget (``stop.env_steps=1``: one training step of the
plan; a search gets ``hydra.sweeper.n_trials=2`` of 300 env steps, so episodes end and trials have returns)
replacing the command's own ``stop.*`` keys; IMPALA and APPO also get ``algo.batch_size=2`` unless the command sets
it (their first training step is a learner batch: 32 unrolls, 1,600 Pong steps and an IMPALA ResNet update, ~30 s
of a Ray command that the others wait for), and PPO, TRPO and PQN ``algo.rollout_steps=16`` (their first training
step is a whole rollout and its update: a preset's 1,024 Pong steps or 2,048 Hopper steps and their epochs). Paths
that stand for a run the reader made earlier (an argument or ``resume=`` value starting with ``outputs/``, ``<run
dir>`` or ``RUN_DIR``) are replaced by a real one, made once per session by a tiny DQN run; ``multirun/...`` by a
tiny sweep's directory. Commands that only print (``--help``, ``--cfg``, ``--info``, ``rlrun keys``) and those that
read a run (``eval``, ``export``, ``collect``, ...) run as written.
Each runs as its console script would, in a child forked from a process that has already imported rlrun's stack
(``cli_fork_server.py``: the same ``main`` with the same ``sys.argv``, stdin, working directory and exit status,
without a fresh interpreter's imports). A command passes when it exits 0 (``# exits 2`` at the end of the line:
when it exits 2 with one line on stderr, the documented bad-input behaviour). A command shown on several pages runs
once; they run two at a time. The Ray commands join one ``ray start --head`` cluster started for them (the
executor's own tests start and stop local clusters), as a user's command does with ``RAY_ADDRESS`` set.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from conftest import ForkServer, run_rlrun

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative:\s*(.+?)\s*-->$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
PRINT_ONLY = ("--help", "-h", "--cfg", "--info", "--hydra-help")
TINY = ["stop.env_steps=1"]
# The algorithms whose first training step is a whole rollout and its epochs of updates, of presets' lengths (PPO on
# Atari: 1,024 Pong steps and 16 Nature-CNN minibatch steps; PPO on MuJoCo: 2,048 steps and 320 minibatch steps):
# a command of theirs runs with rollouts this long unless it sets its own.
ON_POLICY_LONG_ROLLOUTS = ("algo=ppo", "algo=trpo", "algo=pqn")
TINY_ROLLOUT = 16


@dataclass(frozen=True)
class Snippet:
    page: str  # relative to the repository root
    line: int  # 1-based line of the command (or of the block's first line)
    kind: str  # "shell" or "python"
    text: str  # the command line (continuations joined) or the Python block
    illustrative: str | None  # the reason, for a block marked illustrative

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """The shell commands and Python blocks of one Markdown page."""
    lines = path.read_text().splitlines()
    page = str(path.relative_to(ROOT))
    out: list[Snippet] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = ILLUSTRATIVE.match(prev)
        reason = mark.group(1) if mark else None
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[:3]):
            j += 1
        body = lines[i + 1:j]
        if lang == "python":
            out.append(Snippet(page, i + 2, "python", "\n".join(body), reason))
        elif lang in SHELLS:
            k = 0
            while k < len(body):
                start, text = k, body[k].strip()
                while text.endswith("\\") and k + 1 < len(body):
                    k += 1
                    text = text[:-1].rstrip() + " " + body[k].strip()
                text = text[2:] if text.startswith("$ ") else text
                if re.match(r"(rlrun|rlrun-plot|rlrun-bench|make)(\s|$)", text):
                    out.append(Snippet(page, i + 2 + start, "shell", text, reason))
                k += 1
        i = j + 1
    return out


ALL = [s for p in PAGES for s in snippets(p)]
RUNNABLE = [s for s in ALL if s.illustrative is None]


@pytest.mark.parametrize("line, words, exits_2", [
    ("rlrun env=pendulum env.vectorization=vector_entry_point  # exits 2",
     ["rlrun", "env=pendulum", "env.vectorization=vector_entry_point"], True),
    ("rlrun algo=ppo   # the preset's settings", ["rlrun", "algo=ppo"], False),  # an apostrophe in a comment
    ("rlrun run_name='a # b' x=1#2  # named", ["rlrun", "run_name=a # b", "x=1#2"], False),  # # inside a word
])
def test_a_command_line_is_read_as_bash_reads_it(line: str, words: list[str], exits_2: bool) -> None:
    assert _words(line) == (words, exits_2)


def test_the_pages_have_commands_and_every_skip_says_why():
    """The collector finds the docs' commands (a broken collector would pass every page), and a command that runs
    benchmarks or the test suite (rlrun-bench, make) is marked illustrative with a reason."""
    assert len([s for s in ALL if s.kind == "shell"]) >= 30, [s.id for s in ALL]
    assert any(s.kind == "python" for s in RUNNABLE)
    unmarked = [s.id for s in RUNNABLE if s.kind == "shell" and s.text.split()[0] in ("rlrun-bench", "make")]
    assert not unmarked, f"mark these illustrative (<!-- illustrative: REASON -->): {unmarked}"
    assert all(s.illustrative.strip() for s in ALL if s.illustrative is not None)


# ---------------------------------------------------------------------------------------------- shell


def _words(text: str) -> tuple[list[str], bool]:
    """The command's words without its trailing comment, and whether the comment says it exits 2. The comment starts
    where bash starts it, at a ``#`` that begins a word outside quotes; its text (an apostrophe too) is not parsed."""
    quote, cut = "", len(text)
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            cut = i
            break
    return shlex.split(text[:cut]), "exits 2" in text[cut:]


def _made(work: Path) -> dict[str, Path]:
    """A tiny run (with a checkpoint and an export) and a tiny sweep for the commands that read one."""
    run_rlrun(["algo=dqn", "stop.env_steps=64", "algo.learning_starts=32", "hydra.run.dir=outputs/run"], work,
              check=True)
    run_rlrun(["-m", "seed=0,1", "stop.env_steps=32", "hydra.sweep.dir=multirun/sweep"], work, check=True)
    return {"run": work / "outputs" / "run", "sweep": work / "multirun" / "sweep"}


def _substitute(word: str, made: dict[str, Path]) -> str:
    key, eq, value = word.partition("=")
    target = value if eq else word
    if target.startswith(("outputs/", "<run dir>", "RUN_DIR")):
        target = str(made["run"])
    elif target.startswith("multirun/"):
        target = str(made["sweep"])
    else:
        return word
    return f"{key}={target}" if eq else target


def _budgeted(words: list[str]) -> list[str]:
    if words[1:2] in (["keys"], ["eval"], ["export"], ["graph"], ["compare"], ["collect"]) or words[0] == "rlrun-plot":
        return words
    if any(w in PRINT_ONLY for w in words):
        return words
    kept = [w for w in words if not w.lstrip("+").startswith(("stop.", "hydra.sweeper.n_trials="))]
    extra = list(TINY)
    if any(w.startswith("hparams_search=") for w in words):  # a search ranks trials by their return: episodes
        extra = ["stop.env_steps=300", "hydra.sweeper.n_trials=2"]  # must end (a random CartPole one: ~20 steps)
    if any(w in ("algo=impala", "algo=appo") for w in words) and not any(w.startswith("algo.batch_size=")
                                                                        for w in words):
        extra.append("algo.batch_size=2")
    if any(w in ON_POLICY_LONG_ROLLOUTS for w in words) and not any(w.startswith("algo.rollout_steps=")
                                                                     for w in words):
        extra.append(f"algo.rollout_steps={TINY_ROLLOUT}")
    return kept + extra


@pytest.mark.parametrize("words, budgeted", [
    (["rlrun", "algo=ppo", "env=pong", "stop.env_steps=10000000"],
     ["rlrun", "algo=ppo", "env=pong", "stop.env_steps=1", "algo.rollout_steps=16"]),
    (["rlrun", "algo=trpo", "algo.rollout_steps=64"], ["rlrun", "algo=trpo", "algo.rollout_steps=64",
                                                       "stop.env_steps=1"]),  # its own length is kept
    (["rlrun", "algo=dqn", "env=pong"], ["rlrun", "algo=dqn", "env=pong", "stop.env_steps=1"]),
    (["rlrun", "algo=appo", "env=pong"], ["rlrun", "algo=appo", "env=pong", "stop.env_steps=1", "algo.batch_size=2"]),
])
def test_a_command_runs_with_a_tiny_budget_of_its_own_kind(words: list[str], budgeted: list[str]) -> None:
    assert _budgeted(words) == budgeted


SHELL = [s for s in RUNNABLE if s.kind == "shell"]
COMMANDS: dict[str, list[Snippet]] = {}  # the command as written -> where the docs show it (each runs once)
for s in SHELL:
    COMMANDS.setdefault(" ".join(_words(s.text)[0]) + (" # exits 2" if _words(s.text)[1] else ""), []).append(s)


def _uses_ray(command: str) -> bool:
    return "executor=ray" in command


@contextlib.contextmanager
def _ray_cluster(needed: bool) -> Iterator[dict[str, str]]:
    """The environment that points the Ray commands at one ``ray start --head`` cluster made for them all: a run
    that starts a local cluster of its own spends most of its seconds starting and stopping it (the run itself is a
    few seconds), which the executor's own tests cover (tests/execution/). Empty when no command uses Ray."""
    if not needed:
        yield {}
        return
    from benchmarks.ray_head import ENV, ray_head

    with ray_head(cpus=6) as (address, _):  # room for two commands' workers at once
        yield {"RAY_ADDRESS": address, "RAY_AUTH_MODE": ENV["RAY_AUTH_MODE"]}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[str], subprocess.CompletedProcess]]:
    """Every distinct command run once, two at a time (the machine's two cores), each in a fresh working directory,
    by two fork servers (``cli_fork_server.py``: each command in a child of a process that imported rlrun's stack
    once, as its console script runs it, without a fresh interpreter's imports); the Ray commands join one
    cluster (:func:`_ray_cluster`)."""
    made = _made(tmp_path_factory.mktemp("made"))
    store = made["run"].parents[1] / "mlflow.db"  # the tiny run's MLflow store, its schema migrated (seconds saved
    pending = list(COMMANDS)                       # per command: a fresh store migrates its tables first)
    results: dict[str, tuple[list[str], subprocess.CompletedProcess]] = {}
    taking = threading.Lock()

    def run(command: str, server: ForkServer, ray_env: dict[str, str]) -> tuple[list[str], subprocess.CompletedProcess]:
        words = [_substitute(w, made) for w in _words(COMMANDS[command][0].text)[0]]
        argv = _budgeted(words)
        cwd = tmp_path_factory.mktemp("cmd")
        shutil.copy(store, cwd / "mlflow.db")
        return argv, server.run(argv, cwd, timeout=600, env={**os.environ, **(ray_env if _uses_ray(command) else {})})

    def lane(server: ForkServer, ray_env: dict[str, str]) -> None:
        while True:
            with taking:
                if not pending:
                    return
                command = pending.pop(0)
            results[command] = run(command, server, ray_env)

    started: list[ForkServer] = []
    try:
        for _ in range(2):
            started.append(ForkServer())
        with _ray_cluster(any(_uses_ray(c) for c in COMMANDS)) as ray_env:
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                for future in [pool.submit(lane, server, ray_env) for server in started]:
                    future.result()
        return {c: results[c] for c in COMMANDS}
    finally:
        for server in started:
            server.close()


@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: COMMANDS[c][0].id)
def test_shell_command_runs(command: str, ran: dict):
    argv, proc = ran[command]
    where = (f"{', '.join(s.id for s in COMMANDS[command])}: {' '.join(argv)}\n{proc.stdout[-2000:]}\n"
             f"{proc.stderr[-3000:]}")
    if command.endswith("# exits 2"):
        assert proc.returncode == 2, where
        assert len(proc.stderr.strip().splitlines()) == 1, where
    else:
        assert proc.returncode == 0, where


# ---------------------------------------------------------------------------------------------- python


@pytest.mark.parametrize("snippet", [s for s in RUNNABLE if s.kind == "python"], ids=lambda s: s.id)
def test_python_example_runs(snippet: Snippet, tmp_path: Path):
    proc = subprocess.run([sys.executable, "-c", snippet.text], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{snippet.id}\n{snippet.text}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
