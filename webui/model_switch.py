"""The loaded model and how it is replaced: new-before-old only when memory allows.

Loading the new model first keeps the old one serving if the load fails, but briefly needs room
for both. When that room is missing, the old model is released first and, should the new one
fail to load, loaded again, so a failed switch still leaves a working server.

The performance preset (`pipelines.optimize`) is part of what is loaded: `optimize()` is
apply-once (fused and cast modules cannot be undone), so another preset means loading the
checkpoint again through the same path, with the same keep-the-old-model-on-failure rule.

Unloading (A1111's unload-checkpoint) drops the model but remembers which checkpoint and preset it
was, so a reload gives the same model back. On the CPU "moving it off the device", as A1111 does,
would free nothing: the model is released instead, as A1111 1.5's `unload_model_weights` did.
"""

from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path
from typing import Any, Callable

from webui.checkpoints import CheckpointCatalog, CheckpointEntry
from webui.vae_catalog import NONE

logger = logging.getLogger(__name__)

EXACT_PRESET = "exact"  # the preset that changes nothing (mixkit.runtime.PRESETS)
LOAD_MARGIN = 1.5  # loaded fp32 modules and temporary copies take more than the files on disk


def source_size_bytes(source: str) -> int:
    """Bytes of weight files behind a source (0 when unknown, e.g. a hub id not on disk)."""
    path = Path(source)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*")
                   if p.is_file() and p.suffix in (".safetensors", ".bin", ".ckpt", ".pt", ".pth"))
    return 0


def available_memory_bytes(device: str | None) -> int:
    """Free memory where the model will live: the CUDA device's, else the machine's RAM."""
    if device and str(device).startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


def load_new_first(new_bytes: int, available_bytes: int, margin: float = LOAD_MARGIN) -> bool:
    """True when the new model fits next to the loaded one (with `margin` for load-time copies)."""
    return new_bytes * margin <= available_bytes


