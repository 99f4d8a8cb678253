"""rlrun's Adam (rlrun/components/optimizers/adam.py) against torch.optim.Adam: the same parameters after every step,
fused and not, with a learning rate changed between steps as the schedules do; state dicts that load into either;
and building and stepping it leaves torch._dynamo unimported, which is the reason it exists."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from rlrun.components.optimizers.adam import Adam


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))


def _train(net: nn.Module, opt: object, steps: int, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for i in range(steps):
        x = torch.randn(32, 5, generator=g)
        opt.zero_grad(set_to_none=True)  # type: ignore[attr-defined]
        net(x).pow(2).mean().backward()
        opt.param_groups[0]["lr"] = 1e-2 * (1 - i / (2 * steps))  # type: ignore[attr-defined]
        opt.step()  # type: ignore[attr-defined]


@pytest.mark.parametrize("fused", [False, True])
def test_steps_equal_torch_optim_adam(fused: bool) -> None:
    ours, theirs = _net(0), _net(0)
    _train(ours, Adam(ours.parameters(), lr=1e-2, eps=1e-5, weight_decay=1e-3, fused=fused), 25)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=1e-2, eps=1e-5, weight_decay=1e-3, fused=fused), 25)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("fused", [False, True])
def test_state_dicts_load_into_either(fused: bool) -> None:
    """Ten steps with one optimizer, its state loaded into the other kind, ten more: equal to twenty with one."""
    whole = _net(0)
    _train(whole, torch.optim.Adam(whole.parameters(), lr=1e-2, fused=fused), 20)
    for first, second in ((Adam, torch.optim.Adam), (torch.optim.Adam, Adam)):
        net = _net(0)
        opt = first(net.parameters(), lr=1e-2, fused=fused)
        _train(net, opt, 10)
        saved = opt.state_dict()
        assert saved["param_groups"][0].keys() == torch.optim.Adam(_net(0).parameters()).state_dict()[
            "param_groups"][0].keys()
        resumed = second(net.parameters(), lr=1e-2, fused=fused)
        resumed.load_state_dict(saved)
        _train(net, resumed, 10, seed=2)
        ref = _net(0)
        ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-2, fused=fused)
        _train(ref, ref_opt, 10)
        _train(ref, ref_opt, 10, seed=2)
        for a, b in zip(net.parameters(), ref.parameters(), strict=True):
            assert torch.equal(a, b), (first.__name__, second.__name__)


def test_a_state_of_other_parameters_is_refused() -> None:
    opt = Adam(_net(0).parameters())
    other = torch.optim.Adam(nn.Linear(2, 2).parameters()).state_dict()
    with pytest.raises(ValueError, match="other parameters"):
        opt.load_state_dict(other)


def test_building_and_stepping_it_does_not_import_torch_dynamo() -> None:
    code = ("import sys, torch\nfrom rlrun.components.optimizers.adam import Adam\n"
            "p = torch.nn.Parameter(torch.ones(3)); opt = Adam([p], fused=True)\n"
            "p.grad = torch.ones(3); opt.step(); opt.zero_grad(); opt.load_state_dict(opt.state_dict())\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
