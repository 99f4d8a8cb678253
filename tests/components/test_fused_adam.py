"""FusedAdam (rlrun/components/optimizers/fused_adam.py) against torch.optim.Adam(fused=True): the same updates bit
for bit, the same state_dict, checkpoints that load into either, and no torch._dynamo import."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn

from rlrun.components.optimizers import GradientStep
from rlrun.components.optimizers.fused_adam import FusedAdam, supports


def _pair(seed: int = 0) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(seed)
    a = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    b = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    b.load_state_dict(a.state_dict())
    return a, b


def _backward(net: nn.Module, x: torch.Tensor, skip_last_bias: bool = False) -> None:
    net.zero_grad(set_to_none=True)
    net(x).pow(2).mean().backward()
    if skip_last_bias:  # a parameter without a gradient this step: Adam leaves it (and its state) alone
        net[2].bias.grad = None


SETTINGS = [dict(), dict(betas=(0.8, 0.95), eps=1e-5), dict(weight_decay=0.1), dict(amsgrad=True),
            dict(maximize=True)]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s) or "defaults")
def test_updates_are_bit_identical_to_torch_fused_adam(settings: dict):
    ours_net, torch_net = _pair()
    ours = FusedAdam(list(ours_net.parameters()), lr=1e-2, fused=True, **settings)
    ref = torch.optim.Adam(list(torch_net.parameters()), lr=1e-2, fused=True, **settings)
    gen = torch.Generator().manual_seed(1)
    for step in range(12):
        x = torch.randn(32, 4, generator=gen)
        for net, opt in ((ours_net, ours), (torch_net, ref)):
            _backward(net, x, skip_last_bias=step % 3 == 1)
            if step == 6:  # a learning-rate schedule writes the group's lr between steps
                opt.param_groups[0]["lr"] = 3e-3
            opt.step()
        for p, q in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
            assert torch.equal(p, q), step
    assert ours_net[2].bias.data.ne(_pair()[0][2].bias.data).any()  # the parameters did move
    mine, theirs = ours.state_dict(), ref.state_dict()
    assert mine["param_groups"] == theirs["param_groups"]
    assert mine["state"].keys() == theirs["state"].keys()
    for i, values in theirs["state"].items():
        assert mine["state"][i].keys() == values.keys()
        for key, value in values.items():
            assert torch.equal(mine["state"][i][key], value) and mine["state"][i][key].dtype == value.dtype, key


@pytest.mark.parametrize("direction", ["torch_to_ours", "ours_to_torch"])
def test_a_checkpoint_of_either_continues_in_the_other(direction: str):
    """Checkpoints written before FusedAdam existed hold torch.optim.Adam's state: they must load, and vice versa."""
    first_net, second_net = _pair()
    first_cls, second_cls = (torch.optim.Adam, FusedAdam) if direction == "torch_to_ours" else (FusedAdam,
                                                                                                torch.optim.Adam)
    first = first_cls(list(first_net.parameters()), lr=1e-2, fused=True, eps=1e-5)
    gen = torch.Generator().manual_seed(2)
    for _ in range(5):
        _backward(first_net, torch.randn(8, 4, generator=gen))
        first.step()
    second_net.load_state_dict(first_net.state_dict())
    second = second_cls(list(second_net.parameters()), lr=0.5, fused=True, eps=1e-5)
    second.load_state_dict(copy.deepcopy(first.state_dict()))  # as from a file: no tensors shared with `first`
    assert second.param_groups[0]["lr"] == 1e-2  # the saved group settings win, the params stay the live ones
    assert second.param_groups[0]["params"][0] is next(second_net.parameters())
    for _ in range(5):
        x = torch.randn(8, 4, generator=gen)
        for net, opt in ((first_net, first), (second_net, second)):
            _backward(net, x)
            opt.step()
    for p, q in zip(first_net.parameters(), second_net.parameters(), strict=True):
        assert torch.equal(p, q)


def test_a_state_dict_of_another_shape_is_refused():
    net, other = _pair()
    opt = FusedAdam(list(net.parameters()), fused=True)
    smaller = FusedAdam(list(other.parameters())[:2], fused=True)
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(smaller.state_dict())


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none: bool):
    net, _ = _pair()
    opt = FusedAdam(list(net.parameters()), fused=True)
    _backward(net, torch.randn(3, 4))
    opt.zero_grad(set_to_none=set_to_none)
    for p in net.parameters():
        assert (p.grad is None) if set_to_none else (p.grad is not None and not p.grad.any())


def test_supports_only_what_it_implements():
    params = list(nn.Linear(2, 2).parameters())
    assert supports(params, fused=True, eps=1e-5, betas=(0.9, 0.99))
    assert not supports(params)  # not asked for the fused kernel
    assert not supports(params, fused=True, foreach=True)  # a setting it does not implement
    assert not supports([], fused=True)
    assert not supports([torch.zeros(2, dtype=torch.int64)], fused=True)
    with pytest.raises(ValueError, match="floating-point"):
        FusedAdam([torch.zeros(2, dtype=torch.int64)], fused=True)
    with pytest.raises(ValueError, match="betas"):
        FusedAdam(params, betas=(1.0, 0.9), fused=True)


def test_gradient_step_picks_it_and_torch_adam_otherwise():
    net, _ = _pair()
    assert isinstance(GradientStep("adam", fused=True).attach(net.parameters()).optimizer, FusedAdam)
    assert type(GradientStep("adam").attach(net.parameters()).optimizer) is torch.optim.Adam
    assert type(GradientStep("adam", fused=True, foreach=False).attach(net.parameters()).optimizer) is torch.optim.Adam


def test_a_run_of_gradient_steps_does_not_import_torch_dynamo():
    """The reason FusedAdam exists: torch.optim imports torch._dynamo (0.7-1 s) on an optimizer's first use."""
    code = (
        "import sys, torch\n"
        "from rlrun.components.optimizers import GradientStep\n"
        "net = torch.nn.Linear(4, 2)\n"
        "step = GradientStep('adam', lr=1e-3, max_grad_norm=0.5, fused=True, eps=1e-5).attach(net.parameters())\n"
        "for _ in range(3):\n"
        "    step.step(lambda: (net(torch.randn(5, 4)).pow(2).mean(), {}))\n"
        "step.set_extra_state(step.get_extra_state())\n"
        "assert step.optimizer.state_dict()['state'][0]['step'].item() == 3\n"
        "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
