"""Components (RLgraph's idea in PyTorch): networks (torsos, the actor-critic network, the Q-network), heads,
distributions, memories, losses, optimizer modules.

Every component is an ``nn.Module`` with declared API methods that builds itself from input spaces
(``rlrun.components.base``) and can be built and called alone with ``ComponentTest``.
"""

from rlrun.components.base import Component, ComponentBuildError, Port, api, trace

__all__ = ["Component", "ComponentBuildError", "Port", "api", "trace"]
