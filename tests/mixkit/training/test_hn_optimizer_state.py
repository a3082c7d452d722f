"""A1111's `.pt.optim` beside a hypernetwork: read in A1111's format and parameter order, used only while the `.pt`
has the hash it was saved with, refused for another optimizer class."""

from __future__ import annotations

import logging

import pytest
import torch

from mixkit.hypernetworks.create import TrainableHypernetwork
from mixkit.hypernetworks.shape import HypernetworkShape
from mixkit.training.hn_optimizer_state import (load_optimizer_state, optimizer_state_path, read_optimizer_state,
                                                save_optimizer_state, short_hash)


def _file_in_a1111_order(path):
    """A hypernetwork whose widths are stored 64 before 32, as A1111 stores them in its checkbox order."""
    network = TrainableHypernetwork.new("h", HypernetworkShape(enable_sizes=[32, 64]), seed=0)
    data = network.file_dict(step=5, sd_checkpoint=None, sd_checkpoint_name=None)
    reordered = {64: data.pop(64), 32: data.pop(32), **data}
    torch.save(reordered, path)
    return reordered


def _a1111_optimizer(data) -> tuple[torch.optim.AdamW, dict]:
    """A1111's optimizer over `weights()`: per width in file order, key MLP then value MLP, one step taken with a
    gradient that tells the parameters apart; and its moments by the parameters' values before the step."""
    parameters = []
    for width in [key for key in data if isinstance(key, int)]:
        for state in data[width]:
            parameters += [torch.nn.Parameter(tensor.clone()) for tensor in state.values()]
    before = [tuple(parameter.detach().flatten().tolist()) for parameter in parameters]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3)
    for number, parameter in enumerate(parameters):
        parameter.grad = torch.full_like(parameter, float(number + 1))
    optimizer.step()
    return optimizer, {values: optimizer.state[parameter] for values, parameter in zip(before, parameters)}


def test_an_a1111_state_is_renumbered_to_mixkits_parameter_order(tmp_path):
    path = tmp_path / "h.pt"
    data = _file_in_a1111_order(path)
    a1111, by_values = _a1111_optimizer(data)
    torch.save({"optimizer_name": "AdamW", "hash": short_hash(path),
                "optimizer_state_dict": a1111.state_dict()}, optimizer_state_path(path))
    network = TrainableHypernetwork.from_file(path)
    assert network.widths == [32, 64]
    optimizer = torch.optim.AdamW(network.parameters(), lr=5e-4)
    load_optimizer_state(optimizer, read_optimizer_state(path, "AdamW"))
    # each parameter gets the moments of the A1111 parameter with the same values
    weights = [parameter for parameter in network.parameters() if parameter.dim() == 2]  # biases start equal (0)
    assert len(weights) == 8
    for parameter in weights:
        expected = by_values[tuple(parameter.detach().flatten().tolist())]
        assert torch.equal(optimizer.state[parameter]["exp_avg"], expected["exp_avg"])
    assert optimizer.param_groups[0]["lr"] == 5e-4  # this run's rate, not the saved one


def test_mixkits_own_state_round_trips(tmp_path):
    path = tmp_path / "h.pt"
    network = TrainableHypernetwork.new("h", HypernetworkShape(enable_sizes=[32, 64]), seed=0)
    network.save(path, step=1)
    optimizer = torch.optim.AdamW(network.parameters(), lr=1e-3)
    for parameter in network.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    save_optimizer_state(path, optimizer)
    again = torch.optim.AdamW(network.parameters(), lr=1e-3)
    load_optimizer_state(again, read_optimizer_state(path, "AdamW"))
    assert all(torch.equal(again.state[p]["exp_avg_sq"], optimizer.state[p]["exp_avg_sq"])
               for p in network.parameters())


def test_a_stale_state_is_ignored_and_another_optimizers_refused(tmp_path, caplog):
    path = tmp_path / "h.pt"
    network = TrainableHypernetwork.new("h", HypernetworkShape(enable_sizes=[32]), seed=0)
    network.save(path, step=1)
    optimizer = torch.optim.SGD(network.parameters(), lr=1e-3, momentum=0.9)
    for parameter in network.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    save_optimizer_state(path, optimizer)
    with pytest.raises(ValueError, match=r"holds the state of a SGD optimizer, but this run trains with AdamW; set "
                                         r"optimizer to the SGD one .* or move h\.pt\.optim away"):
        read_optimizer_state(path, "AdamW")
    assert read_optimizer_state(path, "SGD") is not None
    network.save(path, step=2)  # trained on without saving its optimizer: the .optim no longer matches
    with caplog.at_level(logging.WARNING):
        assert read_optimizer_state(path, "SGD") is None
    assert "belongs to an earlier version of h.pt" in caplog.text
    assert read_optimizer_state(tmp_path / "none.pt", "AdamW") is None  # no .optim: a fresh optimizer


def test_a_file_that_is_no_optimizer_state_is_refused(tmp_path):
    path = tmp_path / "h.pt"
    TrainableHypernetwork.new("h", HypernetworkShape(enable_sizes=[32]), seed=0).save(path, step=1)
    torch.save({"hash": short_hash(path)}, optimizer_state_path(path))
    with pytest.raises(ValueError, match=r"h\.pt\.optim is not an A1111 optimizer state .* remove it"):
        read_optimizer_state(path, "AdamW")
