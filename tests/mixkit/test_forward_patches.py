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


class Codec(nn.Module):
    """A module with a method other than forward to patch, as a VAE's `decode`."""

    def decode(self, x):
        return x + 1


def spy_on_decode(module, calls: list):
    """A spy as tests write them: wraps whatever `decode` is there now and counts calls."""
    saved = module.decode

    def spy(x):
        calls.append(1)
        return saved(x)

    module.decode = spy
    return spy


@pytest.mark.parametrize("order", list(itertools.permutations(["first", "spy", "second"])))
def test_patches_on_another_method_stack_with_a_spy_and_come_off_in_any_order(order):
    """Patches on `decode` (`attribute=`) with a spy stacked in `order`: removing either patch leaves the spy and the
    other patch working; `forward` is never touched."""
    codec, x, calls = Codec(), torch.tensor([1.0]), []
    patches = {}
    for what in order:
        if what == "spy":
            spy_on_decode(codec, calls)
        else:
            patches[what] = install_forward_patch(codec, scaling(2.0 if what == "first" else 4.0), what,
                                                  attribute="decode")
    assert torch.equal(codec.decode(x), torch.tensor([16.0])) and calls == [1]
    assert "forward" not in codec.__dict__ and has_foreign_forward(codec, "decode")
    patches["first"].remove()
    assert torch.equal(codec.decode(x), torch.tensor([8.0])) and calls == [1, 1]
    patches["second"].remove()
    assert torch.equal(codec.decode(x), torch.tensor([2.0])) and calls == [1, 1, 1]  # the spy is still called


def test_a_patch_on_another_method_put_back_leaves_the_class_method():
    codec = Codec()
    patch = install_forward_patch(codec, scaling(2.0), "doubling", attribute="decode")
    assert torch.equal(codec.decode(torch.tensor([1.0])), torch.tensor([4.0])) and "decode" in repr(patch)
    patch.remove()
    assert "decode" not in codec.__dict__ and not has_foreign_forward(codec, "decode")


@pytest.mark.parametrize("attribute", ["encode", "training", 3])
def test_a_method_the_class_does_not_have_is_refused_and_nothing_changes(attribute):
    codec = Codec()
    before = dict(codec.__dict__)
    with pytest.raises(ValueError, match="has no method .* to patch"):
        install_forward_patch(codec, scaling(2.0), "doubling", attribute=attribute)
    assert codec.__dict__ == before


def test_a_body_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="body must be callable"):
        install_forward_patch(nn.Linear(2, 2), None, "nothing")


def test_a_patch_body_raising_half_way_leaves_the_chain_as_it_was():
    """An exception inside a patched call propagates and changes nothing: the next call and the removals work."""
    codec, x = Codec(), torch.tensor([1.0])
    below = install_forward_patch(codec, scaling(2.0), "doubling", attribute="decode")
    failing = {"now": True}

    def body(below_decode, inputs):
        halfway = below_decode(inputs)
        if failing["now"]:
            raise RuntimeError("out of memory")
        return halfway * 4

    top = install_forward_patch(codec, body, "sometimes failing", attribute="decode")
    with pytest.raises(RuntimeError, match="out of memory"):
        codec.decode(x)
    failing["now"] = False
    assert torch.equal(codec.decode(x), torch.tensor([16.0]))
    below.remove()
    assert torch.equal(codec.decode(x), torch.tensor([8.0]))
    top.remove()
    assert "decode" not in codec.__dict__


def shifting_input(amount: float):
    """An input-transforming body (as a hypernetwork's): changes the input, then calls the forward below."""
    return lambda below, x: below(x + amount)


def adding_input_times(factor: float):
    """A body adding a change computed on the input it sees (as a runtime LoRA's `B·x`, B here a row of `factor`s)."""
    return lambda below, x: below(x) + x.sum(-1, keepdim=True) * factor


def transformed_then_added(layer, inputs):
    """What A1111 computes: the LoRA change on the transformed input, W·t(x) + B·t(x)."""
    shifted = inputs + 1
    return nn.Linear.forward(layer, shifted) + shifted.sum(-1, keepdim=True) * 3


@pytest.mark.parametrize("order", [("transform", "adder"), ("adder", "transform")])
def test_an_input_transform_stays_above_other_patches_whichever_came_first(order):
    layer, inputs, _ = plain_layer()
    install = {"transform": lambda: install_forward_patch(layer, shifting_input(1.0), "transform",
                                                          transforms_input=True),
               "adder": lambda: install_forward_patch(layer, adding_input_times(3.0), "adder")}
    patches = {what: install[what]() for what in order}
    with torch.no_grad():
        assert torch.equal(layer(inputs), transformed_then_added(layer, inputs))
        patches["transform"].remove()
        assert torch.equal(layer(inputs), nn.Linear.forward(layer, inputs) + inputs.sum(-1, keepdim=True) * 3)
        patches["adder"].remove()
    assert "forward" not in layer.__dict__ and "_mixkit_forward_input_transforms" not in layer.__dict__


def test_under_a_foreign_wrapper_over_an_input_transform_a_patch_is_refused_and_nothing_changes():
    layer, inputs, _ = plain_layer()
    transform = install_forward_patch(layer, shifting_input(1.0), "transform", transforms_input=True)
    captured = layer.forward
    layer.forward = lambda x: captured(x)  # a spy over the transform: a patch cannot be put below it
    stamp = latest_forward_change(layer)
    with pytest.raises(ValueError, match="cannot install adder on Linear.forward: 1 input-transforming .* restore "
                                         "that wrapper first"):
        install_forward_patch(layer, adding_input_times(3.0), "adder")
    assert layer.__dict__["forward"] is not captured and transform.below is None
    assert latest_forward_change(layer) == stamp
    del layer.forward
    transform.remove()
    # with the transform out of the chain (the spy's owner took the forward back), nothing hides it any more
    install_forward_patch(layer, adding_input_times(3.0), "adder").remove()