class ModelHolder:
    """Holds the current text-to-image pipeline (and an img2img view sharing its weights).

    Call `switch` only from the generation worker, so no sampling runs on a model being replaced.
    """

    def __init__(self, catalog: CheckpointCatalog, *, device: str | None = None, pipeline_kwargs: dict | None = None,
                 loader: Callable[[str, str], Any] | None = None,
                 memory_probe: Callable[[str | None], int] = available_memory_bytes,
                 preset: str = EXACT_PRESET, optimizer: Callable[[Any, str], Any] | None = None) -> None:
        self.catalog = catalog
        self.device = device
        self.pipeline_kwargs = pipeline_kwargs or {}
        self._loader = loader or self._load_pipeline
        self._optimizer = optimizer or _optimize
        self.preset = check_preset_name(preset)  # the preset of the loaded model (or of the next load)
        self._memory_probe = memory_probe
        self._lock = threading.Lock()
        self.entry: CheckpointEntry | None = None
        self._txt2img = None
        self._img2img = None
        self._own_vae = None  # the checkpoint's VAE and infotext extras, restored by "Automatic"
        self._own_vae_weights = None  # on an optimised model: a CPU copy of the checkpoint's VAE weights (`set_vae`)
        self.vae_name = "Automatic"

    @classmethod
    def holding(cls, pipe, entry: CheckpointEntry | None = None) -> "ModelHolder":
        """A holder of a pipeline loaded elsewhere (the CLI's), for `set_vae` (the CLI's X/Y/Z VAE axis); it has no
        catalog, so it cannot `switch` checkpoints. `entry`: the checkpoint `pipe` was loaded from ("None" reloads a
        single file's built-in VAE from it)."""
        holder = cls(catalog=None)
        holder._install(entry, pipe, holder.preset)
        return holder

    def _load_pipeline(self, source: str, preset: str):
        from pipelines.optimize import load_options_for
        from pipelines.txt2img import TextToImage

        # A half-precision preset loads in that dtype: no float32 copy at the load's peak.
        return TextToImage.from_pretrained(source, device=self.device, **load_options_for(preset, self.device),
                                           **self.pipeline_kwargs)

    def _load(self, source: str, preset: str):
        """Load `source` and apply `preset` to it; either step raising leaves the holder unchanged."""
        pipe = self._loader(source, preset)  # the preset may choose the load dtypes (load_options_for)
        if preset != EXACT_PRESET:  # "exact" changes nothing by definition: skip the call
            self._optimizer(pipe, preset)
        return pipe

    @property
    def loaded(self) -> bool:
        return self._txt2img is not None

    def loaded_model(self):
        """The loaded pipeline's model, or None: one look under the lock, for request threads that read the model
        while the worker may unload it (testing `loaded` and then calling `txt2img()` raced an unload into a 500)."""
        with self._lock:
            return self._txt2img.model if self._txt2img is not None else None

    def model_device(self):
        """The torch.device the next generation's model is on, known without loading one: the loaded model's, else
        the device a load puts it on (`device`; None loads onto the CPU). The HTTP layer refuses GPU noise with it
        (`webui.api_convert`) before a job is queued."""
        import torch

        device = getattr(self.loaded_model(), "device", None)  # None: nothing loaded (or a stand-in without one)
        return torch.device(device if device is not None else self.device or "cpu")

    @property
    def unloaded(self) -> bool:
        """True after `unload`: a checkpoint is chosen (`entry`) but not in memory."""
        return self.entry is not None and self._txt2img is None

    def unload(self, *, remember: CheckpointEntry | None = None) -> None:
        """Release the loaded model's memory; `entry` and `preset` stay, for `reload` (A1111's unload-checkpoint).

        `remember` replaces the remembered checkpoint: a request that ran on its own checkpoint while the
        server's was unloaded puts that state back. The VAE choice (`vae_name`) stays; the server applies it
        again after the reload.
        """
        with self._lock:
            self._txt2img = self._img2img = None
            self._own_vae = self._own_vae_weights = None
            if remember is not None:
                self.entry = remember
        _release_memory(self.device)

    def reload(self) -> CheckpointEntry:
        """Load the unloaded checkpoint again, with the preset it had (same weights, same outputs); a no-op when
        it is loaded. A failure leaves it unloaded."""
        if self.entry is None:
            raise RuntimeError("No checkpoint has been loaded yet, so there is none to reload; set "
                               "sd_model_checkpoint with POST /sdapi/v1/options.")
        if not self.loaded:
            self._install(self.entry, self._load(self.entry.source, self.preset), self.preset)
        return self.entry

    def txt2img(self):
        with self._lock:
            if self._txt2img is None and self.entry is not None:
                raise RuntimeError(f"Checkpoint {self.entry.title!r} is unloaded; load it again with POST "
                                   "/sdapi/v1/reload-checkpoint (a generation request reloads it too).")
            if self._txt2img is None:
                raise RuntimeError("No model is loaded; choose one in Settings or set sd_model_checkpoint via /sdapi/v1/options.")
            return self._txt2img

    def img2img(self):
        from pipelines.img2img import ImageToImage

        pipe = self.txt2img()
        with self._lock:
            if self._img2img is None or self._img2img.model is not pipe.model:
                self._img2img = ImageToImage.from_pipeline(pipe)
            return self._img2img

    def switch(self, title: str, preset: str | None = None) -> CheckpointEntry:
        """Load checkpoint `title` (from the catalog) with `preset` (None: the current one); a failure keeps the old model.

        Choosing the loaded checkpoint with another preset reloads it: the only way back from an
        applied preset.
        """
        entry = self.catalog.find(title)
        preset = self.preset if preset is None else check_preset_name(preset)
        if self.entry is not None and entry == self.entry and self.loaded and preset == self.preset:
            return entry
        previous_entry, previous, previous_preset = self.entry, self._txt2img, self.preset
        if previous is None or load_new_first(source_size_bytes(entry.source), self._memory_probe(self.device)):
            new = self._load(entry.source, preset)  # raises: nothing changed
            self._install(entry, new, preset)
            return entry
        logger.info("Not enough free memory to hold two models: releasing %s before loading %s", previous_entry.title, entry.title)
        self._install(None, None, previous_preset)
        del previous
        _release_memory(self.device)
        try:
            new = self._load(entry.source, preset)
        except BaseException:
            logger.warning("Loading %s (%s) failed; reloading %s (%s)", entry.title, preset, previous_entry.title,
                           previous_preset)
            self._install(previous_entry, self._load(previous_entry.source, previous_preset), previous_preset)
            raise
        self._install(entry, new, preset)
        return entry

    def set_vae(self, name: str, path: Path | None) -> str:
        """Decode with the VAE at `path` (None: the checkpoint's own); a failed load keeps the current VAE.

        `path=None` restores the VAE the checkpoint was loaded with ("Automatic": a `<name>.vae.*` file next to it
        when there is one); with `name="None"` it is the checkpoint's built-in VAE, as in A1111.

        Call only from the generation worker. Only the VAE changes, so the UNet and text encoders
        stay loaded; the infotext's `VAE:` / `VAE hash:` follow the swap as A1111's do. A chosen file (and "None")
        also decides a refiner's VAE, as A1111's `sd_vae` does for every checkpoint it loads (pipelines.refiner_vae).

        On a model a performance preset changed, the new weights are loaded into the existing VAE (as A1111's
        `sd_vae._load_vae_dict` does), so what the preset did to it (half-precision storage, channels-last, the
        reduced-precision decode and its NaN guard, slicing, page-out) and the infotext's `Optimization` label stay
        true; the checkpoint's own weights are kept on the CPU for "Automatic". An OpenVINO model, whose decoder
        graph was converted from the loaded weights, cannot swap its VAE.
        """
        model = self.txt2img().model
        if self._own_vae is None:
            raise RuntimeError(f"The loaded model {self.entry.title if self.entry else ''!r} has no VAE to replace.")
        own_vae, own_extras = self._own_vae
        from mixkit.runtime.apply import applied_runtime

        runtime = applied_runtime(model)
        in_place = runtime is not None and not runtime.changed_nothing
        if in_place and runtime.backend != "torch":
            raise ValueError(f"The VAE cannot be swapped on a model optimised for the {runtime.backend} backend: its "
                             "decoder graph was converted from the loaded VAE's weights. Choose the VAE first, then "
                             "apply the preset (or use the torch backend).")
        from mixkit.models.diffusion.loading import BUILT_IN_VAE, VAE_SETTING_KEY, load_vae

        if path is None and name == NONE and own_extras.get("vae_name") and self._single_file_source():
            # A1111's "None" is the checkpoint's built-in VAE even when "Automatic" found `<name>.vae.*` next to it.
            vae = load_vae(self._single_file_source(), dtype=own_vae.dtype, like=own_vae.config).to(own_vae.device)
            extras = {"vae_name": None, "vae_hash": None}
        elif path is None:
            vae, extras = own_vae, dict(own_extras)  # a copy: the setting key is added below
        else:
            from mixkit.io.hashing import a1111_model_hash

            vae = load_vae(path, dtype=own_vae.dtype, like=own_vae.config).to(own_vae.device)  # raises: nothing changed
            # A1111 writes `VAE:` as the file name with its extension, the value its sd_vae option lists.
            extras = {"vae_name": Path(path).name, "vae_hash": a1111_model_hash(path) if Path(path).is_file() else None}
        # what a refiner decodes with (pipelines.refiner_vae): a chosen file, or "None" (its built-in VAE), goes with
        # every checkpoint as A1111's sd_vae does; "Automatic" leaves the refiner its own
        extras[VAE_SETTING_KEY] = BUILT_IN_VAE if name == NONE else Path(path).name if path is not None else None
        if in_place and vae is not own_vae:
            check_same_layout(model.vae, vae, name)  # all or nothing: load_state_dict writes what fits, then raises
        with self._lock:
            if in_place:
                if self._own_vae_weights is None:  # before the first swap writes over them
                    self._own_vae_weights = {key: tensor.detach().to("cpu", copy=True)
                                             for key, tensor in model.vae.state_dict().items()}
                model.vae.load_state_dict(self._own_vae_weights if vae is own_vae else vae.state_dict())
            else:
                model.vae = vae
            for key, value in extras.items():
                if value is None:
                    model.extras.pop(key, None)
                else:
                    model.extras[key] = value
            self.vae_name = name
        return name

    def _single_file_source(self) -> str | None:
        """The loaded checkpoint's file when it is a single file (whose built-in VAE "None" selects), else None."""
        source = self.entry.source if self.entry else None
        return source if source and Path(source).is_file() else None

    def _install(self, entry: CheckpointEntry | None, pipe, preset: str) -> None:
        with self._lock:
            self.entry, self._txt2img, self._img2img, self.preset = entry, pipe, None, preset
            model = getattr(pipe, "model", None)
            has_vae = hasattr(model, "vae") and isinstance(getattr(model, "extras", None), dict)
            self._own_vae = (model.vae, {k: model.extras.get(k) for k in ("vae_name", "vae_hash")}) if has_vae else None
            self._own_vae_weights = None
            self.vae_name = "Automatic"


