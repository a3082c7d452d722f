"""Model upscalers (ESRGAN / Real-ESRGAN / SRVGG / SwinIR / DAT / HAT / ScuNET files) as pixel upscalers, run the way
A1111 runs them.

A1111 names each file of `models/ESRGAN` (or `models/SwinIR`, `models/DAT`, `models/ScuNET`) by its stem
("4x-UltraSharp"), ScuNET's release files "ScuNET GAN" / "ScuNET PSNR", Real-ESRGAN's
release files by its own names ("R-ESRGAN 4x+" for RealESRGAN_x4plus.pth), its DAT downloads "DAT x4" (SwinIR's
download SwinIR_4x.pth by its stem, "SwinIR 4x" resolving to it), and upscales by
`scale` as its `Upscaler.upscale` does: run the network (at most 3 times, until the image covers the target), then
Lanczos-resize to the target. Each run is tiled as A1111's `upscale_with_model` (`ESRGAN_tile` 192 input pixels,
`ESRGAN_tile_overlap` 8; 0 = one piece) so a large image fits in memory. One network stays loaded at a time: the
files are 17-67 MB and a web UI switches between them rarely.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.upscale import UPSCALERS, UpscaleLimits, check_output_size, target_size, tiled_upscale

logger = logging.getLogger(__name__)

DEFAULT_TILE_SIZE = 192  # A1111's ESRGAN_tile
DEFAULT_TILE_OVERLAP = 8  # A1111's ESRGAN_tile_overlap
MAX_PASSES = 3  # A1111's Upscaler.upscale runs a model at most 3 times
# A1111 shows Real-ESRGAN's release files by its own names (modules/realesrgan_model.py), and infotexts and API
# requests use them ("Hires upscaler: R-ESRGAN 4x+"): these files register under those names, every other by its stem.
A1111_REALESRGAN_NAMES = {
    "realesr-general-x4v3": "R-ESRGAN General 4xV3", "realesr-general-wdn-x4v3": "R-ESRGAN General WDN 4xV3",
    "realesr-animevideov3": "R-ESRGAN AnimeVideo", "RealESRGAN_x4plus": "R-ESRGAN 4x+",
    "RealESRGAN_x4plus_anime_6B": "R-ESRGAN 4x+ Anime6B", "RealESRGAN_x2plus": "R-ESRGAN 2x+",
}
# A1111's SwinIR entry "SwinIR 4x" is its download of Real-SwinIR-L x4 (003_realSR_BSRGAN_DFOWMFC_s64w8_SwinIR-L_x4_GAN),
# saved as models/SwinIR/SwinIR_4x.pth. It is listed under that name only while no file is in the folder (the download
# URL stands in, extensions-builtin/SwinIR `find_models`); once a file is there A1111 lists the folder's files by stem,
# so the file is "SwinIR_4x" (listed, written in infotexts) and "SwinIR 4x" (the name of that first run's infotexts)
# only resolves to it.
A1111_SWINIR_ALIASES = {"SwinIR_4x": "SwinIR 4x"}
# A1111's DAT entries are the DAT paper's releases, downloaded as models/DAT/DAT_x2.pth ... (modules/dat_model.py)
A1111_DAT_NAMES = {"DAT_x2": "DAT x2", "DAT_x3": "DAT x3", "DAT_x4": "DAT x4"}
# A1111's ScuNET entries (extensions-builtin/ScuNET) are the SCUNet paper's two colour releases. A1111 itself downloads
# the GAN one as models/ScuNET/ScuNET.pth and lists that by its stem; "ScuNET GAN" also resolves to such a file
# (A1111_SCUNET_ALIASES) unless a scunet_color_real_gan file holds the name.
A1111_SCUNET_NAMES = {"scunet_color_real_gan": "ScuNET GAN", "scunet_color_real_psnr": "ScuNET PSNR"}
A1111_SCUNET_ALIASES = {"ScuNET": "ScuNET GAN"}
A1111_RELEASE_NAMES = {**A1111_REALESRGAN_NAMES, **A1111_DAT_NAMES, **A1111_SCUNET_NAMES}
# A release file is also known by its stem (an alias: it resolves, e.g. "Hires upscaler: DAT_x4"). A1111 lists the
# stem too for its DAT folder, which lists every file by stem: DAT_x4.pth is both "DAT_x4" (the file) and "DAT x4" (the
# release entry, listed while `dat_enabled_models` holds it). Real-ESRGAN's folder lists only its release names; its
# stems resolve (the name the file has in A1111's ESRGAN folder) but are not listed.
# A1111's ScuNET folder lists its files by stem as well ("scunet_color_real_gan"), next to its "ScuNET PSNR" entry.
A1111_LISTED_STEMS = frozenset(A1111_DAT_NAMES) | frozenset(A1111_SCUNET_NAMES)
# Which of A1111's tile option pairs a network uses: ESRGAN_tile for ESRGAN and Real-ESRGAN (SRVGG) files and for HAT
# (which A1111 1.8+ runs from its ESRGAN folder through spandrel, with the ESRGAN upscaler's tiling), SWIN_tile for
# SwinIR (extensions-builtin/SwinIR), DAT_tile for DAT (modules/dat_model.py), SCUNET_tile for ScuNET
# (extensions-builtin/ScuNET)
TILE_OPTIONS = {"ESRGAN": "ESRGAN", "SRVGG": "ESRGAN", "HAT": "ESRGAN", "SwinIR": "SWIN", "DAT": "DAT",
                "ScuNET": "SCUNET"}
# A1111's defaults of those pairs (tile, overlap): 192 / 8, but SCUNET_tile 256 (its Settings > Upscaling)
A1111_TILING_DEFAULTS = {"ESRGAN": (192, 8), "SWIN": (192, 8), "DAT": (192, 8), "SCUNET": (256, 8)}


def upscaler_name(path: str | os.PathLike) -> str:
    """The name A1111 shows for an upscaler file: its name for a Real-ESRGAN release file or its DAT downloads, else
    the file stem (SwinIR_4x.pth too: see A1111_SWINIR_ALIASES)."""
    stem = Path(path).stem
    return A1111_RELEASE_NAMES.get(stem, stem)


def upscaler_aliases(path: str | os.PathLike) -> list[str]:
    """The other names A1111 knows an upscaler file by: the stem of a release file ("DAT_x4" for "DAT x4"), the
    download name of A1111's SwinIR file ("SwinIR 4x" for SwinIR_4x.pth) or ScuNET file ("ScuNET GAN" for
    ScuNET.pth)."""
    stem = Path(path).stem
    for aliases in (A1111_SWINIR_ALIASES, A1111_SCUNET_ALIASES):
        if stem in aliases:
            return [aliases[stem]]
    return [stem] if stem != upscaler_name(path) else []


def check_tiling(tile_size: Any, tile_overlap: Any) -> None:
    """Refuse tile settings `tiled_upscale` cannot use (0 = untiled)."""
    if isinstance(tile_size, bool) or not isinstance(tile_size, int) or not (tile_size == 0 or tile_size >= 8):
        raise ValueError(f"tile_size must be 0 (no tiling) or an integer >= 8 input pixels, got {tile_size!r}.")
    top = tile_size // 2 - 1 if tile_size else None  # without tiles the overlap is unused (A1111 ignores it too)
    if isinstance(tile_overlap, bool) or not isinstance(tile_overlap, int) or tile_overlap < 0 \
            or (top is not None and tile_overlap > top):
        raise ValueError(f"tile_overlap must be an integer in [0, {top}] for tile_size {tile_size}, got {tile_overlap!r}.")


class _LoadedNetwork:
    """The one network in memory, keyed by file, its modification time, device, dtype and compilation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple | None = None
        self.model = None

    def get(self, path: Path, device, dtype, compile_model: bool = False):
        from mixkit.models.upscalers.loading import load_upscaler

        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, str(device), str(dtype), compile_model)
        with self.lock:
            if self.key != key:
                self.key, self.model = None, None  # free the previous network before loading the next
                model = load_upscaler(path, device=device, dtype=dtype)
                if compile_model:
                    # A1111's SWIN_torch_compile; a compiler that fails (now or on the first tile) warns
                    # (RuntimeFallbackWarning) and the network runs eager, as there
                    from mixkit.runtime.compile import compile_module
                    from mixkit.runtime.report import OptimizationReport

                    compile_module(model, OptimizationReport(preset="upscaler", backend="torch"), freezing=False,
                                   name=f"upscaler {path.name}")
                self.model, self.key = model, key
            return self.model

    def clear(self) -> None:
        with self.lock:
            self.key, self.model = None, None

    def forget_unless(self, paths) -> None:
        """Free the loaded network unless its file is one of `paths` (a refresh dropped its file)."""
        kept = {str(Path(path).resolve()) for path in paths}
        with self.lock:
            if self.key is not None and self.key[0] not in kept:
                self.key, self.model = None, None


