"""One registry for every kind of named thing rlrun builds from config.

Kinds: ``algo``, ``env``, ``executor``, ``logger``, and the component kinds a config names: ``network`` (the
torso, ``algo.network``) and ``optimizer`` (TRPO's ``algo.policy_update``). A config node names an entry
(``algo.name: dqn``); the registry turns that name into the class or function that builds it. Only what a config
can name is registered: a component the algorithms build from its class is imported, not looked up.

Entries may be given as ``"module:attribute"`` strings so that registering costs no import: ``rlrun --help`` stays
quick even though torch, ray and mlflow sit behind the entries.

Third-party packages add entries through the ``rlrun.plugins`` entry-point group: the entry point names a module
(or a callable taking the registry). Loading it registers its entries; a module attribute ``CONFIG_PATH`` (for
example ``"pkg://my_package.conf"``) adds a config directory to Hydra's search path, so the plugin's YAML files
are reachable as ``algo=<its name>``.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

PLUGIN_GROUP = "rlrun.plugins"


class RegistryError(LookupError):
    """A name that is not registered (the message lists the registered names)."""


@dataclass
class Entry:
    kind: str
    name: str
    target: Any  # the object, or a "module:attribute" string resolved on first use
    schema: Any = None  # the dataclass config schema of this entry, or a "module:attribute" string
    doc: str = ""

    def load(self) -> Any:
        if isinstance(self.target, str):
            self.target = import_string(self.target)
        return self.target

    def load_schema(self) -> Any:
        if isinstance(self.schema, str):
            self.schema = import_string(self.schema)
        return self.schema


def import_string(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


class Registry:
    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {}
        self._plugins_loaded = False
        self.config_paths: list[str] = []  # Hydra search-path entries contributed by plugins

    def register(self, kind: str, name: str, target: Any = None, *, schema: Any = None, doc: str = "",
                 replace: bool = False) -> Any:
        """Register ``target`` under ``kind``/``name``; without a target, return a decorator."""
        if target is None:
            def decorator(obj: Any) -> Any:
                self.register(kind, name, obj, schema=schema, doc=doc, replace=replace)
                return obj
            return decorator
        table = self._entries.setdefault(kind, {})
        if name in table and not replace and table[name].target is not target:
            raise RegistryError(f"{kind} '{name}' is registered already; pass replace=True to override it.")
        table[name] = Entry(kind, name, target, schema, doc)
        return target

    def entry(self, kind: str, name: str) -> Entry:
        table = self._entries.get(kind, {})
        if name not in table:
            self.load_plugins()
            table = self._entries.get(kind, {})
        if name not in table:
            raise RegistryError(self._miss_message(kind, name))
        return table[name]

    def get(self, kind: str, name: str) -> Any:
        """The registered object (imported on first use)."""
        return self.entry(kind, name).load()

    def schema(self, kind: str, name: str) -> Any:
        return self.entry(kind, name).load_schema()

    def build(self, kind: str, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Build the entry ``kind``/``name`` with ``args`` and ``kwargs`` (positional-only ``kind`` and ``name``, so a
        component's own ``name=`` keyword passes through)."""
        return self.get(kind, name)(*args, **kwargs)

    def names(self, kind: str) -> list[str]:
        self.load_plugins()
        return sorted(self._entries.get(kind, {}))

    def kinds(self) -> list[str]:
        self.load_plugins()
        return sorted(self._entries)

    def _miss_message(self, kind: str, name: str) -> str:
        known = sorted(self._entries.get(kind, {}))
        if not known:
            return f"no {kind} is registered (asked for '{name}'); known kinds: {', '.join(sorted(self._entries))}"
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {kind} '{name}'.{hint} Registered {kind} names: {', '.join(known)}."

    def load_plugins(self) -> None:
        """Import every ``rlrun.plugins`` entry point once."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=PLUGIN_GROUP):
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type(importlib)):
                obj(self)
            path = getattr(obj, "CONFIG_PATH", None)
            if path and path not in self.config_paths:
                self.config_paths.append(path)


registry = Registry()
register = registry.register


def _register_builtins(r: Registry) -> None:
    # Algorithms: the agent-and-plan class and its config schema.
    r.register("algo", "dqn", "rlrun.algos.dqn:DQN", schema="rlrun.algos.dqn_config:DQNConfig",
               doc="Double DQN with a target network and uniform replay")
    r.register("algo", "ppo", "rlrun.algos.ppo:PPO", schema="rlrun.algos.ppo_config:PPOConfig",
               doc="PPO: clipped surrogate on GAE advantages, minibatch epochs (Schulman et al. 2017)")
    r.register("algo", "a2c", "rlrun.algos.a2c:A2C", schema="rlrun.algos.a2c_config:A2CConfig",
               doc="A2C: synchronous advantage actor-critic (Mnih et al. 2016)")
    r.register("algo", "impala", "rlrun.algos.impala:IMPALA", schema="rlrun.algos.impala_config:IMPALAConfig",
               doc="IMPALA: asynchronous actors, V-trace actor-critic learner (Espeholt et al. 2018)")
    r.register("algo", "appo", "rlrun.algos.appo:APPO", schema="rlrun.algos.appo_config:APPOConfig",
               doc="APPO: IMPALA's asynchronous plan with PPO's clipped surrogate on V-trace advantages")
    r.register("algo", "sac", "rlrun.algos.sac:SAC", schema="rlrun.algos.sac_config:SACConfig",
               doc="SAC: soft actor-critic, twin Q, learned temperature; Box actions (Haarnoja et al. 2018)")
    r.register("algo", "td3", "rlrun.algos.td3:TD3", schema="rlrun.algos.td3_config:TD3Config",
               doc="TD3: twin critics, target policy smoothing, delayed actor; Box actions (Fujimoto et al. 2018)")
    r.register("algo", "ddpg", "rlrun.algos.ddpg:DDPG", schema="rlrun.algos.ddpg_config:DDPGConfig",
               doc="DDPG: deterministic actor, one critic, Gaussian noise; Box actions (Lillicrap et al. 2016)")
    r.register("algo", "trpo", "rlrun.algos.trpo:TRPO", schema="rlrun.algos.trpo_config:TRPOConfig",
               doc="TRPO: natural-gradient step in a KL trust region + line search (Schulman et al. 2015)")
    r.register("algo", "apex", "rlrun.algos.apex:ApeX", schema="rlrun.algos.apex_config:ApexConfig",
               doc="Ape-X DQN: per-actor epsilons, actor-side priorities, sharded prioritised replay (Horgan 2018)")
    r.register("algo", "pqn", "rlrun.algos.pqn:PQN", schema="rlrun.algos.pqn_config:PQNConfig",
               doc="PQN: vectorised Q(lambda) with a LayerNorm Q-network, no replay or target (Gallici et al. 2024)")
    r.register("algo", "c51", "rlrun.algos.c51:C51", schema="rlrun.algos.c51_config:C51Config",
               doc="C51: DQN on a categorical return distribution (Bellemare et al. 2017)")
    r.register("algo", "qrdqn", "rlrun.algos.qrdqn:QRDQN", schema="rlrun.algos.qrdqn_config:QRDQNConfig",
               doc="QR-DQN: DQN on quantiles of the return, quantile Huber loss (Dabney et al. 2018)")
    r.register("algo", "rainbow", "rlrun.algos.rainbow:Rainbow", schema="rlrun.algos.rainbow_config:RainbowConfig",
               doc="Rainbow: C51 + noisy nets + dueling + double Q + prioritised replay + n-step (Hessel et al. 2018)")
    r.register("algo", "bc", "rlrun.algos.bc:BC", schema="rlrun.algos.bc_config:BCConfig",
               doc="BC: behaviour cloning from a dataset (data=minari), discrete or Box actions; offline")
    r.register("algo", "iql", "rlrun.algos.iql:IQL", schema="rlrun.algos.iql_config:IQLConfig",
               doc="IQL: implicit Q-learning from a dataset, expectile value, advantage-weighted policy; Box actions, "
                   "offline (Kostrikov et al. 2021)")
    r.register("algo", "cql", "rlrun.algos.cql:CQL", schema="rlrun.algos.cql_config:CQLConfig",
               doc="CQL: conservative Q-learning from a dataset on SAC's critics; Box actions, offline "
                   "(Kumar et al. 2020)")
    r.register("algo", "multiagent", "rlrun.algos.multiagent:MultiAgent",
               schema="rlrun.algos.multiagent_config:MultiAgentConfig",
               doc="several policies in one multi-agent env, each trained by its own algorithm (env=pettingzoo)")
    # Environments: a factory of (vector env maker, spaces) from the env config node.
    r.register("env", "gym", "rlrun.envs.gym_env:GymEnvFactory", schema="rlrun.config:GymEnvConfig",
               doc="any registered gymnasium id (classic control, box2d, ...)")
    r.register("env", "mujoco", "rlrun.envs.mujoco_env:MujocoEnvFactory", schema="rlrun.config:GymEnvConfig",
               doc="a gymnasium MuJoCo continuous-control task (env=mujoco env.id=HalfCheetah-v5)")
    r.register("env", "atari", "rlrun.envs.atari:AtariEnvFactory", schema="rlrun.config:AtariEnvConfig",
               doc="an ALE Atari game under the DeepMind/IMPALA protocol (env=pong, env=atari env.game=...)")
    r.register("env", "minatar", "rlrun.envs.minatar_env:MinAtarEnvFactory", schema="rlrun.config:MinAtarEnvConfig",
               doc="a MinAtar game, 10x10 object channels (env=minatar env.id=Breakout; Young & Tian 2019)")
    r.register("env", "pettingzoo", "rlrun.envs.pettingzoo_env:PettingZooEnvFactory",
               schema="rlrun.config:PettingZooEnvConfig",
               doc="a PettingZoo multi-agent env, parallel API (env=pettingzoo env.id=mpe2.simple_spread_v3)")
    # Executors: where the plan's worker set lives.
    r.register("executor", "local", "rlrun.execution.local:LocalExecutor",
               schema="rlrun.config:LocalExecutorConfig", doc="in-process worker set")
    r.register("executor", "ray", "rlrun.execution.ray_executor:RayExecutor",
               schema="rlrun.config:RayExecutorConfig", doc="rollout workers as Ray actors, the learner in the driver")
    # Logger sinks.
    r.register("logger", "tensorboard", "rlrun.logging.tensorboard:TensorBoardSink",
               schema="rlrun.config:TensorBoardConfig")
    r.register("logger", "mlflow", "rlrun.logging.mlflow_sink:MLflowSink",
               schema="rlrun.config:MLflowConfig")
    r.register("logger", "wandb", "rlrun.logging.wandb_sink:WandbSink",
               schema="rlrun.config:WandbConfig")
    r.register("logger", "console", "rlrun.logging.console:ConsoleSink",
               schema="rlrun.config:ConsoleConfig")
    # Components a config names: the torsos (algo.network; lstm_core is there to be refused with a reason, a
    # recurrent core being the algorithm's own switch, algo.recurrent) and the policy updates of TRPO
    # (algo.policy_update, which builds multi_step on a gradient_step). The algorithms build their other
    # components from their classes.
    c = "rlrun.components."
    for kind, name, target in [
        ("network", "mlp", "networks:MLP"),
        ("network", "nature_cnn", "networks:NatureCNN"),
        ("network", "impala_resnet", "networks:ImpalaResNet"),
        ("network", "minatar_cnn", "networks:MinAtarCNN"),
        ("network", "minatar_conv", "networks:MinAtarConv"),
        ("network", "multi_input", "networks:MultiInputTorso"),
        ("network", "lstm_core", "networks:LSTMCore"),
        ("optimizer", "gradient_step", "optimizers:GradientStep"),
        ("optimizer", "multi_step", "optimizers:MultiStep"),
        ("optimizer", "natural_gradient", "optimizers:NaturalGradient"),
        ("optimizer", "trpo", "optimizers:TRPOStep"),
        ("optimizer", "evolution_strategies", "optimizers:EvolutionStrategies"),
    ]:
        r.register(kind, name, c + target)


_register_builtins(registry)
