"""One virtual environment per peer, made once and cached: each peer runs its own pinned versions beside rlrun's
without sharing a package with it (CleanRL's scripts were written for gymnasium 0.29, Sample Factory pins it).
torch is installed first and exactly as rlrun's (``torch==2.13.0``, the CPU wheel), so no peer pulls CUDA packages
and every contender runs the same kernels.

A venv lives in ``$RLRUN_PEERS_DIR`` (default ``~/.cache/rlrun/peers``) under ``<peer>-<hash of its spec>``; a
``ready.json`` there (written last, with ``pip freeze``) marks it complete, so an interrupted install is redone
and a changed spec gets a new venv. An install that fails is reported with pip's last line and the peer is
skipped with that reason: never faked.

CleanRL is run as published: its single-file scripts at a pinned commit, fetched once from GitHub into the cache
(checked against their sha256), run unchanged with their own command-line flags.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

TORCH = "torch==2.13.0"
# Extra pip arguments for the torch install, e.g. "--index-url https://download.pytorch.org/whl/cpu" where PyPI's
# torch would bring CUDA packages (CI runners); here pip's find-links already holds the CPU wheel.
TORCH_PIP_ARGS_ENV = "RLRUN_PEERS_TORCH_PIP_ARGS"


@dataclass(frozen=True)
class Peer:
    name: str
    packages: tuple[str, ...]
    version_of: str  # the distribution whose version names the peer in results
    scripts: dict[str, str] = field(default_factory=dict)  # path in the peer's repository -> sha256
    script_url: str = ""


CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"  # vwxyzjn/cleanrl master, 2026-04-20

PEERS: dict[str, Peer] = {p.name: p for p in (
    # ale-py and OpenCV for the Pong tasks (SB3's AtariWrapper resizes with cv2): the same emulator as rlrun's;
    # gymnasium's mujoco extra for the mujoco_ppo task (HalfCheetah-v5 under SB3's gymnasium 1.x; gymnasium.envs.mujoco
    # imports imageio and packaging too), with the same engine version as rlrun's.
    Peer("sb3", ("stable-baselines3==2.9.2", "ale-py==0.12.1", "opencv-python-headless==5.0.0.93", "gymnasium[mujoco]",
                 "mujoco==4.0.0"),
         "stable-baselines3"),
    # CleanRL's pyproject pins gymnasium 0.29.1 (numpy 1). Its mujoco extra (mujoco<=2.3.3, imageio>=2.14.1,<3;
    # gymnasium 0.29.1 wants mujoco>=2.3.3) for the mujoco_ppo and mujoco_td3 tasks: ppo_continuous_action.py and
    # td3_continuous_action.py on HalfCheetah-v4 (gymnasium 0.29 has no v5 tasks).
    Peer("cleanrl", ("gymnasium==0.29.1", "numpy<2", "tyro>=0.5.10", "tensorboard>=2.10", "mujoco==2.3.3",
                     "imageio>=2.14.1,<3"),
         "gymnasium",
         scripts={"cleanrl/ppo_continuous_action.py":
                      "326dd8678bf9cc51abec833eb551ef2409a3804d604b689e1f0a084eca41f655",
                  # the mujoco_td3 task; the script imports its replay buffer from cleanrl_utils
                  "cleanrl/td3_continuous_action.py":
                      "5a5bd45b907360cd6a11c40ad60786f9b8b9684075a945b265f84ddf1263f909",
                  "cleanrl_utils/buffers.py":
                      "b43d54020783ac53f7d23fe7c0ed72aff20e1f377a633d134d66eb9bdbece4b8"},
         script_url=f"https://raw.githubusercontent.com/vwxyzjn/cleanrl/{CLEANRL_COMMIT}/{{name}}"),
    # TorchRL 0.14.1 (its newest release) with rlrun's gymnasium; its wheel's C++ extension (torchrl._torchrl:
    # prioritized-replay segment trees and a few ops) was built against another torch and does not load under
    # torch 2.13.0 ("undefined symbol: _ZN5torch8autograd13_wrap_outputs..."); torchrl loads it lazily, and its MuJoCo
    # PPO example (GAE's vectorised torch path) never calls it.
    # gymnasium's mujoco extra and rlrun's engine version for the mujoco_ppo task (HalfCheetah-v5).
    Peer("torchrl", ("torchrl==0.14.1", "gymnasium[mujoco]==1.4.0", "mujoco==4.0.0"), "torchrl"),
    # Sample Factory 2.1.1 (its last release) pins gymnasium<1.0 (0.29.1); under gymnasium 0.29 ale-py 0.12 does not
    # register its ids (gymnasium.error.NameNotFound: Environment PongNoFrameskip doesn't exist), ale-py 0.9.0 does.
    Peer("sample_factory", ("sample-factory==2.1.1", "ale-py==0.9.0", "opencv-python-headless==4.10.0.84"),
         "sample-factory"),
)}


def peers_dir() -> Path:
    return Path(os.environ.get("RLRUN_PEERS_DIR", Path.home() / ".cache" / "rlrun" / "peers"))


def venv_dir(peer: Peer) -> Path:
    spec = json.dumps([TORCH, *peer.packages, sys.version_info[:2]]).encode()
    return peers_dir() / f"{peer.name}-{hashlib.sha256(spec).hexdigest()[:10]}"


class PeerUnavailable(Exception):
    """The peer cannot run here; the message says why (pip's error, an unreachable download)."""


def ensure(peer: Peer, log=print) -> Path:  # type: ignore[no-untyped-def]
    """The python executable of ``peer``'s venv, made (torch first, then the peer's packages) when missing."""
    root = venv_dir(peer)
    python = root / "bin" / "python"
    if not (root / "ready.json").exists():
        log(f"peers: making the {peer.name} venv in {root} (once; later runs reuse it)")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
        torch_args = os.environ.get(TORCH_PIP_ARGS_ENV, "").split()
        for packages in ([TORCH, *torch_args], list(peer.packages)):
            done = subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                last = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()][-1:] or ["?"]
                raise PeerUnavailable(f"pip install {' '.join(packages)} failed in the {peer.name} venv: {last[0]}")
        freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        (root / "ready.json").write_text(json.dumps({"packages": list(peer.packages), "freeze": freeze.split()},
                                                    indent=1))
    for name in peer.scripts:
        script(peer, name)
    return python


