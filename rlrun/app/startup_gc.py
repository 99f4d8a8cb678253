"""Python's cyclic garbage collector during the ``rlrun`` command's start-up: paused while the process imports
torch, Hydra and OmegaConf, composes the config and builds the run, then the objects made so far frozen out of later
collections (``gc.freeze``) and collection resumed.

Why: torch's import alone leaves hundreds of thousands of long-lived objects, and every full collection walks all
of them; a CartPole run's start-up paid several such collections. Once frozen they are never walked again, so later
full collections cost only what the run itself keeps. The price: the cyclic garbage of the start-up (a few MiB for
``rlrun algo=ppo``) is kept until the process exits instead of being collected; at exit the objects are unfrozen
(``atexit``), so the interpreter's last collections free them and run their finalizers (without that, an ALE env
made at start-up and still referenced from a cycle was never finalized: nanobind reported it as leaked).

Only the ``rlrun`` command pauses (``rlrun.app.cli``); ``run_experiment`` resumes once the plan is built, a sweep's
driver when the sweep starts. :func:`resume_collection` does nothing where nothing was paused, so a program that calls
``run_experiment`` itself keeps its own collector settings.
"""

from __future__ import annotations

import atexit
import gc

_paused = False


def pause_collection() -> None:
    """Stop automatic collection until :func:`resume_collection` (where it was enabled)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collection() -> None:
    """Freeze the objects made so far out of later collections and re-enable collection, once, where
    :func:`pause_collection` paused it."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
        atexit.register(gc.unfreeze)  # the interpreter's last collections see them again: their finalizers run
