"""Hydra discovers this plugin and adds the config directories of rlrun plugins (registry.config_paths)."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class RlrunPluginSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from rlrun.registry import registry

        registry.load_plugins()
        for path in registry.config_paths:
            search_path.append(provider="rlrun-plugin", path=path)