LOADED = _LoadedNetwork()


class ModelUpscaler:
    """A super-resolution network file as a pixel upscaler: `upscale(image, width, height)`.

    The file is read once here to learn its network and native scale (an unknown layout is refused now, naming
    the file); its weights are loaded when an upscale needs them and kept until another file's are needed.
    """

    def __init__(self, path: str | os.PathLike, *, name: str | None = None, device: Any = None, dtype: Any = None,
                 tile_size: int = DEFAULT_TILE_SIZE, tile_overlap: int = DEFAULT_TILE_OVERLAP,
                 limits: UpscaleLimits | None = None) -> None:
        import torch

        from mixkit.models.upscalers.layouts import ARCHITECTURES
        from mixkit.models.upscalers.loading import read_upscaler_weights

        check_tiling(tile_size, tile_overlap)
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise FileNotFoundError(f"Upscaler model {str(self.path)!r} does not exist.")
        self.name = name or upscaler_name(self.path)
        self.device = torch.device(device or "cpu")
        # A1111 runs upscalers in the UI's dtype: half on a GPU, float32 on the CPU (no fast half convolutions)
        self.dtype = dtype or (torch.float16 if self.device.type == "cuda" else torch.float32)
        self.tile_size, self.tile_overlap = tile_size, tile_overlap
        self.limits = limits or UpscaleLimits()
        self.compile = False  # A1111's SWIN_torch_compile: torch.compile the network, eager if that fails
        stat = self.path.stat()
        self.layout, self.config, _ = read_upscaler_weights(self.path)
        # what the file was when read: a refresh re-reads it only if this changed
        self.stamp = (stat.st_mtime_ns, stat.st_size)
        self.scale = self.config.scale
        self.architecture = ARCHITECTURES[self.layout]

    def __repr__(self) -> str:
        return f"ModelUpscaler({self.name!r}, {self.architecture} x{self.scale}, {str(self.path)!r})"

    def __call__(self, image, width: int, height: int):
        return self.upscale(image, width, height)

    def planned_sizes(self, width: int, height: int, target_w: int, target_h: int, *,
                      scale: float | None = None) -> list[tuple[int, int]]:
        """The size after each run of the network for an upscale of width x height to target_w x target_h.

        `scale` is the factor asked for (Extras' "Resize" by); A1111's `Upscaler.upscale` aims at `target_size` of it
        (sides floored to a multiple of 8) and runs the network until the image covers that (at most MAX_PASSES
        times; once for an x1 network, which cannot grow it), but at scale exactly 1 it runs it once anyway (an x1
        restoration model in Extras). So a scale just above 1 whose floored size the image already covers (1.01 of
        512 px: 517 floored to 512) runs no network, and neither does a scale below 1: only the Lanczos resize.
        Without `scale` (an upscale to a size: hires fix, AppFlow) the scale is A1111's `resize_image`'s, the larger of
        the two sides' ratios, and the network is not asked at all unless that is above 1."""
        if scale is None:
            scale = max(target_w / width, target_h / height)
            if scale <= 1:
                return []
        dest_w, dest_h = target_size(width, height, scale)
        sizes = []
        while len(sizes) < MAX_PASSES and not (width >= dest_w and height >= dest_h and (sizes or scale != 1)):
            width, height = round(width * self.scale), round(height * self.scale)
            sizes.append((width, height))
            if self.scale <= 1:
                break
        return sizes

    def check_passes(self, width: int, height: int, target_w: int, target_h: int,
                     limits: UpscaleLimits | None = None, *, scale: float | None = None) -> list[tuple[int, int]]:
        """The sizes `upscale` goes through from width x height to the target (by `scale`, see `planned_sizes`), each
        checked against `limits` (the caller's budget, such as hires fix's larger one; default this upscaler's own)."""
        limits = limits or self.limits
        sizes = self.planned_sizes(width, height, target_w, target_h, scale=scale)
        check_output_size(target_w, target_h, limits)
        for size in sizes:
            if size[0] * size[1] > limits.max_pixels:
                raise ValueError(
                    f"Upscaler {self.name!r} (x{self.scale}) would make a {size[0]}x{size[1]} image on the way to "
                    f"{target_w}x{target_h}, over the budget of {limits.max_pixels} pixels (UpscaleLimits.max_pixels); "
                    "use a smaller image, a resampler such as Lanczos, or raise the limit.")
        return sizes

    def upscale(self, image, width: int, height: int, *, limits: UpscaleLimits | None = None,
                scale: float | None = None):
        """Run the network as often as A1111 would (`planned_sizes`), then Lanczos-resize to exactly width x height.

        Every intermediate size is checked against `limits` (default this upscaler's own) before the network is
        loaded; `upscale_image` passes its caller's, so hires fix's budget reaches the network's passes, and the
        factor of an upscale by `scale`.
        """
        from PIL import Image

        image = image.convert("RGB")
        sizes = self.check_passes(image.width, image.height, width, height, limits, scale=scale)
        if sizes:
            try:
                model = LOADED.get(self.path, self.device, self.dtype, self.compile)
            except FileNotFoundError:
                raise FileNotFoundError(f"Upscaler {self.name!r}: its file {str(self.path)!r} was removed; put it back "
                                        "or refresh the upscaler list.") from None
            for size in sizes:
                image = self._run(model, image, *size)
        return image if image.size == (width, height) else image.resize((width, height), Image.Resampling.LANCZOS)

    def _run(self, model, image, width: int, height: int):
        """One pass of the network, in tiles of `tile_size` input pixels blended over `tile_overlap`."""
        if self.tile_size and (image.width > self.tile_size or image.height > self.tile_size):
            return tiled_upscale(image, width, height, lambda tile, w, h: self._run_piece(model, tile),
                                 tile=self.tile_size, overlap=self.tile_overlap)
        return self._run_piece(model, image)

    def _run_piece(self, model, image):
        import numpy as np
        import torch
        from PIL import Image

        pixels = torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0)
        batch = pixels.permute(2, 0, 1)[None].to(device=self.device, dtype=self.dtype)
        with torch.inference_mode():
            out = model(batch)[0].float().clamp_(0, 1)
        array = (out.permute(1, 2, 0) * 255.0).round_().to(torch.uint8).cpu().numpy()
        return Image.fromarray(array)


