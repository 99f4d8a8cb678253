"""Mutation benchmark: how many plausible bugs the unit tests catch, per package.

Each mutant below is one plausible bug (a dropped config key, a flipped flag, an off-by-one), written as a text
replacement in one source file. The script copies the package and its tests to a temporary directory, checks that
the unmutated copy passes every test file the mutants name, then applies the mutants one at a time to the copy,
runs that mutant's test files (``pytest -x``) and restores the file. A mutant is *killed* when its tests fail (or
hang past the timeout), *survived* when they pass. The score of a package (``ops/``, ``components/``, ``algos/``,
``execution/``) is its share of killed mutants: a figure to keep rising. Learning tests, Pong smoke runs and CLI
subprocess runs are deselected: the score is the unit tests'. On demand, not in CI (several minutes):

    .venv/bin/python -m benchmarks.mutation                  # every mutant; a table, and JSON with --json PATH
    .venv/bin/python -m benchmarks.mutation --only algos,ops # some packages

The working tree is never touched: the mutants are applied to the copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESELECT = "not learns and not learn_cartpole and not pong and not smoke and not cli_"


@dataclass(frozen=True)
class Mutant:
    package: str  # ops | components | algos | execution
    path: str  # the source file, relative to the repository root
    old: str  # the text replaced; it must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # the test files that should catch it
    bug: str  # what the mutant does, in words


WIRING = "tests/algos/test_config_wiring.py"

MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- ops
    Mutant("ops", "rlrun/ops/returns.py", "truncated_only = truncated * (1.0 - terminated)",
           "truncated_only = truncated", ("tests/ops/test_returns.py",),
           "truncation_aware_gae bootstraps a step both terminated and truncated"),
    Mutant("ops", "rlrun/ops/returns.py", "    trace = discounts * lam\n", "    trace = discounts\n",
           ("tests/ops/test_returns.py",), "gae ignores lambda in the trace"),
    Mutant("ops", "rlrun/ops/returns.py", "open_[: T - k] = still & ~ended[k:]", "open_[: T - k] = still",
           ("tests/ops/test_returns.py",), "nstep_returns windows run through episode ends"),
    Mutant("ops", "rlrun/ops/returns.py", "bootstrap_discounts = bootstrap_discounts * (~term_at_end)",
           "bootstrap_discounts = bootstrap_discounts * (~term_at_end | True)", ("tests/ops/test_returns.py",),
           "nstep_returns bootstrap discount kept at a termination"),
    Mutant("ops", "rlrun/ops/vtrace.py", "    cs = rhos.clamp(max=1.0)\n", "    cs = rhos\n",
           ("tests/ops/test_vtrace.py",), "V-trace traces c_i not clipped at 1"),
    Mutant("ops", "rlrun/ops/vtrace.py",
           "clipped_rhos = rhos if clip_rho_threshold is None else rhos.clamp(max=clip_rho_threshold)",
           "clipped_rhos = rhos", ("tests/ops/test_vtrace.py",), "V-trace rho threshold ignored"),
    # ---------------------------------------------------------------- components
    Mutant("components", "rlrun/components/losses.py", "next_actions = select.argmax(dim=1, keepdim=True)",
           "next_actions = select.argmin(dim=1, keepdim=True)", ("tests/components/test_losses.py",),
           "DQN bootstrap action by argmin"),
    Mutant("components", "rlrun/components/prioritized_replay.py",
           "weights = (self.min_tree.min() / self.sum_tree[slots]) ** beta",
           "weights = (self.min_tree.min() / self.sum_tree[slots]) ** (1.0 - beta)",
           ("tests/components/test_prioritized_replay.py",), "importance weights with exponent 1 - beta"),
    Mutant("components", "rlrun/components/policy_losses.py",
           "return apply_reduction(0.5 * torch.max(unclipped, clipped), reduction)",
           "return apply_reduction(0.5 * torch.min(unclipped, clipped), reduction)",
           ("tests/components/test_policy_losses.py",), "PPO value clipping takes the smaller loss"),
    Mutant("components", "rlrun/components/policy_losses.py", "    return centred / (advantages.std() + eps)\n",
           "    return centred\n", ("tests/components/test_policy_losses.py",), "advantages centred, not scaled"),
    Mutant("components", "rlrun/components/optimizers/gradient_step.py",
           "torch._foreach_lerp_(t_params, s_params, self.tau)",
           "torch._foreach_lerp_(t_params, s_params, 1.0 - self.tau)", ("tests/components/test_optimizers.py",),
           "Polyak averaging with 1 - tau"),
    # ---------------------------------------------------------------- algos
    Mutant("algos", "rlrun/algos/dqn.py", "DQNLoss(self.cfg.double_q,", "DQNLoss(False,",
           (WIRING, "tests/algos/test_dqn.py"),
           "DQN: double Q off whatever algo.double_q says"),
    Mutant("algos", "rlrun/algos/dqn.py",
           "discount = self.cfg.gamma * (1.0 - np.asarray(terminated, dtype=np.float32))",
           "discount = self.cfg.gamma * np.ones_like(np.asarray(terminated, dtype=np.float32))",
           (WIRING, "tests/algos/test_dqn.py"), "DQN: the 1-step discount ignores terminated"),
    Mutant("algos", "rlrun/algos/dqn.py", "Synchronization(every=cfg.target_update_every, tau=cfg.tau)",
           "Synchronization(every=cfg.target_update_every, tau=1.0)", (WIRING, "tests/algos/test_dqn.py"),
           "DQN: algo.tau ignored"),
    Mutant("algos", "rlrun/algos/dqn.py", "NStepAggregator(cfg.n_step, cfg.gamma)", "NStepAggregator(cfg.n_step, 0.99)",
           (WIRING, "tests/algos/test_dqn.py"), "DQN: the n-step returns discount with 0.99"),
    Mutant("algos", "rlrun/algos/ppo.py", '"old_values": values', '"old_values": ret',
           (WIRING, "tests/algos/test_ppo.py"), "PPO: value clipping around the returns (silently off)"),
    Mutant("algos", "rlrun/algos/ppo.py", "normalize_advantage=cfg.normalize_advantage", "normalize_advantage=True",
           (WIRING, "tests/algos/test_ppo.py"), "PPO: algo.normalize_advantage ignored"),
    Mutant("algos", "rlrun/algos/on_policy.py", "if self.cfg.bootstrap_truncated:", "if True:",
           (WIRING, "tests/algos/test_ppo.py"), "PPO/A2C/TRPO: algo.bootstrap_truncated ignored"),
    Mutant("algos", "rlrun/algos/a2c.py", "normalize_advantage=cfg.normalize_advantage)\n        info",
           "normalize_advantage=False)\n        info", (WIRING, "tests/algos/test_a2c.py"),
           "A2C: algo.normalize_advantage ignored"),
    Mutant("algos", "rlrun/algos/sac.py", "Temperature(cfg.init_alpha, cfg.learn_alpha, cfg.target_entropy)",
           "Temperature(cfg.init_alpha, cfg.learn_alpha, None)", (WIRING, "tests/algos/test_sac.py"),
           "SAC: algo.target_entropy ignored"),
    Mutant("algos", "rlrun/algos/off_policy_continuous.py", "Synchronization(every=1, tau=cfg.tau)",
           "Synchronization(every=1, tau=0.005)",
           (WIRING, "tests/algos/test_sac.py"), "SAC, TD3, DDPG: algo.tau ignored"),
    Mutant("algos", "rlrun/algos/impala.py",
           "truncated_only = rollout.truncated.to(rewards.dtype) * (1.0 - terminated)",
           "truncated_only = rollout.truncated.to(rewards.dtype)", (WIRING, "tests/algos/test_impala.py"),
           "IMPALA: a step both terminated and truncated bootstraps"),
    Mutant("algos", "rlrun/algos/impala.py", "clip_rho_threshold=cfg.clip_rho_threshold,\n",
           "clip_rho_threshold=None,\n", (WIRING, "tests/algos/test_impala.py"),
           "IMPALA: algo.clip_rho_threshold ignored"),
    Mutant("algos", "rlrun/algos/appo.py", "kl_coef=cfg.kl_coef if cfg.use_kl_loss else 0.0",
           "kl_coef=0.0", (WIRING, "tests/algos/test_appo.py"), "APPO: algo.use_kl_loss ignored"),
    Mutant("algos", "rlrun/algos/dqn.py", "DQNLoss(self.cfg.double_q, self.cfg.huber_delta)",
           "DQNLoss(self.cfg.double_q, None)",
           (WIRING, "tests/algos/test_dqn.py"), "DQN: algo.huber_delta ignored (squared loss)"),
    Mutant("algos", "rlrun/algos/ppo.py", "vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,",
           "vf_coef=cfg.vf_coef, ent_coef=0.0,", (WIRING, "tests/algos/test_ppo.py"), "PPO: algo.ent_coef ignored"),
    Mutant("algos", "rlrun/algos/trpo.py", "        if cfg.normalize_advantage:\n", "        if False:\n",
           (WIRING, "tests/algos/test_trpo.py"), "TRPO: algo.normalize_advantage ignored"),
    # ---------------------------------------------------------------- execution
    Mutant("execution", "rlrun/execution/learner_thread.py", "return max(0, self.max_queue - self._inbox.size())",
           "return max(0, self.max_queue - self._inbox.size() + 1)", ("tests/execution/test_learner_thread.py",),
           "learner thread reports one free slot too many"),
    Mutant("execution", "rlrun/execution/learner_thread.py", "self.updates % self.publish_every == 0",
           "self.updates % self.publish_every == 1", ("tests/execution/test_learner_thread.py",),
           "learner thread publishes one update late"),
    Mutant("execution", "rlrun/execution/sample_batch.py",
           "rows(self.terminated), rows(self.truncated))", "rows(self.truncated), rows(self.terminated))",
           ("tests/execution/test_sample_batch.py",), "transitions swap terminated and truncated"),
]


def copy_tree(dest: Path) -> None:
    """The package, its config tree and tests, importable from ``dest`` (``rlrun.conf`` is ``conf/``, as the
    package-dir mapping of pyproject.toml ships it)."""
    for name in ("rlrun", "tests", "conf", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    (dest / "rlrun" / "conf").symlink_to(Path("..") / "conf")


def run_tests(dest: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float]:
    """``passed``, ``failed`` or ``timeout``, and the seconds it took."""
    env = {**os.environ, "PYTHONPATH": str(dest), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-k", DESELECT, *tests]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    if proc.returncode == 5:
        raise SystemExit(f"no tests selected in {tests}: fix the mutant's test files")
    return ("passed" if proc.returncode == 0 else "failed"), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated packages (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run (a hang counts as caught)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    only = {p for p in args.only.split(",") if p}
    mutants = [m for m in MUTANTS if not only or m.package in only]

    with tempfile.TemporaryDirectory(prefix="rlrun-mutation-") as tmp:
        dest = Path(tmp)
        copy_tree(dest)
        for m in mutants:  # every mutant names its text exactly once, so a moved line is reported, not skipped
            count = (dest / m.path).read_text().count(m.old)
            if count != 1:
                raise SystemExit(f"{m.path}: {m.bug}: its text occurs {count} times (must be once)")
        files = tuple(sorted({t for m in mutants for t in m.tests}))
        outcome, seconds = run_tests(dest, files, args.timeout)
        if outcome != "passed":
            raise SystemExit(f"the unmutated copy does not pass {files} ({outcome}): no score")
        print(f"unmutated: {len(files)} test files pass ({seconds:.0f} s)", flush=True)

        results = []
        for m in mutants:
            path = dest / m.path
            original = path.read_text()
            path.write_text(original.replace(m.old, m.new))
            try:
                outcome, seconds = run_tests(dest, m.tests, args.timeout)
            finally:
                path.write_text(original)
            caught = outcome != "passed"
            results.append({"package": m.package, "path": m.path, "bug": m.bug, "tests": list(m.tests),
                            "outcome": outcome, "caught": caught, "seconds": round(seconds, 1)})
            print(f"{'caught  ' if caught else 'SURVIVED'} {m.package:<10} {m.bug} ({seconds:.0f} s)", flush=True)

    by_package: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        by_package[r["package"]].append(r["caught"])
    scores = {p: {"caught": sum(c), "mutants": len(c), "score": round(100.0 * sum(c) / len(c), 1)}
              for p, c in by_package.items()}
    print("\npackage     caught/mutants  score")
    for p, s in scores.items():
        print(f"{p:<11} {s['caught']:>2}/{s['mutants']:<2}            {s['score']:5.1f}%")
    if args.json is not None:
        args.json.write_text(json.dumps({"command": "python -m benchmarks.mutation" + (
            f" --only {args.only}" if args.only else ""), "scores": scores, "mutants": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
