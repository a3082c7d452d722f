"""int8 UNet on the torch backend: PyTorch 2 export quantization (torchao's X86InductorQuantizer),
compiled by inductor into oneDNN int8 kernels, bf16 elsewhere. An approximate speed-up.

Why: eager bf16 is bound by the convolutions (see the README's analysis); int8 VNNI kernels do
twice the work per instruction. One SD 1.5 UNet call at 256 px: eager bf16 + channels-last 1.30 s,
this int8 graph 0.68 s (1.90x, 2-core AMD EPYC, 2026-11-24). The layers kept in floating point are
the OpenVINO path's (`mixkit.runtime.openvino_int8.KEPT_IN_FLOAT`, chosen there by measurement).
Calibration data comes from the pipeline (`pipelines.approx.int8`); nothing is cached on disk
except inductor's own kernels, so each process calibrates and compiles again (minutes at SD size).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch

from mixkit.runtime.report import RuntimeFallbackWarning
from mixkit.runtime.unet_graph import UNetGraph, flat_unet_inputs, is_sdxl, refuse_graph_keywords

TORCHAO_HINT = "pip install torchao  (or: pip install 'mixkit[int8]')"


def require_torchao():
    try:
        import torchao  # noqa: F401
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: F401
    except ImportError as error:
        raise ImportError(f"int8 on the torch backend needs torchao: {TORCHAO_HINT}") from error


@dataclass
class _Output:
    sample: torch.Tensor


# The OpenVINO path's choice (openvino_int8.KEPT_IN_FLOAT), as module names: a layer stays in floating
# point when one of these is a component of its path (conv_in, time_embedding.linear_1, ...conv_shortcut).
KEPT_MODULES = ("conv_in", "conv_out", "time_embedding", "time_emb_proj", "conv_shortcut")


def kept_module_names(unet: torch.nn.Module) -> list[str]:
    return [name for name, module in unet.named_modules()
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)) and set(name.split(".")) & set(KEPT_MODULES)]


def quantize_unet(unet: torch.nn.Module, calibration: Sequence[Sequence[torch.Tensor]]) -> torch.nn.Module:
    """An int8 GraphModule of `unet` (float32 inputs), activation ranges observed on `calibration`
    (each item: one call's (sample, timestep, encoder_hidden_states[, text_embeds, time_ids]))."""
    require_torchao()
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    if not calibration:
        raise ValueError("int8 quantization needs at least one recorded UNet call to calibrate on; got none")
    float_unet = copy.deepcopy(unet).float().eval()  # the fast preset holds the UNet in bf16
    # diffusers' own SDPA processors on the copy: mixkit's (backend dispatch, fused-QKV storage checks)
    # look at real tensor storage, which export's fake tensors do not have. Same math.
    from diffusers.models.attention_processor import AttnProcessor2_0

    float_unet.set_attn_processor(AttnProcessor2_0())
    graph = UNetGraph(float_unet, is_sdxl(unet.config)).eval()
    example = tuple(calibration[0])
    # Static shapes: with dynamic ones, inductor's int8 weight prepacking fails (torch 2.13), so the
    # graph serves the calibrated size only (the stand-in says so for any other).
    with torch.no_grad():
        exported = torch.export.export(graph, example, strict=False).module()
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
    for name in kept_module_names(float_unet):
        quantizer.set_module_name_qconfig(f"unet.{name}", None)
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for inputs in calibration:
            prepared(*inputs)
    converted = convert_pt2e(prepared)
    # Export pins every intermediate's dtype to float32 with assertion nodes; the graph runs under
    # bf16 autocast, so they would fail. They check, they do not compute: dropping them is safe.
    for node in list(converted.graph.nodes):
        if node.target == torch.ops.aten._assert_tensor_metadata.default:
            converted.graph.erase_node(node)
    converted.graph.lint()
    converted.recompile()
    return converted


class TorchInt8UNet:
    """Stands in for the diffusers UNet with an inductor-compiled int8 graph; `float_unet` is the
    module it replaced (put back by `pipelines.approx.remove_approximations`)."""

    dtype = torch.float32
    device = torch.device("cpu")

    def __init__(self, float_unet: torch.nn.Module, graph: torch.nn.Module, shapes: Sequence[Sequence[int]], *,
                 autocast_bf16: bool) -> None:
        from mixkit.runtime.compile import use_compile_cache

        self.float_unet = float_unet
        self.config = float_unet.config
        self.sdxl = is_sdxl(float_unet.config)
        self.autocast_bf16 = autocast_bf16
        self.shapes = tuple(tuple(shape) for shape in shapes)
        use_compile_cache()
        self._graph = graph
        self._compiled = torch.compile(graph, dynamic=False)
        self.compile_failure: str | None = None  # why the compiled graph was given up for the eager one

    def __getattr__(self, name: str):
        raise AttributeError(f"{name!r}: the int8 UNet is a compiled graph, so features that need the torch UNet's "
                             "modules (LoRA changes, ControlNet, attention changes) need remove_approximations(pipe)")

    def __call__(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs) -> _Output:
        refuse_graph_keywords(kwargs, "The int8 UNet", "call remove_approximations(pipe) for this generation")
        inputs = flat_unet_inputs(sample, timestep, encoder_hidden_states, added_cond_kwargs, self.sdxl)
        rows = inputs[0].shape[0]
        inputs = _padded_to_batch(inputs, self.shapes)
        shapes = tuple(tuple(x.shape) for x in inputs)
        if shapes != self.shapes:
            raise ValueError(f"The torch int8 UNet was calibrated and compiled for UNet inputs of shapes {self.shapes} "
                             f"(size, batch x CFG); this call has {shapes}. Call approximate(pipe, int8=Int8Calibration("
                             "width=..., height=...)) for this size, or remove_approximations(pipe)")
        # freezing (set while the first call compiles) folds the weights in and prepacks them for oneDNN's
        # int8 kernels; as a torch.compile option instead, the int8 prepack op fails on fake tensors (torch 2.13).
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast_bf16), \
                torch._inductor.config.patch(freezing=True):
            if self.compile_failure is None:
                try:
                    return _Output(self._compiled(*inputs).float()[:rows])
                except Exception as error:  # noqa: BLE001 - a compile failure must not end the generation
                    self.compile_failure = f"{type(error).__name__}: {error}"
                    warnings.warn(f"compiling the int8 UNet failed ({self.compile_failure}); running its graph "
                                  "eagerly (same quantization, much slower)", RuntimeFallbackWarning, stacklevel=2)
            return _Output(self._graph(*inputs).float()[:rows])


def _padded_to_batch(inputs: Sequence[torch.Tensor], shapes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """`inputs` with fewer rows than the compiled batch padded by repeating their last row.

    A step that leaves out the negative prompt (NGMS, Skip Early CFG) calls the UNet with half the
    rows; the graph is compiled for one batch only (inductor's int8 prepacking fails with dynamic
    shapes), so such a call runs at the compiled batch: the same result, no time saved.
    """
    wanted = shapes[0][0]
    rows = inputs[0].shape[0]
    if rows >= wanted or any(tuple(x.shape[1:]) != tuple(shape[1:]) for x, shape in zip(inputs, shapes)):
        return list(inputs)
    return [torch.cat([x, x[-1:].expand(wanted - rows, *x.shape[1:])]) for x in inputs]
