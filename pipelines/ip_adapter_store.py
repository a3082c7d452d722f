"""IP-Adapter weights and CLIP image encoders read once per file version, shared between calls and pipelines.

Why a store apart from the pipeline: a server builds a new pipeline object for every job (`from_pipeline`), so a
cache inside the pipeline read the adapter file and loaded the image encoder again at each job. A store outlives
the pipelines that read through it (`IPAdapterMixin.use_ip_adapter_store`). Entries are keyed by the resolved path,
size and modification time of the files read, so a replaced file is read again, and `release()` frees everything
(a server calls it with its other unit models, at unload-checkpoint). The weights and encoders live in a
`pipelines.unit_model_cache.UnitModelCache`: a server's store shares its ControlNets' (one size limit for both, as
sd-webui-controlnet has); a store made alone keeps everything it read.

`shape()` answers what a request check needs (the family, the embedding width the adapter reads, plain or plus)
without loading tensors where it can: a `.safetensors` adapter from its header, a pickled `.bin` by reading it once
through the safe reader, kept here, so the job that follows does not read it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import CheckpointFormatError
from pipelines.unit_model_cache import UnitModelCache

WEIGHTS = "ip-adapter weights"  # the first part of this store's keys in the shared cache
ENCODER = "ip-adapter image encoder"


@dataclass(frozen=True)
class AdapterShape:
    """What an adapter file is made for, read without attaching it: enough to refuse it before a job is queued."""

    cross_dim: int  # the text-embedding width its image tokens join (768 SD 1.x, 1024 SD 2.x, 2048 SDXL)
    encoder_dim: int  # the image-encoder output width it reads (projection_dim plain, hidden_size plus)
    kind: str  # "plain" or "plus" (`pipelines.ip_adapter_layers.adapter_kind`)


def file_version(file: Path) -> tuple[str, int, int]:
    """(resolved path, size, mtime in ns): a file replaced in place (another size or time) is another version."""
    stat = file.stat()
    return str(file.resolve()), stat.st_size, stat.st_mtime_ns


def folder_version(folder: Path) -> tuple:
    """The resolved folder with the version of every file directly in it (config.json and the weights)."""
    files = sorted(path for path in folder.iterdir() if path.is_file())
    return (str(folder.resolve()),) + tuple((path.name,) + file_version(path)[1:] for path in files)


class IPAdapterStore:
    """Adapter weights (CPU, as read) by file version, their shapes, and image encoders by folder version, device
    and dtype. Thread-safe: request threads ask for shapes while the generation worker reads weights.

    `cache`: where weights and encoders are kept (a server's, shared with its ControlNets and bounded by its
    `control_net_model_cache_size`); None: an unbounded one of this store. Shapes are a few numbers: always kept."""

    def __init__(self, cache: UnitModelCache | None = None) -> None:
        self._lock = threading.Lock()
        self._models = cache if cache is not None else UnitModelCache(size=None)
        self._shapes: dict[tuple, AdapterShape] = {}

    def weights(self, file: Path, name: str) -> tuple[dict, str]:
        """({"image_proj", "ip_adapter"} state, kind) of an adapter file, read on first use of this version;
        CheckpointFormatError / UnsafeCheckpointError / ValueError (an unsupported variant) name the file."""
        from pipelines import ip_adapter_files
        from pipelines.ip_adapter_layers import adapter_kind, cross_dim_of, encoder_dim_needed

        key = file_version(file)
        kept = self._models.get((WEIGHTS, key))
        if kept is not None:
            return kept
        state = ip_adapter_files.read_ip_adapter_weights(file)  # outside the lock: a big file takes a while
        if file.suffix.lower() != ".safetensors":
            state = _owned(state)
        kind = adapter_kind(name, state["image_proj"])
        shape = AdapterShape(cross_dim_of(state, kind), encoder_dim_needed(state, kind), kind)
        self._models.forget(lambda old: old[0] == WEIGHTS and old[1][0] == key[0] and old[1] != key)
        with self._lock:
            for old in [old for old in self._shapes if old[0] == key[0] and old != key]:
                del self._shapes[old]
            self._shapes[key] = shape
        return self._models.put((WEIGHTS, key), (state, kind), family_width=shape.cross_dim)

    def shape(self, file: Path, name: str) -> AdapterShape:
        """The adapter's `AdapterShape`: remembered, else from a `.safetensors` header, else the file read once
        (and kept for the job). Raises as `weights` does for a file that is no usable IP-Adapter."""
        key = file_version(file)
        with self._lock:
            if key in self._shapes:
                return self._shapes[key]
        if file.suffix.lower() != ".safetensors":
            self.weights(file, name)
            with self._lock:
                return self._shapes[key]
        shape = _header_shape(file, name)
        with self._lock:
            self._shapes[key] = shape
        return shape

    def encoder(self, folder: Path, device, dtype) -> tuple:
        """(CLIPVisionModelWithProjection, CLIPImageProcessor) of an encoder folder on `device` in `dtype`, loaded on
        first use of this folder version there."""
        from pipelines import ip_adapter_files

        key = (ENCODER, folder_version(folder), str(device), str(dtype))
        kept = self._models.get(key)
        if kept is not None:
            return kept
        loaded = ip_adapter_files.load_image_encoder(folder, device, dtype)
        # the folder's files changed: the old encoder is never asked for again
        self._models.forget(lambda old: old[0] == ENCODER and old[1][0] == key[1][0] and old[1] != key[1])
        return self._models.put(key, loaded)  # no family: one CLIP encoder serves SD 1.5 and SDXL adapters

    def release(self) -> int:
        """Forget every adapter and encoder (their memory goes back once no running call holds them); returns how
        many weights files and encoders were held."""
        with self._lock:
            self._shapes.clear()
        return self._models.forget(_is_own_key)

    def __len__(self) -> int:
        """Weights files and encoders held (shapes alone hold no tensors)."""
        return sum(1 for key in self._models.keys() if _is_own_key(key))


def _is_own_key(key) -> bool:
    return isinstance(key, tuple) and bool(key) and key[0] in (WEIGHTS, ENCODER)


def _owned(state: dict) -> dict:
    """The state with tensors that own their memory. Why: torch reads a zip `.bin` memory-mapped, and a file copied
    over in place (`cp new.bin ip-adapter.bin`) would change the tensors a store keeps, or fault on a shorter file."""
    import torch

    return {part: {key: value.clone() if isinstance(value, torch.Tensor) else value for key, value in values.items()}
            for part, values in state.items()}


def _header_shape(file: Path, name: str) -> AdapterShape:
    """An adapter's shape from its safetensors header (h94's `image_proj.` / `ip_adapter.` keys), no tensor read."""
    from mixkit.io.safetensors_header import METADATA_KEY, read_safetensors_header
    from pipelines.ip_adapter_layers import adapter_kind

    header = read_safetensors_header(file)
    parts: dict[str, dict] = {"image_proj": {}, "ip_adapter": {}}
    for key, entry in header.items():
        part, _, rest = key.partition(".")
        if key != METADATA_KEY and part in parts and rest and isinstance(entry, dict):
            parts[part][rest] = entry.get("shape") or []
    if not parts["image_proj"] or not parts["ip_adapter"]:
        raise CheckpointFormatError(f"{str(file)!r} is not an IP-Adapter checkpoint: it has no 'image_proj' and "
                                    "'ip_adapter' weights (h94/IP-Adapter's layout). Is it a ControlNet or LoRA file?")
    image_proj = parts["image_proj"]
    kind = adapter_kind(name, image_proj)  # only the key names are read: FaceID and other variants refused here
    try:
        if kind == "plain":
            return AdapterShape(int(image_proj["norm.weight"][0]), int(image_proj["proj.weight"][1]), kind)
        return AdapterShape(int(image_proj["proj_out.weight"][0]), int(image_proj["proj_in.weight"][1]), kind)
    except (KeyError, IndexError, TypeError, ValueError):
        raise CheckpointFormatError(f"{str(file)!r} has IP-Adapter keys of unexpected shapes; it is damaged or a "
                                    "variant mixkit does not read. Re-download it (h94/IP-Adapter).") from None
