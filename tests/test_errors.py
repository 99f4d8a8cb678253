"""rlrun.errors: the error classes' exit codes and how a library's error is quoted inside rlrun's one-line messages."""

from __future__ import annotations

from rlrun.errors import CheckpointError, ConfigError, RlrunError, one_line


def test_exit_codes() -> None:
    assert (RlrunError.exit_code, ConfigError.exit_code, CheckpointError.exit_code) == (1, 2, 2)


def test_one_line_joins_whitespace_cuts_long_messages_and_names_the_type_when_empty() -> None:
    assert one_line(ValueError("bad\n   value\tthere")) == "bad value there"
    long = one_line(RuntimeError("x" * 500), limit=20)
    assert long == "x" * 20 + "..."
    assert one_line(RuntimeError("y" * 20), limit=20) == "y" * 20  # at the limit: nothing cut
    assert one_line(KeyError()) == "KeyError" and one_line(OSError("  \n ")) == "OSError"
