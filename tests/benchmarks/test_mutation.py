"""benchmarks/mutation.py stays runnable as the code moves: every mutant's text occurs exactly once in its file,
changes it, and names test files that exist (the benchmark itself runs on demand, not here)."""

from __future__ import annotations

from benchmarks.mutation import MUTANTS, ROOT


def test_every_mutant_applies_to_the_current_source_and_names_existing_tests() -> None:
    assert {m.package for m in MUTANTS} == {"ops", "components", "algos", "execution"}
    for m in MUTANTS:
        assert m.path.startswith(f"rlrun/{m.package}/"), m.bug
        assert (ROOT / m.path).read_text().count(m.old) == 1, f"{m.path}: {m.bug}"
        assert m.old != m.new, m.bug
        assert m.tests and all((ROOT / t).is_file() for t in m.tests), m.bug
