"""Convert torch modules to OpenVINO once, cache the graphs on disk, compile each static shape once.

Shared by the UNet, VAE and text-encoder stand-ins. A cache entry is named by a key that holds
everything the graph depends on: which part it is, its config, the model's hash and merged LoRA
set (readable in a `.json` next to the graph), a content hash of the weights (so a weight change
nobody declared can never reuse a stale graph) and, for static graphs, the input shapes.
Writes are atomic (weights, then the graph, each via rename), so a crash never leaves an `.xml`
without its `.bin`.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch

from mixkit.runtime.resident_pages import page_out_mappings_under

OPENVINO_HINT = "pip install openvino  (or: pip install 'mixkit[openvino]')"


def openvino_cache_dir() -> Path:
    """Where converted graphs live unless a caller says otherwise: `<mixkit cache>/openvino`."""
    from mixkit.io.cache_root import cache_root

    return cache_root() / "openvino"


def require_openvino():
    try:
        import openvino
    except ImportError as error:
        raise ImportError(f"The 'openvino' execution backend needs the openvino package: {OPENVINO_HINT}") from error
    return openvino


def weights_fingerprint(module: torch.nn.Module) -> str:
    """A content hash of every parameter and buffer (sha256 of the raw bytes).

    Hashing all bytes costs about a second per GB, paid once per export; a cheaper sum-based key
    could collide after a LoRA merge with small changes and silently reuse a stale graph.
    """
    digest = hashlib.sha256()
    for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()
                      if tensor.dtype != torch.bfloat16 else tensor.detach().float().numpy().tobytes())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class ExportIdentity:
    """Where the weights came from: the model file's hash and the LoRAs merged into them.

    `loras` entries are free text such as "name:hash:strength" (sorted, so order does not matter).
    Both go into the cache key and its readable `.json`; the weights fingerprint backs them up.
    """

    model_hash: str | None = None
    loras: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.model_hash is not None and not isinstance(self.model_hash, str):
            raise TypeError(f"ExportIdentity.model_hash must be a str or None, got {self.model_hash!r}")
        if isinstance(self.loras, str) or not all(isinstance(x, str) for x in self.loras):
            raise TypeError(f"ExportIdentity.loras must be a sequence of str (e.g. 'name:hash:1.0'), got {self.loras!r}")
        object.__setattr__(self, "loras", tuple(sorted(self.loras)))


def cache_key(part: str, module: torch.nn.Module, identity: ExportIdentity, shapes: Sequence[Sequence[int]] | None,
              extra: dict | None = None, fingerprint: str | None = None) -> dict:
    """Everything a converted graph of `module` depends on, as JSON-able data.

    `fingerprint` is `weights_fingerprint(module)` if the caller already has it (it costs a pass over the weights).
    """
    return {"part": part, "model_hash": identity.model_hash, "loras": list(identity.loras),
            "shapes": [list(s) for s in shapes] if shapes is not None else None,
            "fingerprint": fingerprint or weights_fingerprint(module), "config": graph_config(module), **(extra or {})}


def graph_config(module) -> dict:
    """The module's config as a converted graph depends on it: without `_name_or_path` (where the folder was
    loaded from), so the same weights loaded from another path or a copied folder reuse the cache entry."""
    config = getattr(module, "config", {})
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    return {k: v for k, v in config.items() if k != "_name_or_path"}


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]


def load_or_export(cache_dir: Path, key: dict, convert: Callable[[], object]):
    """The cached OpenVINO model for `key`, converting (and saving) it first if there is none.

    Returns (model, xml path, cache hit).
    """
    ov = require_openvino()
    path = Path(cache_dir) / f"{key['part']}-{key_digest(key)}.xml"
    core = ov.Core()
    if path.exists():
        return core.read_model(path), path, True
    model = convert()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.xml")
    try:
        ov.save_model(model, tmp, compress_to_fp16=False)
        os.replace(tmp.with_suffix(".bin"), path.with_suffix(".bin"))  # weights first, then the
        os.replace(tmp, path)  # graph: a present .xml always has its .bin
    finally:  # a failed save (disk full...) leaves no half-written temporary files behind
        for leftover in (tmp, tmp.with_suffix(".bin")):
            leftover.unlink(missing_ok=True)
    readable = {k: v for k, v in key.items() if k != "config"}
    path.with_suffix(".json").write_text(json.dumps(readable, indent=1, default=str), encoding="utf-8")
    return model, path, False


def trace_to_openvino(graph: torch.nn.Module, example: tuple, static: bool):
    """Trace `graph` on `example` and convert it; `static` fixes every input to the example's shape."""
    ov = require_openvino()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks traced as constants: the
        # graph is only ever run at the traced (static) shape or reshaped and compiled per shape.
        traced = torch.jit.trace(graph.eval(), example, check_trace=False, strict=False)
        model = ov.convert_model(traced, example_input=example)
    if static:
        model.reshape({port.get_any_name(): list(x.shape) for port, x in zip(model.inputs, example)})
    return model


class CompiledShapes:
    """One OpenVINO model compiled once per input-shape combination, static shapes each time.

    OpenVINO's CPU plugin runs static shapes faster than dynamic ones; `CACHE_DIR` makes a second
    process reuse the compiled blob instead of compiling again.
    """

    def __init__(self, model, *, cache_dir: Path, inference_precision: str) -> None:
        ov = require_openvino()
        self.model = model
        self.inference_precision = inference_precision
        self.cache_dir = Path(cache_dir)
        self._core = ov.Core()
        self._core.set_property({"CACHE_DIR": str(self.cache_dir / "blobs")})
        self._compiled: dict[tuple, object] = {}

    def __call__(self, inputs: list) -> list:
        """Run on numpy arrays; returns the outputs as float32 torch tensors, in graph order."""
        shapes = tuple(tuple(x.shape) for x in inputs)
        if shapes not in self._compiled:
            model = self.model.clone()
            if [tuple(port.get_partial_shape()) for port in model.inputs] != [tuple(s) for s in shapes]:
                # a dynamic graph, or a static one made at another size (the int8 VAE decoder)
                model.reshape({port.get_any_name(): list(shape) for port, shape in zip(model.inputs, shapes)})
            self._compiled[shapes] = self._core.compile_model(
                model, "CPU", {"INFERENCE_PRECISION_HINT": self.inference_precision})
            page_out_mappings_under(self.cache_dir)  # the compiled copy is what runs; the file pages can go
        compiled = self._compiled[shapes]
        result = compiled(inputs)
        return [torch.from_numpy(result[port].copy()) for port in compiled.outputs]


def ov_precision(dtype_name: str | None) -> str:
    """OpenVINO's inference precision for a mixkit precision name ("bfloat16" -> "bf16", else "f32")."""
    return "bf16" if dtype_name == "bfloat16" else "f32"
