"""The recurrent core (rlrun/components/recurrent_core.py), the per-env-copy acting state
(rlrun/components/acting_state.py) and the recurrent actor-critic (rlrun/components/recurrent_actor_critic.py),
each built alone from spaces and checked against a naive step-by-step loop written from the equations: one step at
a time, the state of an item zeroed before a step that starts its episode (TorchBeast's AtariNet)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from rlrun import spaces as sp
from rlrun.components.acting_state import ActingState
from rlrun.components.recurrent_actor_critic import RecurrentActorCritic, add_time, drop_time
from rlrun.components.recurrent_core import RecurrentCore
from rlrun.components.testing import ComponentTest

OBS = sp.Box(-1.0, 1.0, (3,), np.float32)


def lstm_step(rnn, x, h, c):
    """i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh); c' = sig(f) c + sig(i) tanh(g); h' = sig(o) tanh(c')."""
    i, f, g, o = (x @ rnn.weight_ih_l0.double().T + rnn.bias_ih_l0.double() + h @ rnn.weight_hh_l0.double().T
                  + rnn.bias_hh_l0.double()).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_step(rnn, x, h):
    """r, z, n of torch's GRU: r = sig(W_ir x + b_ir + W_hr h + b_hr), z likewise,
    n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h."""
    gi = x @ rnn.weight_ih_l0.double().T + rnn.bias_ih_l0.double()
    gh = h @ rnn.weight_hh_l0.double().T + rnn.bias_hh_l0.double()
    (ir, iz, inn), (hr, hz, hn) = gi.chunk(3, dim=-1), gh.chunk(3, dim=-1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    n = torch.tanh(inn + r * hn)
    return (1 - z) * n + z * h


def naive_unroll(core: RecurrentCore, x, state, first):
    """The core's equations one step at a time in float64, resetting an item's state before its first step."""
    state = [s.double() for s in state]
    outs = []
    for t in range(x.shape[0]):
        keep = (1.0 - first[t].double()).unsqueeze(-1)
        state = [s * keep for s in state]
        if core.kind == "lstm":
            state = list(lstm_step(core.rnn, x[t].double(), *state))
        else:
            state = [gru_step(core.rnn, x[t].double(), state[0])]
        outs.append(state[0])
    return torch.stack(outs).float(), tuple(s.float() for s in state)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_core_matches_the_step_by_step_equations_across_episode_boundaries(kind):
    """T=7, B=3 from a random state: item 0 starts episodes at t=0 and t=3, item 1 at t=5, item 2 never."""
    T, B, H = 7, 3, 5
    core = RecurrentCore(kind, H)
    test = ComponentTest(core, {"x": sp.Box(-1, 1, (4,), np.float32)}, batch_shape=(T, B))
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0, 0] = first[3, 0] = first[5, 1] = True
    state = tuple(torch.randn(B, H) for _ in range(core.state_size))
    x = test.sample("x")
    out, new_state = test.call("forward", x=x, state=state, first=first)
    sp.check(core.output_spaces["forward"], out, batch_ranks=2, where="core.forward()")
    sp.check(core.output_spaces["initial_state"], new_state, batch_ranks=1, where="core state")
    ref_out, ref_state = naive_unroll(core, x, state, first)
    assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    assert_close(new_state, ref_state, rtol=1e-5, atol=1e-5)
    assert len(new_state) == (2 if kind == "lstm" else 1)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_core_state_carries_across_calls_and_a_reset_forgets_it(kind):
    """Unrolling 3 + 4 steps (the state handed from the first call to the second) equals 7 at once; with every item
    reset at the second call's first step the outputs equal those from the zero state."""
    core = RecurrentCore(kind, 4).build(x=sp.Box(-1, 1, (2,), np.float32))
    x = torch.randn(7, 2, 2)
    whole, s_whole = core(x)
    a, s_a = core(x[:3])
    b, s_b = core(x[3:], s_a)
    assert_close(torch.cat([a, b]), whole)
    assert_close(s_b, s_whole)
    reset = torch.zeros(4, 2, dtype=torch.bool)
    reset[0] = True
    assert_close(core(x[3:], s_a, reset)[0], core(x[3:])[0])
    assert not torch.allclose(b, core(x[3:])[0])  # and without the reset the carried state matters


def test_core_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="kind 'rnn' is not one of lstm, gru"):
        RecurrentCore("rnn", 4)


def test_acting_state_starts_at_zero_keeps_and_resets_per_copy():
    acting = ActingState()
    obs = torch.zeros(3, 2)
    zeros = lambda b: (torch.zeros(b, 2), torch.zeros(b, 2))  # noqa: E731
    assert all(float(s.abs().sum()) == 0 for s in acting.before_step(obs, zeros))
    acting.after_step((torch.ones(3, 2), 2 * torch.ones(3, 2)))
    acting.reset(np.array([False, True, False]))
    h, c = acting.before_step(obs, zeros)
    assert h[:, 0].tolist() == [1.0, 0.0, 1.0] and c[:, 0].tolist() == [2.0, 0.0, 2.0]
    snap = acting.snapshot()
    acting.after_step((torch.full((3, 2), 9.0), torch.full((3, 2), 9.0)))
    acting.restore(snap)
    assert_close(acting.before_step(obs, zeros), (h, c))
    assert acting.before_step(torch.zeros(5, 2), zeros)[0].shape == (5, 2)  # another number of copies: zeros


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("shared_torso", [True, False], ids=["shared", "separate"])
def test_actor_critic_unroll_equals_acting_step_by_step_with_resets(kind, shared_torso):
    """Acting one step at a time (the state carried, zeroed after an episode's end, as a worker does) gives the same
    policy parameters and values as one unroll of the sequence from the first state with ``first`` flags."""
    T, B = 6, 2
    net = RecurrentActorCritic("mlp", [8], "tanh", kind, 4, shared_torso=shared_torso)
    test = ComponentTest(net, {"obs": OBS, "actions": sp.Discrete(3)}, batch_shape=(B,))
    obs = test.sample("obs", batch_shape=(T, B))
    done = torch.zeros(T, B, dtype=torch.bool)
    done[1, 0] = done[3, 1] = True  # episode ends: the next step starts a new one
    acting = ActingState()
    step_params, step_values, first_state = [], [], None
    with torch.no_grad():
        for t in range(T):
            state = acting.before_step(obs[t], net.initial_state)
            first_state = state if t == 0 else first_state
            params, values, new_state = net.unroll(add_time(obs[t]), state)
            acting.after_step(new_state)
            acting.reset(done[t].numpy())
            step_params.append(drop_time(params))
            step_values.append(values[0])
        first = torch.zeros(T, B, dtype=torch.bool)
        first[1:] = done[:-1]
        params, values, _ = net.unroll(obs, first_state, first)
    assert_close(params, torch.stack(step_params))
    assert_close(values, torch.stack(step_values))
    n = 2 if kind == "lstm" else 1
    assert len(net.initial_state(B)) == (n if shared_torso else 2 * n)
