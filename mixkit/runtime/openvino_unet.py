"""Run a diffusers UNet through OpenVINO (the `openvino` package alone, no optimum-intel).

Why not optimum-intel: its releases pin an older transformers/huggingface_hub than diffusers
needs (issue 8), so mixkit converts the torch module itself with `openvino.convert_model`.
The converted graph is saved once per (weights fingerprint, config, precision) in the cache
folder; each new input shape is compiled once with static shapes, which OpenVINO's CPU plugin
runs faster than dynamic ones. The weights fingerprint changes when a LoRA is merged, so a
changed LoRA set re-exports and a known one reuses its cache entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

# Shared with the VAE and text-encoder stand-ins; re-exported here for existing imports.
from mixkit.runtime.openvino_cache import (OPENVINO_HINT, ExportIdentity, graph_config,  # noqa: F401
                                           require_openvino, weights_fingerprint)
from mixkit.runtime.resident_pages import page_out_mappings_under
from mixkit.runtime.unet_graph import UNetGraph, flat_unet_inputs, is_sdxl, refuse_graph_keywords


@dataclass
class _Output:
    sample: torch.Tensor


class OpenVinoUNet:
    """Stands in for a diffusers UNet in mixkit's sampling loop (same call, `.sample` output).

    Inputs and outputs are float32 on the CPU; OpenVINO chooses the inner precision from
    `inference_precision` ("bf16" on AVX512-BF16/AMX CPUs, else "f32"). Keyword features the graph
    does not contain (ControlNet residuals, cross-attention kwargs) are refused, never ignored.
    """

    def __init__(self, unet: torch.nn.Module, *, cache_dir: str | os.PathLike, inference_precision: str = "f32",
                 identity: ExportIdentity | None = None) -> None:
        ov = require_openvino()
        self.torch_module = unet
        self.config = unet.config
        self.sdxl = is_sdxl(unet.config)
        self.inference_precision = inference_precision
        self._core = ov.Core()
        self._compiled: dict[tuple, object] = {}
        # bf16 inference: the graph file holds float16 weights (half the mapped pages while compiling;
        # float16 keeps more mantissa than the bfloat16 the plugin computes in, so nothing is lost).
        self.weights_file_precision = "f16" if inference_precision == "bf16" else "f32"
        key = {"fingerprint": weights_fingerprint(unet), "config": graph_config(unet), "sdxl": self.sdxl,
               "weights_file": self.weights_file_precision}
        if identity is not None:  # model hash + merged LoRA set, as for the VAE and text encoders
            key.update(model_hash=identity.model_hash, loras=list(identity.loras))
        self.cache_key = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
        self.cache_path = Path(cache_dir) / f"unet-{self.cache_key}.xml"
        self._core.set_property({"CACHE_DIR": str(Path(cache_dir) / "blobs")})
        if self.cache_path.exists():
            self._model = self._core.read_model(self.cache_path)
            self.cache_hit = True
        else:
            self._model = self._convert(ov)
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(".tmp.xml")
            ov.save_model(self._model, tmp, compress_to_fp16=self.weights_file_precision == "f16")
            os.replace(tmp.with_suffix(".bin"), self.cache_path.with_suffix(".bin"))  # weights first, then the
            os.replace(tmp, self.cache_path)  # graph: a present .xml always has its .bin
            readable = {"part": "unet", **{k: v for k, v in key.items() if k != "config"}}
            self.cache_path.with_suffix(".json").write_text(json.dumps(readable, indent=1, default=str), encoding="utf-8")
            # Read back from disk: OpenVINO maps the .bin, so the converted float32 constants built in
            # memory by convert_model are dropped instead of held next to the compiled graph.
            self._model = self._core.read_model(self.cache_path)
            self.cache_hit = False
        # The torch UNet is only needed to convert; dropping it frees its weights (SD 1.5: 3.4 GB in
        # float32) once the pipeline's own reference is replaced by this stand-in.
        self.torch_module = None

    dtype = torch.float32
    device = torch.device("cpu")
    int8_path: Path | None = None  # the int8 graph in use (pipelines.approx.int8), None: the float graph
    _recorded: list | None = None  # inputs collected by `recording()`

    @property
    def graph(self):
        """The OpenVINO model every new input shape is compiled from (float, or int8 once quantized)."""
        return self._model

    def use_graph(self, model, *, int8_path: Path | None = None) -> None:
        """Run `model` from now on (a quantized version of this graph); compiled shapes are rebuilt."""
        self._model, self._compiled, self.int8_path = model, {}, int8_path

    def use_float_graph(self) -> None:
        """Back to the converted float graph (read again from the cache; no-op when it is in use)."""
        if self.int8_path is not None:
            self.use_graph(self._core.read_model(self.cache_path))

    @contextmanager
    def recording(self) -> Iterator[list]:
        """Collect the inputs of every call made inside the block (numpy arrays in graph input order),
        the calibration data of post-training quantization."""
        self._recorded = []
        try:
            yield self._recorded
        finally:
            self._recorded = None

    def _example(self, batch: int = 2):
        cfg = self.config
        size = cfg.sample_size if isinstance(cfg.sample_size, int) else cfg.sample_size[0]
        example = [torch.randn(batch, cfg.in_channels, size, size), torch.full((batch,), 500.0),
                   torch.randn(batch, 77, cfg.cross_attention_dim)]
        if self.sdxl:
            pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
            example += [torch.randn(batch, pooled), torch.randn(batch, 6)]
        return tuple(example)

    def _convert(self, ov):
        graph = UNetGraph(self.torch_module, self.sdxl).eval()  # runs in __init__, before the reference goes
        example = self._example()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks traced as constants: fine,
            # every new shape is reshaped and compiled statically. Tracing here without check_trace halves the
            # conversion time (convert_model would trace again, run the model twice more and compare).
            traced = torch.jit.trace(graph, example, check_trace=False, strict=False)
        return ov.convert_model(traced, example_input=example)

    def _compiled_for(self, inputs: list[torch.Tensor]):
        shapes = tuple(tuple(x.shape) for x in inputs)
        if shapes not in self._compiled:
            model = self._model.clone()
            model.reshape({port.get_any_name(): list(shape) for port, shape in zip(model.inputs, shapes)})
            self._compiled[shapes] = self._core.compile_model(
                model, "CPU", {"INFERENCE_PRECISION_HINT": self.inference_precision})
            page_out_mappings_under(self.cache_path.parent)  # the graph file's pages, once compiled
        return self._compiled[shapes]

    def __getattr__(self, name: str):
        # Only reached for attributes a torch UNet has and this stand-in does not (modules, LoRA hooks...).
        raise AttributeError(f"{name!r}: the openvino backend runs a converted UNet graph, so features that need "
                             "the torch UNet's modules (LoRA, ControlNet, attention changes) need backend='torch'")

    def __call__(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs) -> _Output:
        refuse_graph_keywords(kwargs, "The openvino backend", "use backend='torch' for this generation")
        inputs = flat_unet_inputs(sample, timestep, encoder_hidden_states, added_cond_kwargs, self.sdxl)
        compiled = self._compiled_for(inputs)
        arrays = [x.numpy() for x in inputs]
        if self._recorded is not None:
            self._recorded.append([a.copy() for a in arrays])
        result = compiled(arrays)
        return _Output(torch.from_numpy(result[compiled.outputs[0]].copy()))
