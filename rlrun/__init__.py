"""rlrun: a reinforcement-learning experiment runner (Hydra configs, PyTorch components, local and Ray executors)."""

from rlrun.registry import register, registry

__version__ = "0.1.0"
__all__ = ["register", "registry", "__version__"]
