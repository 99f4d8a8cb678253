"""rlrun.errors: the error classes' exit codes and how a library's error is quoted inside rlrun's one-line messages."""

from __future__ import annotations

from rlrun.errors import CheckpointError, ConfigError, RlrunError, close_matches, did_you_mean, one_line


def test_exit_codes() -> None:
    assert (RlrunError.exit_code, ConfigError.exit_code, CheckpointError.exit_code) == (1, 2, 2)


def test_one_line_joins_whitespace_cuts_long_messages_and_names_the_type_when_empty() -> None:
    assert one_line(ValueError("bad\n   value\tthere")) == "bad value there"
    long = one_line(RuntimeError("x" * 500), limit=20)
    assert long == "x" * 20 + "..."
    assert one_line(RuntimeError("y" * 20), limit=20) == "y" * 20  # at the limit: nothing cut
    assert one_line(KeyError()) == "KeyError" and one_line(OSError("  \n ")) == "OSError"


def test_close_matches_by_spelling_and_by_initials() -> None:
    keys = ["lr", "num_epochs", "name", "gamma", "env_steps", "ent_coef"]
    assert close_matches("evn", ["algo", "env", "device"]) == ["env"]  # a transposition
    assert close_matches("learning_rate", keys) == ["lr"]  # l(earning) r(ate): initials of the typed words
    assert close_matches("ne", keys)[0] == "num_epochs"  # and of a key's words
    assert close_matches("gamme", keys)[0] == "gamma"
    assert close_matches("zzz", keys) == [] and did_you_mean("zzz", keys) == ""
    assert did_you_mean("env_step", keys) == " Did you mean env_steps?"