def check_same_layout(current, new, name: str) -> None:
    """Refuse a VAE whose tensors are not the loaded one's, name for name and shape for shape (another architecture),
    before anything is copied into the optimised model's VAE."""
    have = {key: tuple(tensor.shape) for key, tensor in current.state_dict().items()}
    want = {key: tuple(tensor.shape) for key, tensor in new.state_dict().items()}
    if have != want:
        differ = sorted(key for key in have.keys() | want.keys() if have.get(key) != want.get(key))
        raise ValueError(f"VAE {name!r} does not fit the loaded model's VAE ({len(differ)} tensors differ, e.g. "
                         f"{differ[0]}: {want.get(differ[0])} vs {have.get(differ[0])}); choose a VAE of this model's "
                         "family.")


def check_preset_name(preset: object) -> str:
    """`preset` if it names a `mixkit.runtime.PRESETS` entry; UnknownNameError listing them otherwise."""
    from mixkit.runtime import PRESETS

    if not isinstance(preset, str):
        raise TypeError(f"performance preset must be a name (str), got {preset!r}; valid: {PRESETS.names()}.")
    PRESETS.get(preset)
    return preset


def _optimize(pipe, preset: str) -> None:
    from pipelines.optimize import optimize

    optimize(pipe, preset)


def _release_memory(device: str | None) -> None:
    gc.collect()
    if device and str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()

