"""`mixkit.forward_patches`: a module's own forward put back is plain, anything else a patch (`has_foreign_forward`);
`ForwardPatch`es stack and come off in any order, each putting back exactly what was below it."""

from __future__ import annotations

import itertools
import types

import pytest
import torch
from torch import nn

from mixkit.forward_patches import ForwardPatch, has_foreign_forward, install_forward_patch, latest_forward_change


class Doubling(nn.Linear):
    def forward(self, inputs):
        return super().forward(inputs) * 2


def test_a_module_without_an_instance_forward_is_plain():
    assert has_foreign_forward(nn.Linear(2, 2)) is False


def test_its_own_forward_put_back_is_plain():
    layer = nn.Linear(2, 2)
    saved = layer.forward
    layer.forward = lambda x: saved(x) * 2  # a spy ...
    layer.forward = saved  # ... put back: the class's forward, bound to the layer, in its __dict__
    assert "forward" in layer.__dict__ and has_foreign_forward(layer) is False


@pytest.mark.parametrize("patch", ["lambda", "wrapper", "bound to another layer", "base class forward on a subclass"])
def test_anything_else_in_its_place_is_foreign(patch):
    layer = Doubling(2, 2) if patch == "base class forward on a subclass" else nn.Linear(2, 2)
    saved = layer.forward

    def wrapper(inputs):
        return saved(inputs)

    layer.forward = {
        "lambda": lambda x: x,
        "wrapper": wrapper,
        "bound to another layer": nn.Linear(2, 2).forward,  # same function, other weights
        "base class forward on a subclass": types.MethodType(nn.Linear.forward, layer),  # skips Doubling.forward
    }[patch]
    assert has_foreign_forward(layer) is True


def adding(amount: float):
    """A patch body adding `amount` to what the forward below it computes."""
    return lambda below, x: below(x) + amount


def plain_layer():
    layer = nn.Linear(3, 2)
    inputs = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return layer, inputs, layer(inputs)


def scaling(factor: float):
    """A patch body scaling what the forward below it computes: powers of two keep every product exact, so the
    expected output does not depend on the order of the factors."""
    return lambda below, x: below(x) * factor


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_stacked_patches_come_off_in_any_order_each_taking_only_itself(order):
    layer, inputs, base = plain_layer()
    factors = (2.0, 4.0, 8.0)
    patches = [install_forward_patch(layer, scaling(factor), f"times {factor:g}") for factor in factors]
    left = {0, 1, 2}
    with torch.no_grad():
        assert torch.equal(layer(inputs), base * 64)
        for index in order:
            patches[index].remove()
            left.discard(index)
            assert torch.equal(layer(inputs), base * float(torch.tensor([factors[i] for i in left]).prod()))
    assert "forward" not in layer.__dict__ and not has_foreign_forward(layer)


def test_removing_twice_does_nothing_the_second_time():
    layer, inputs, base = plain_layer()
    below = install_forward_patch(layer, adding(1.0), "below")
    top = install_forward_patch(layer, adding(2.0), "top")
    top.remove()
    top.remove()  # must not take `below` off as well
    with torch.no_grad():
        assert torch.equal(layer(inputs), base + 1)
    assert layer.__dict__["forward"] is below


def test_its_own_forward_put_back_before_the_patch_is_put_back_again():
    layer, inputs, base = plain_layer()
    own = layer.forward
    layer.forward = own
    install_forward_patch(layer, adding(1.0), "patch").remove()
    assert layer.__dict__["forward"] is own


def test_a_foreign_wrapper_below_is_called_and_kept():
    layer, inputs, base = plain_layer()

    def doubling(x):
        return nn.Linear.forward(layer, x) * 2

    layer.forward = doubling
    patch = install_forward_patch(layer, adding(1.0), "patch")
    with torch.no_grad():
        assert torch.equal(layer(inputs), base * 2 + 1)
        patch.remove()
        assert torch.equal(layer(inputs), base * 2)
    assert layer.__dict__["forward"] is doubling


def test_under_a_foreign_wrapper_that_captured_it_a_removed_patch_passes_through():
    layer, inputs, base = plain_layer()
    patch = install_forward_patch(layer, adding(1.0), "patch")
    captured = layer.forward
    layer.forward = lambda x: captured(x) * 2  # a spy on top, which this patch cannot relink
    with torch.no_grad():
        assert torch.equal(layer(inputs), (base + 1) * 2)
        patch.remove()
        assert torch.equal(layer(inputs), base * 2)  # the spy stays, the patch is gone from its call
    assert not patch.active and "removed" in repr(patch)


def test_after_someone_else_restored_the_forward_removal_brings_nothing_back():
    layer, inputs, base = plain_layer()
    first = install_forward_patch(layer, adding(1.0), "first")
    second = install_forward_patch(layer, adding(2.0), "second")
    del layer.forward  # e.g. a test helper, or a wrapper restoring the class's forward
    first.remove()
    second.remove()
    assert "forward" not in layer.__dict__
    with torch.no_grad():
        assert torch.equal(layer(inputs), base)


def test_every_install_and_removal_stamps_a_new_change():
    layer, _, _ = plain_layer()
    stamps = [latest_forward_change(layer)]
    patch = install_forward_patch(layer, adding(1.0), "patch")
    stamps.append(latest_forward_change(layer))
    patch.remove()
    stamps.append(latest_forward_change(layer))
    assert stamps == sorted(set(stamps)) and isinstance(patch, ForwardPatch)
