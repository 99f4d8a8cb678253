"""rlrun: a reinforcement-learning experiment runner (Hydra configs, PyTorch components, local and Ray executors)."""

from rlrun.registry import register, registry

__version__ = "0.1.0"
__all__ = ["make_agent", "register", "registry", "__version__"]


def __getattr__(name: str):  # noqa: ANN202 - lazily: `import rlrun` stays free of torch
    if name == "make_agent":
        from rlrun.agent import make_agent  # lazily: `import rlrun` (the CLI, plugins) stays free of torch

        return make_agent
    raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
