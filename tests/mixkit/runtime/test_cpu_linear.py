import pytest
import torch
from torch import nn

from mixkit.forward_patches import ForwardPatch
from mixkit.runtime import cpu_linear
from mixkit.runtime.cpu_linear import (
    MAX_ROWS,
    MIN_ROWS,
    MIN_WEIGHT_ELEMENTS,
    onednn_linear_available,
    onednn_small_batch_linears,
    prefers_onednn,
    routed_linear,
)

needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN linear op")

BIG = (2048, 2048)  # exactly MIN_WEIGHT_ELEMENTS


def big_linear(seed: int = 0, bias: bool = True) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(BIG[1], BIG[0], bias=bias)


def test_rule_bounds():
    weight = torch.empty(BIG)
    assert weight.numel() == MIN_WEIGHT_ELEMENTS
    assert not prefers_onednn(MIN_ROWS - 1, weight)
    assert prefers_onednn(MIN_ROWS, weight)
    assert prefers_onednn(MAX_ROWS, weight)
    assert not prefers_onednn(MAX_ROWS + 1, weight)
    assert not prefers_onednn(8, torch.empty(BIG[0], BIG[1] - 1))  # one element short of the floor
    assert not prefers_onednn(8, weight.to(torch.bfloat16))


@needs_onednn
@pytest.mark.parametrize("shape", [(4, BIG[1]), (2, 3, BIG[1]), (1, 1024, BIG[1])])
@pytest.mark.parametrize("bias", [True, False])
def test_routed_output_matches_mkl_within_fp32_rounding(monkeypatch, shape, bias):
    layer = big_linear(bias=bias)
    inputs = torch.randn(shape)
    calls = []
    real = cpu_linear.onednn_linear
    monkeypatch.setattr(cpu_linear, "onednn_linear", lambda *a: calls.append(a[0].shape) or real(*a))
    with torch.no_grad():
        routed = routed_linear(layer, inputs)
        expected = nn.functional.linear(inputs, layer.weight, layer.bias)
    assert calls == [torch.Size([inputs.numel() // BIG[1], BIG[1]])]
    assert routed.shape == expected.shape and routed.dtype == torch.float32
    torch.testing.assert_close(routed, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_non_contiguous_input_is_routed_correctly():
    layer = big_linear()
    inputs = torch.randn(BIG[1], 8).T  # (8, 2048) transposed view
    with torch.no_grad():
        torch.testing.assert_close(routed_linear(layer, inputs), layer(inputs.contiguous()), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 3, MAX_ROWS + 1])
def test_rows_outside_the_range_take_the_default_kernel_bit_for_bit(monkeypatch, rows):
    monkeypatch.setattr(cpu_linear, "onednn_linear", lambda *a: pytest.fail("routed outside the row range"))
    layer = big_linear()
    inputs = torch.randn(rows, BIG[1])
    with torch.no_grad():
        assert torch.equal(routed_linear(layer, inputs), nn.functional.linear(inputs, layer.weight, layer.bias))


def test_training_keeps_autograd(monkeypatch):
    monkeypatch.setattr(cpu_linear, "onednn_linear", lambda *a: pytest.fail("oneDNN op has no autograd here"))
    layer = big_linear()
    out = routed_linear(layer, torch.randn(8, BIG[1]))
    out.sum().backward()
    assert layer.weight.grad is not None


@needs_onednn
def test_context_routes_large_plain_linears_and_restores_them():
    small = nn.Linear(16, 16)
    patched = big_linear(1)
    patched.forward = lambda x: x  # e.g. a runtime LoRA patch: must be left alone
    model = nn.Sequential(big_linear(), small, patched, big_linear(2).to(torch.bfloat16))
    inputs = torch.randn(8, BIG[1])
    with torch.no_grad():
        before = model[0](inputs)
        with onednn_small_batch_linears(model) as routed:
            assert routed == 1
            assert "forward" in model[0].__dict__ and "forward" not in small.__dict__
            torch.testing.assert_close(model[0](inputs), before, rtol=1e-5, atol=1e-5)
    assert "forward" not in model[0].__dict__
    assert patched.forward(inputs) is inputs
    assert "forward" not in model[3].__dict__


@needs_onednn
def test_a_layer_with_its_own_forward_put_back_is_routed_and_left_as_found():
    """`layer.forward = saved` (a spy or patch undone) leaves the class's forward bound in `__dict__`: a plain layer,
    not a patch; a foreign wrapper beside it is still left alone."""
    restored, wrapped = big_linear(), big_linear(1)
    own = restored.forward
    restored.forward = own

    def wrapper(inputs):
        return nn.Linear.forward(wrapped, inputs)

    wrapped.forward = wrapper
    model = nn.Sequential(restored, wrapped)
    inputs = torch.randn(8, BIG[1])
    with torch.no_grad():
        before = restored(inputs)
        with onednn_small_batch_linears(model) as routed:
            assert routed == 1
            assert isinstance(restored.__dict__["forward"], ForwardPatch) and restored.__dict__["forward"].below is own
            assert wrapped.__dict__["forward"] is wrapper
            torch.testing.assert_close(restored(inputs), before, rtol=1e-5, atol=1e-5)
    assert restored.__dict__["forward"] is own and wrapped.__dict__["forward"] is wrapper


@needs_onednn
def test_context_restores_the_model_after_an_error():
    model = nn.Sequential(big_linear())
    with pytest.raises(RuntimeError, match="boom"):
        with onednn_small_batch_linears(model):
            raise RuntimeError("boom")
    assert "forward" not in model[0].__dict__


def test_context_is_a_no_op_without_onednn(monkeypatch):
    monkeypatch.setattr(cpu_linear, "onednn_linear_available", lambda: False)
    model = nn.Sequential(big_linear())
    with onednn_small_batch_linears(model) as routed:
        assert routed == 0 and "forward" not in model[0].__dict__


@needs_onednn
def test_overlapping_blocks_on_one_model_keep_the_routing_until_the_last_one_leaves():
    """Two threads captioning with one cached model: the first to finish used to unpatch the layers under the other,
    whose remaining decode steps then ran on MKL (another summation order)."""
    import threading

    model = nn.Sequential(big_linear())
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with onednn_small_batch_linears(model) as routed:
            seen["first"] = routed
            first_in.set()
            second_in.wait(60)
        first_out.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(60)
    with onednn_small_batch_linears(model) as routed:
        second_in.set()
        assert first_out.wait(60)
        assert routed == 1 and "forward" in model[0].__dict__  # still routed after the other block left
    thread.join(60)
    assert seen["first"] == 1 and "forward" not in model[0].__dict__  # unpatched once both left
    with onednn_small_batch_linears(model) as outer:  # nesting in one thread shares the patch the same way
        with onednn_small_batch_linears(model) as inner:
            assert outer == inner == 1
        assert "forward" in model[0].__dict__
    assert "forward" not in model[0].__dict__
