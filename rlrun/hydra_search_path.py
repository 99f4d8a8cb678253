"""Adds rlrun's schemas (the config source ``rlrun.config.SchemaSource``) and the config directories of rlrun plugins
(``CONFIG_PATH`` of ``rlrun.plugins`` entry points) to Hydra's search path. Registered explicitly by the CLI: Hydra's
own discovery (the ``hydra_plugins`` namespace package) does not see packages installed in editable mode."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from rlrun.registry import registry

SCHEMA_SOURCE = "rlrun-schema://"  # the typed schemas, rlrun.config.SchemaSource


class RlrunPluginSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="rlrun", path=SCHEMA_SOURCE)
        registry.load_plugins()
        for path in registry.config_paths:
            search_path.append(provider="rlrun-plugin", path=path)


def register() -> None:
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()
    if RlrunPluginSearchPath not in plugins.discover(SearchPathPlugin):
        plugins.register(RlrunPluginSearchPath)
