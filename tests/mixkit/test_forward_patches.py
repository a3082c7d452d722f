"""`mixkit.forward_patches.has_foreign_forward`: a module's own forward put back is plain, anything else a patch."""

from __future__ import annotations

import types

import pytest
from torch import nn

from mixkit.forward_patches import has_foreign_forward


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
