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
from mixkit.runtime.openvino_cache import (OPENVINO_HINT, CompiledShapes, ExportIdentity,  # noqa: F401
                                           graph_config, load_or_export, require_openvino, trace_to_openvino,
                                           weights_fingerprint)
from mixkit.models.diffusion.deepcache_branch import branch_layers, check_shallow_layers, shallow_part
from mixkit.runtime.resident_pages import page_out_mappings_under
from mixkit.runtime.unet_graph import (FeatureUNetGraph, ShallowUNetGraph, UNetGraph, flat_unet_inputs, is_sdxl,
                                       refuse_graph_keywords)

GRAPH_OUTPUTS = "sample+deepcache-features"  # in the cache key: graphs saved before had the sample only


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, e.g. under taskset or a container)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


@dataclass
class _Output:
    sample: torch.Tensor


class OpenVinoUNet:
    """Stands in for a diffusers UNet in mixkit's sampling loop (same call, `.sample` output).

    Inputs and outputs are float32 on the CPU; OpenVINO chooses the inner precision from
    `inference_precision` ("bf16" on AVX512-BF16/AMX CPUs, else "f32"). Keyword features the graph
    does not contain (ControlNet residuals, cross-attention kwargs) are refused, never ignored.

    The graph also returns DeepCache's deep features (`FeatureUNetGraph`; read only when DeepCache
    asks), and the stand-in keeps the shallow branch's torch modules (a few percent of the weights), so
    `deepcache_branch` can export that branch later without the full torch UNet.
    """

    def __init__(self, unet: torch.nn.Module, *, cache_dir: str | os.PathLike, inference_precision: str = "f32",
                 identity: ExportIdentity | None = None) -> None:
        ov = require_openvino()
        self._ov = ov
        self.torch_module = unet
        self.config = unet.config
        self.sdxl = is_sdxl(unet.config)
        self.inference_precision = inference_precision
        self._core = ov.Core()
        self._compiled: dict[tuple, object] = {}
        # bf16 inference: the graph file holds float16 weights (half the mapped pages while compiling;
        # float16 keeps more mantissa than the bfloat16 the plugin computes in, so nothing is lost).
        self.weights_file_precision = "f16" if inference_precision == "bf16" else "f32"
        self.deepcache_layers = branch_layers(unet)  # 0: the UNet's layout has no DeepCache branch
        key = {"fingerprint": weights_fingerprint(unet), "config": graph_config(unet), "sdxl": self.sdxl,
               "weights_file": self.weights_file_precision, "outputs": GRAPH_OUTPUTS}
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
        self._shallow_part = shallow_part(unet) if self.deepcache_layers else None
        self._branches: dict[int, OpenVinoDeepCacheBranch] = {}
        self.torch_module = None

    dtype = torch.float32
    device = torch.device("cpu")
    # An even batch (classifier-free guidance's prompt and negative-prompt rows) runs as this many
    # requests of an equal share of the rows, started together on as many CPU streams, each on its share
    # of the cores. Two half-batch requests kept both cores busier than one batch-2 request: 1.02-1.075x
    # per SD 1.5 call at 256 px and 1.02-1.05x at 512 px (2-core AVX512-BF16 CPU, bf16, alternating
    # rounds). Each row's arithmetic is the same as in the whole batch, up to bf16 rounding. 1: one request.
    _parallel_requests: int = 2

    @property
    def parallel_requests(self) -> int:
        return self._parallel_requests

    @parallel_requests.setter
    def parallel_requests(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"parallel_requests must be a positive integer (1: the whole batch as one request), "
                             f"got {value!r}")
        self._parallel_requests = value

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
        graph = (FeatureUNetGraph(self.torch_module, self.sdxl, self.deepcache_layers) if self.deepcache_layers
                 else UNetGraph(self.torch_module, self.sdxl)).eval()  # runs in __init__, before the reference goes
        example = self._example()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks traced as constants: fine,
            # every new shape is reshaped and compiled statically. Tracing here without check_trace halves the
            # conversion time (convert_model would trace again, run the model twice more and compare).
            traced = torch.jit.trace(graph, example, check_trace=False, strict=False)
        return ov.convert_model(traced, example_input=example)

    def _request_count(self, batch: int) -> int:
        """How many requests share a call's rows: `parallel_requests` when the rows and cores split evenly."""
        parts = self.parallel_requests
        return parts if parts > 1 and batch % parts == 0 and usable_cores() >= parts else 1

    def _compiled_for(self, inputs: list[torch.Tensor], with_features: bool = False, requests: int = 1):
        """The graph compiled for these input shapes; without `with_features` its DeepCache feature outputs
        are cut off first, so a plain call runs exactly the plain UNet graph. With `requests` > 1: compiled
        for 1/requests of the rows on as many CPU streams, with one infer request per stream."""
        shapes = tuple((x.shape[0] // requests, *x.shape[1:]) for x in inputs)
        key = (shapes, with_features and len(self._model.outputs) > 1, requests)
        if key not in self._compiled:
            model = self._model.clone()
            if not key[1] and len(model.outputs) > 1:
                model = self._ov.Model([model.output(0)], model.get_parameters(), model.get_friendly_name())
            model.reshape({port.get_any_name(): list(shape) for port, shape in zip(model.inputs, shapes)})
            config = {"INFERENCE_PRECISION_HINT": self.inference_precision}
            if requests > 1:
                config.update(PERFORMANCE_HINT="THROUGHPUT", NUM_STREAMS=requests)
            compiled = self._core.compile_model(model, "CPU", config)
            self._compiled[key] = (compiled, [compiled.create_infer_request() for _ in range(requests)])
            page_out_mappings_under(self.cache_path.parent)  # the graph file's pages, once compiled
        return self._compiled[key]

    def __getattr__(self, name: str):
        # Only reached for attributes a torch UNet has and this stand-in does not (modules, LoRA hooks...).
        raise AttributeError(f"{name!r}: the openvino backend runs a converted UNet graph, so features that need "
                             "the torch UNet's modules (LoRA, ControlNet, attention changes) need backend='torch'")

    def __call__(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs) -> _Output:
        # through `forward`, as torch modules call theirs: what wraps a UNet's call (DeepCache) is a ForwardPatch
        # on it (mixkit.forward_patches), stacked and removed in any order as on the torch UNet
        return self.forward(sample, timestep, encoder_hidden_states, added_cond_kwargs, **kwargs)

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs) -> _Output:
        """One plain UNet call on the graph: the UNet's output alone."""
        return _Output(self.run_graph(sample, timestep, encoder_hidden_states, added_cond_kwargs, kwargs)[0])

    def run_graph(self, sample, timestep, encoder_hidden_states, added_cond_kwargs, kwargs: dict,
                  feature: int = 0) -> list[torch.Tensor]:
        """One call of the UNet graph (recorded for calibration): [UNet output] or, with `feature` k,
        [UNet output, the deep feature of a DeepCache branch with k shallow layers]."""
        refuse_graph_keywords(kwargs, "The openvino backend", "use backend='torch' for this generation")
        inputs = flat_unet_inputs(sample, timestep, encoder_hidden_states, added_cond_kwargs, self.sdxl)
        count = self._request_count(inputs[0].shape[0])
        _, requests = self._compiled_for(inputs, with_features=bool(feature), requests=count)
        arrays = [x.numpy() for x in inputs]
        if self._recorded is not None:
            self._recorded.append([a.copy() for a in arrays])
        rows = arrays[0].shape[0] // count
        for part, request in enumerate(requests):  # started together: one stream each
            request.start_async([a[part * rows:(part + 1) * rows] for a in arrays])
        for request in requests:
            request.wait()
        wanted = [0, feature] if feature else [0]
        return [torch.cat([torch.from_numpy(r.get_output_tensor(i).data.copy()) for r in requests]) for i in wanted]

    def check_deepcache_branch(self, shallow_layers: int) -> None:
        """Refuse a DeepCache setting this graph cannot serve, naming why (before anything changes)."""
        if not self.deepcache_layers:
            raise ValueError("DeepCache cannot split this UNet's outer blocks (not diffusers' SD layout), so its "
                             "OpenVINO graph has no DeepCache branch; generate without DeepCache")
        check_shallow_layers(shallow_layers, self.deepcache_layers)

    def deepcache_branch(self, shallow_layers: int) -> "OpenVinoDeepCacheBranch":
        """DeepCache's two halves on this graph: exports (once, cached on disk next to the UNet graph) the
        shallow branch with `shallow_layers` layers; the full half is the UNet graph's own feature output."""
        self.check_deepcache_branch(shallow_layers)
        if shallow_layers not in self._branches:
            self._branches[shallow_layers] = OpenVinoDeepCacheBranch(self, shallow_layers)
        return self._branches[shallow_layers]


class OpenVinoDeepCacheBranch:
    """The shallow branch as a graph of its own, kept in floating point (bf16 inference) also when the UNet
    graph is int8: it is a small share of the work, and it is what carries each step's detail."""

    def __init__(self, unet: OpenVinoUNet, shallow_layers: int) -> None:
        self.unet, self.shallow_layers = unet, shallow_layers
        key = {"part": "unet-shallow", "unet": unet.cache_key, "shallow_layers": shallow_layers}
        model, self.cache_path, self.cache_hit = load_or_export(
            unet.cache_path.parent, key, lambda: trace_to_openvino(self._graph(), self._example(), static=False))
        self._compiled = CompiledShapes(model, cache_dir=unet.cache_path.parent,
                                        inference_precision=unet.inference_precision)

    def _graph(self) -> ShallowUNetGraph:
        return ShallowUNetGraph(self.unet._shallow_part, self.unet.sdxl, self.shallow_layers)

    def _example(self) -> tuple:
        example = list(self.unet._example(batch=2))
        # The UNet graph's own feature output says the feature's channels (static even in a dynamic graph).
        channels = self.unet.graph.outputs[self.shallow_layers].get_partial_shape()[1].get_length()
        size = example[0].shape[-1]
        example.insert(3, torch.randn(2, channels, size, size))
        return tuple(example)

    def full(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs):
        """A full UNet call; returns (output, the feature the shallow branch starts from)."""
        output, feature = self.unet.run_graph(sample, timestep, encoder_hidden_states, added_cond_kwargs, kwargs,
                                              feature=self.shallow_layers)
        return _Output(output), feature

    def shallow(self, feature, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs) -> _Output:
        refuse_graph_keywords(kwargs, "The openvino backend", "use backend='torch' for this generation")
        inputs = flat_unet_inputs(sample, timestep, encoder_hidden_states, added_cond_kwargs, self.unet.sdxl)
        inputs.insert(3, feature.float().contiguous())
        return _Output(self._compiled([x.numpy() for x in inputs])[0])