def version(peer: Peer) -> str:
    freeze = json.loads((venv_dir(peer) / "ready.json").read_text())["freeze"]
    wanted = peer.version_of.lower().replace("_", "-")
    for line in freeze:
        name, _, ver = line.partition("==")
        if name.lower().replace("_", "-").split("[")[0] == wanted:
            return ver
    return "?"


def scripts_dir(peer: Peer) -> Path:
    """Beside the venvs, keyed by the files' hashes (a venv made again keeps them)."""
    key = hashlib.sha256(json.dumps(sorted(peer.scripts.items())).encode()).hexdigest()[:10]
    return peers_dir() / "scripts" / f"{peer.name}-{key}"


def script(peer: Peer, name: str) -> Path:
    """A published file of ``peer`` (CleanRL's), fetched once at the pinned commit into the cache
    and checked against its sha256 (a file that differs is refused: the peer runs as published or not at all)."""
    path = scripts_dir(peer) / name
    if not path.exists():
        url = peer.script_url.format(name=name)
        try:
            with urllib.request.urlopen(url, timeout=20) as response:
                data = response.read()
        except OSError as e:
            raise PeerUnavailable(f"{peer.name}: cannot fetch {url} ({e}); put the file at {path} to run it "
                                  f"offline") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != peer.scripts[name]:
        raise PeerUnavailable(f"{peer.name}: {path} is not the published file (sha256 {digest[:12]}..., expected "
                              f"{peer.scripts[name][:12]}...); delete it to fetch it again")
    return path


def main() -> None:
    """``python -m benchmarks.peers.venvs [peer ...]``: make the venvs now (the benchmark makes them when needed)."""
    for name in sys.argv[1:] or list(PEERS):
        try:
            print(f"{name}: {ensure(PEERS[name])}")
        except PeerUnavailable as e:
            print(f"{name}: unavailable: {e}")


if __name__ == "__main__":
    main()