@dataclass
class UpscalerScan:
    """What `register_model_upscalers` found: the names registered and the files refused (path -> reason)."""

    names: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def model_upscaler_files(folder: str | os.PathLike) -> list[Path]:
    """The upscaler files below `folder` (subfolders too, as A1111 walks them), in name order."""
    from mixkit.models.upscalers.loading import UPSCALER_SUFFIXES

    root = Path(folder).expanduser()
    if not root.is_dir():
        raise NotADirectoryError(f"Upscaler models folder {str(root)!r} does not exist; create it or fix the path.")
    return sorted(path for path in root.rglob("*") if path.is_file() and path.suffix.lower() in UPSCALER_SUFFIXES)


def register_model_upscalers(folders, *, device: Any = None, dtype: Any = None, tile_size: int = DEFAULT_TILE_SIZE,
                             tile_overlap: int = DEFAULT_TILE_OVERLAP, tiling: dict | None = None,
                             compile_swinir: bool = False, limits: UpscaleLimits | None = None, registry=UPSCALERS,
                             previous: UpscalerScan | None = None) -> UpscalerScan:
    """Register every upscaler file of `folders` under the name A1111 shows for it (`upscaler_name`: the file stem,
    or "R-ESRGAN 4x+" for RealESRGAN_x4plus.pth and the other Real-ESRGAN release files), a release file's stem as an
    alias ("DAT_x4" for "DAT x4").

    Each tiles with `tiling[TILE_OPTIONS[its network]]` ({"ESRGAN": (192, 8), "SWIN": ..., "DAT": ..., "SCUNET": ...},
    A1111's option pairs), else `tile_size` / `tile_overlap`; `compile_swinir` is A1111's SWIN_torch_compile. A file
    whose layout is unknown, that is unsafe to load or changed while being read, or whose name is already another
    upscaler's is refused and reported (and logged), not registered; the others still are.

    `previous` (the scan this one refreshes): its names whose files are gone or now refused are unregistered, its
    files unchanged since they were read are not read again, and the loaded network is freed if its file went. The
    folders are listed and every file read before the registry changes, so a missing folder changes nothing.
    """
    pairs = {option: (tile_size, tile_overlap) for option in set(TILE_OPTIONS.values())} | dict(tiling or {})
    for pair in pairs.values():
        check_tiling(*pair)
    if not isinstance(compile_swinir, bool):
        raise TypeError(f"compile_swinir must be True or False, got {compile_swinir!r}.")
    files = [path for folder in ([folders] if isinstance(folders, (str, os.PathLike)) else list(folders))
             for path in model_upscaler_files(folder)]
    ours = set(previous.names) if previous else set()
    known = {entry.path: entry for name in ours if name in registry
             for entry in [registry.get(name)] if isinstance(entry, ModelUpscaler)}
    scan, found = UpscalerScan(), {}
    # 1. Read every file (or keep an unchanged one's entry); the registry is not touched yet
    for path in files:
        name = upscaler_name(path)
        current = registry.get(name) if name in registry and registry.resolve(name) not in ours else None
        taken = found.get(name) or (current if current is not None and Path(getattr(current, "path", "")) != path
                                    else None)
        if taken is not None:
            scan.refused[str(path)] = f"the name {name!r} is already the upscaler {taken!r}; rename the file"
            continue
        try:
            upscaler = _read_unless_unchanged(path, known.get(path), name, device=device, dtype=dtype, limits=limits)
        # CheckpointFormatError / UnsafeCheckpointError are ValueErrors
        except (ValueError, OSError, RuntimeError) as error:
            scan.refused[str(path)] = str(error)
            continue
        upscaler.tile_size, upscaler.tile_overlap = pairs[TILE_OPTIONS[upscaler.architecture]]
        upscaler.compile = compile_swinir and upscaler.architecture == "SwinIR"
        found[name] = upscaler
    # 2. Change the registry: nothing below can fail but an alias, which is only logged
    for name in ours - set(found):
        if name in registry and registry.resolve(name) == name:
            registry.unregister(name)
    for name, upscaler in found.items():
        registry.register(name, upscaler, replace=True)
        scan.names.append(name)
    for name, upscaler in found.items():
        for alias in upscaler_aliases(upscaler.path):
            try:
                registry.add_alias(alias, name)
            except ValueError as error:
                logger.warning("Upscaler %s is not also available as %r: %s", upscaler.path, alias, error)
    if previous is not None:
        LOADED.forget_unless(upscaler.path for upscaler in found.values())
    for path, reason in scan.refused.items():
        logger.warning("Upscaler %s not available: %s", path, reason)
    return scan


