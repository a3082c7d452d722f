"""Route fp32 CPU linear layers that see a few rows at a time through oneDNN instead of MKL.

Why: PyTorch's fp32 `F.linear` on x86 goes to MKL's sgemm, which is fast for one row (GEMV) and
for large GEMMs but slow in between: on this 2-core Xeon a [8 × 2560] @ [2560 × 10240] product
(OPT-2.7B's FFN in a batch-8 decode step) takes 27 ms in MKL and 12 ms in oneDNN's inner-product
kernel, with one row both take 6 ms (`python -m benchmarks.cpu_linear` prints the table for the
machine it runs on). That middle range is exactly what batched greedy decoding produces, so
without this a batch of 8 captions costs ~4× a single caption per decode step and batching gains
little. Routing changes only the summation order (fp32 rounding), never the dtype.

oneDNN re-lays-out the weight on every call (~50 µs), which loses on small layers; hence the
weight-size floor. Both bounds were measured on this machine; the rule only picks between two
exact fp32 kernels, so a CPU where it picks wrong is slower, never wrong.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Iterator

import torch
from torch import nn

from mixkit.forward_patches import ForwardPatch, has_foreign_forward, install_forward_patch

MIN_ROWS = 4  # below this MKL's GEMV path wins (measured: 2 rows 0.5–0.74× in oneDNN)
MAX_ROWS = 1024  # above this MKL's large-GEMM kernels win (2056 rows: 1.3× in MKL)
MIN_WEIGHT_ELEMENTS = 1 << 22  # 4M fp32 values = 16 MB; smaller layers pay the per-call re-layout


@functools.lru_cache(maxsize=1)
def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN with its fused linear op (absent on some ARM/macOS builds)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def prefers_onednn(rows: int, weight: torch.Tensor) -> bool:
    """The routing rule: oneDNN for 4–1024 rows against a weight of ≥ 4M fp32 elements on CPU."""
    return (
        weight.device.type == "cpu" and weight.dtype == torch.float32
        and weight.numel() >= MIN_WEIGHT_ELEMENTS and MIN_ROWS <= rows <= MAX_ROWS
    )


def routed_linear(layer: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
    """`layer(inputs)`, through oneDNN when the rule prefers it and no gradient is needed."""
    rows = inputs.numel() // inputs.shape[-1] if inputs.dim() else 0
    if (
        inputs.dtype != torch.float32 or inputs.device.type != "cpu" or not prefers_onednn(rows, layer.weight)
        or (torch.is_grad_enabled() and (inputs.requires_grad or layer.weight.requires_grad))
    ):
        return nn.functional.linear(inputs, layer.weight, layer.bias)
    flat = inputs.reshape(rows, inputs.shape[-1])
    if not flat.is_contiguous():
        flat = flat.contiguous()
    return onednn_linear(flat, layer.weight, layer.bias).reshape(*inputs.shape[:-1], layer.out_features)


def _route(layer: nn.Linear, _below, inputs: torch.Tensor) -> torch.Tensor:
    """The routing's forward patch: replaces the plain call below it (only plain layers are routed)."""
    return routed_linear(layer, inputs)


def onednn_linear(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`rows @ weight.T + bias` in oneDNN's fp32 inner product (the op inductor's CPU freezing uses)."""
    return torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")


def _routable_layers(model: nn.Module) -> list[nn.Linear]:
    """Plain `nn.Linear` layers big enough to route. A layer whose forward is already replaced (a
    runtime LoRA patch, or another thread's routing of the same model) is left alone; its own forward
    put back as an instance attribute is plain; hooks still run, since they wrap whatever forward is."""
    return [
        module for module in model.modules()
        if type(module) is nn.Linear and not has_foreign_forward(module)
        and module.weight.dtype == torch.float32 and module.weight.device.type == "cpu"
        and module.weight.numel() >= MIN_WEIGHT_ELEMENTS
    ]


_ROUTING_LOCK = threading.Lock()
_ROUTED: dict[int, tuple[int, list[ForwardPatch]]] = {}
"""id(model) -> (blocks using the routing, the routing's patch on each routed layer).

Two threads captioning with one cached model (an AppFlow app shared by a threaded server) overlap their blocks: the
first to leave used to unpatch the layers while the other was still generating, which then finished its decode steps
on the other kernel (another summation order, so not always the text it gives alone). The routing now ends when its
last user leaves, and puts back a layer's own bound forward where one was (`has_foreign_forward`, `ForwardPatch`)."""


@contextlib.contextmanager
def onednn_small_batch_linears(model: nn.Module) -> Iterator[int]:
    """Within the block, `model`'s large fp32 CPU linears use oneDNN for 4–1024 rows.

    Yields how many layers are routed (0 where oneDNN is unavailable or nothing qualifies).
    The patch is an instance attribute removed on exit, also on error, so the model is left
    exactly as it was; blocks on one model that overlap (threads, nesting) share one patch,
    removed when the last of them exits.
    """
    with _ROUTING_LOCK:
        users, routed = _ROUTED.get(id(model), (0, []))
        if not users:
            layers = _routable_layers(model) if onednn_linear_available() else []
            routed = []
            try:
                for layer in layers:
                    routed.append(install_forward_patch(layer, functools.partial(_route, layer), "oneDNN routing"))
            except BaseException:
                for patch in routed:
                    patch.remove()
                raise
        _ROUTED[id(model)] = (users + 1, routed)
    try:
        yield len(routed)
    finally:
        with _ROUTING_LOCK:
            users, routed = _ROUTED.pop(id(model))
            if users > 1:
                _ROUTED[id(model)] = (users - 1, routed)
            else:
                for patch in routed:  # what was below is put back; a patch stacked on top since stays
                    patch.remove()
