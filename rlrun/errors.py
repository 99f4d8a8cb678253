"""Errors that rlrun reports to a user as one readable message (no traceback) with a non-zero exit code."""


class RlrunError(Exception):
    """A problem the user can fix; the message names the problem and the fix."""

    exit_code = 1


class ConfigError(RlrunError):
    """Bad configuration or overrides, found before anything starts (exit code 2)."""

    exit_code = 2


class CheckpointError(RlrunError):
    """A checkpoint that cannot be read or does not fit the run."""

    exit_code = 2


class RunDirectoryBusy(RlrunError):
    """Another live process writes the run directory (rlrun/app/run_lock.py)."""

    exit_code = 2


class PlacementError(RlrunError):
    """A Ray actor that died (with its node) could not be started again: no node of the cluster had room for it
    in time (``executor.restart_timeout_s``). The run stops with a final checkpoint of the learner."""


def one_line(e: BaseException, limit: int = 200) -> str:
    """``e``'s message on one line (whitespace runs, newlines included, become one space), cut to ``limit``
    characters with ``...``; the exception's type name when it has no message: how rlrun quotes an error from a
    library inside its own one-line messages."""
    text = " ".join(str(e).split())
    if not text:
        return type(e).__name__
    return text[:limit] + ("..." if len(text) > limit else "")


def close_matches(word: str, candidates: "list[str]", n: int = 3) -> "list[str]":
    """The candidates a user most likely meant by ``word``: similar spellings (``evn`` -> ``env``), and
    abbreviations by the words' initials either way (``learning_rate`` -> ``lr``, ``ne`` -> ``num_envs``)."""
    import difflib

    def initials(name: str) -> str:
        return "".join(part[0] for part in name.split("_") if part)

    out = [c for c in candidates if ("_" in word and initials(word) == c) or ("_" in c and initials(c) == word)]
    out += [c for c in difflib.get_close_matches(word, candidates, n=n, cutoff=0.6) if c not in out]
    return out[:n]


def did_you_mean(word: str, candidates: "list[str]") -> str:
    """`` Did you mean a or b?`` for :func:`close_matches`, or nothing."""
    close = close_matches(word, candidates)
    return f" Did you mean {' or '.join(close)}?" if close else ""