def _read_unless_unchanged(path: Path, known: ModelUpscaler | None, name: str, **kwargs) -> ModelUpscaler:
    """The entry a refresh already has for `path` if the file has not changed since, else the file read now (refused
    if it changes while being read: a copy still being written)."""
    stat = path.stat()
    if known is not None and known.stamp == (stat.st_mtime_ns, stat.st_size):
        return known
    upscaler = ModelUpscaler(path, name=name, **kwargs)  # its stamp: the file before it was read
    stat = path.stat()
    if upscaler.stamp != (stat.st_mtime_ns, stat.st_size):
        raise OSError(f"{str(path)!r} changed while it was read (still being copied?); refresh again once it is "
                      "complete.")
    return upscaler


def set_model_upscaler_tiling(tile_size: int, tile_overlap: int, registry=UPSCALERS, *,
                              option: str | None = None) -> None:
    """Make the registered model upscalers tile this way: all of them, or with `option` ("ESRGAN", "SWIN", "DAT",
    "SCUNET") those that A1111's `<option>_tile` / `<option>_tile_overlap` pair applies to (`TILE_OPTIONS`)."""
    check_tiling(tile_size, tile_overlap)
    if option is not None and option not in set(TILE_OPTIONS.values()):
        raise ValueError(f"option must be one of {sorted(set(TILE_OPTIONS.values()))} or None, got {option!r}.")
    for _, entry in registry.items():
        if isinstance(entry, ModelUpscaler) and option in (None, TILE_OPTIONS[entry.architecture]):
            entry.tile_size, entry.tile_overlap = tile_size, tile_overlap


def set_swinir_compile(enabled: bool, registry=UPSCALERS) -> None:
    """A1111's SWIN_torch_compile: torch.compile every registered SwinIR upscaler's network (eager if that fails)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}.")
    for _, entry in registry.items():
        if isinstance(entry, ModelUpscaler) and entry.architecture == "SwinIR":
            entry.compile = enabled
