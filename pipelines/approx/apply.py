"""`approximate(pipe, taesd=..., deepcache=N, tome=r, int8=...)`: opt-in speed-ups that change the image.

Unlike `optimize` presets (exact up to rounding), each of these trades fidelity for time, so each
is off by default, labelled "approximate" in the report, the infotext and the CLI, and removable
with `remove_approximations(pipe)`. Apply them after `optimize`: optimisations that replace
attention processors or compile the UNet would otherwise undo or refuse them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from pipelines.approx.deepcache import (DeepCacheSettings, apply_deepcache, check_deepcache_interval,
                                        deepcache_state, prepare_deepcache, remove_deepcache)
from pipelines.approx.int8 import Int8Calibration, calibration_params, check_int8_target, install_int8, remove_int8
from pipelines.approx.labels import label_infotexts, model_labels, set_model_labels
from pipelines.approx.taesd import (default_taesd_source, install_taesd_decode, load_taesd, remove_taesd_decode,
                                   taesd_suspended)
from pipelines.approx.tome_unet import (TokenMergingSettings, apply_token_merging, check_tome_ratio, remove_token_merging,
                                       token_merging_state)

AUTO_TAESD = "auto"  # the family's default TAESD hub id


@dataclass
class ApproximationReport:
    """What `approximate` installed; `approximate` is True when the output is no longer exact."""

    applied: list[str] = field(default_factory=list)
    taesd_source: str | None = None
    deepcache: int | None = None
    tome: float | None = None
    int8: bool = False
    int8_vae: bool = False  # the VAE decoder is int8 too (OpenVINO)

    @property
    def approximate(self) -> bool:
        return bool(self.applied)

    def warning(self) -> str:
        """The line the CLI prints: the output is approximate, and why."""
        return ("Output is APPROXIMATE (not comparable to exact generations): " + "; ".join(self.applied)
                if self.applied else "")


def check_approximate_inputs(pipe, taesd, deepcache, tome, taesd_variant, int8=None) -> None:
    """Validate everything before any model change, so a bad call leaves the pipeline as it was."""
    if not hasattr(pipe, "model") or not hasattr(pipe.model, "unet"):
        raise TypeError(f"approximate() expects a mixkit pipeline with a .model (TextToImage, ...), got {type(pipe).__name__}")
    if taesd is not None and not isinstance(taesd, (str, os.PathLike)):
        raise TypeError(f"taesd must be a folder, a hub id or {AUTO_TAESD!r}, got {type(taesd).__name__}: {taesd!r}")
    if taesd_variant is not None and taesd is None:
        raise ValueError("taesd_variant is given but taesd is not; pass taesd=<folder or hub id>")
    if deepcache is not None:
        check_deepcache_interval(deepcache)
    if tome is not None:
        check_tome_ratio(tome)
    if _wants_int8(int8):
        if int8 is not True and not isinstance(int8, Int8Calibration):
            raise TypeError(f"int8 must be True, False or an Int8Calibration(...), got {type(int8).__name__}: {int8!r}")
        if tome is not None and tome > 0:
            raise ValueError("int8 runs a fixed quantized graph: ToMe (which changes its attention) cannot be "
                             "combined with it; choose int8 or ToMe")
        if deepcache is not None and deepcache > 1 and not _is_openvino_unet(pipe.model.unet):
            raise ValueError("int8 on the torch backend compiles one fixed graph, which DeepCache's shallow branch "
                             "cannot run on; use backend 'openvino' for int8 with DeepCache, or choose one of them")
        calibration = _calibration(int8)
        if taesd is not None and calibration.vae_decoder:
            raise ValueError("TAESD replaces the VAE decoder, so an int8 VAE decoder (vae_decoder=True) would never "
                             "run; choose one of them")
        check_int8_target(pipe.model, calibration)
        calibration_params(pipe.model, calibration, getattr(pipe, "limits", None))  # bad sizes etc. fail now


def approximate(pipe, *, taesd: str | os.PathLike | None = None, deepcache: int | None = None,
                tome: float | None = None, int8: bool | Int8Calibration = False, taesd_variant: str | None = None,
                deepcache_shallow_layers: int = 1) -> ApproximationReport:
    """Install the approximations asked for on `pipe.model`, replacing earlier ones.

    - `taesd`: a TAESD folder or hub id ("auto": madebyollin/taesd or taesdxl by model family);
      decodes (and previews) with the tiny VAE.
    - `deepcache`: full UNet every N steps, the shallow branch on cached deep features between
      (N=1: off; exact).
    - `tome`: ratio of self-attention tokens merged at full latent resolution (0: off; exact).
    - `int8`: an int8 UNet, on the CPU (backend "openvino": the graph quantized by NNCF, cached per
      calibration, and the VAE decoder too unless `vae_decoder=False` or TAESD decodes; backend
      "torch": torchao + inductor, UNet only, this process and the calibrated size only).
      True calibrates with the model's defaults (its calibration prompts, native size, recommended
      sampler/steps/CFG); `Int8Calibration(width=..., steps=...)` chooses.
    The report (also `pipe.approximation`) lists what was applied.
    """
    check_approximate_inputs(pipe, taesd, deepcache, tome, taesd_variant, int8)
    model = pipe.model
    use_deepcache = deepcache is not None and deepcache > 1
    use_tome = tome is not None and tome > 0
    deepcache_settings = DeepCacheSettings(deepcache, deepcache_shallow_layers) if use_deepcache else None
    max_downsample = tome_max_downsample(model)
    tome_settings = TokenMergingSettings(tome, max_downsample=max_downsample) if use_tome else None
    if use_tome:
        check_plain_unet(model.unet)
    if deepcache_settings is not None:
        prepare_deepcache(model.unet, deepcache_settings)  # OpenVINO exports its shallow branch: may fail, no change
    tiny_vae = None
    source = None
    if taesd is not None:  # loading may fail (missing folder, offline): still nothing changed
        source = default_taesd_source(model.family) if str(taesd) == AUTO_TAESD else str(taesd)
        tiny_vae = load_taesd(source, model.family, variant=taesd_variant, device=model.vae.device,
                              latent_channels=model.vae.config.latent_channels)

    installed = None
    if _wants_int8(int8):  # slow and may fail: before anything else changes
        earlier = _unet_wrappers(model.unet)
        remove_deepcache(model.unet)  # calibrate on the plain UNet (no-ops on the OpenVINO graph)
        remove_token_merging(model.unet)
        calibration = _calibration(int8)
        if taesd is not None and calibration.vae_decoder is None:
            calibration = replace(calibration, vae_decoder=False)  # TAESD decodes: the VAE decoder never runs
        try:
            with taesd_suspended(model.vae):
                installed = install_int8(pipe, calibration)
        except BaseException:
            _reinstall_unet_wrappers(model.unet, earlier)  # a failed int8 leaves the approximations it found
            raise
    remove_approximations(pipe, keep_int8=installed is not None)
    report = ApproximationReport(taesd_source=source, deepcache=deepcache if use_deepcache else None,
                                 tome=float(tome) if use_tome else None, int8=installed is not None,
                                 int8_vae=installed is not None and installed.vae_decoder)
    if installed is not None:
        report.applied.append(installed.line)
    if tiny_vae is not None:
        install_taesd_decode(model.vae, tiny_vae)
        report.applied.append(f"TAESD decode ({tiny_vae.mixkit_variant} from {source})")
    if deepcache_settings is not None:
        apply_deepcache(model.unet, deepcache_settings)
        report.applied.append(f"DeepCache: full UNet every {deepcache} steps, "
                              f"{deepcache_settings.shallow_layers} shallow layer(s) in between")
    if tome_settings is not None:
        count = apply_token_merging(model.unet, tome_settings)
        report.applied.append(f"ToMe: {tome:g} of self-attention tokens merged in the transformer blocks at up to "
                              f"1/{max_downsample} latent resolution ({count} self-attention layers wrapped)")
    set_model_labels(model, model_labels(model).with_approximations(
        taesd=tiny_vae is not None, deepcache=report.deepcache, tome=report.tome, int8=report.int8,
        int8_vae=report.int8_vae))
    label_infotexts(pipe.session)
    pipe.approximation = report
    return report


def tome_max_downsample(model) -> int:
    """The deepest latent downsampling ToMe merges at on `model`: SDXL has no attention at full latent resolution
    (its first level is convolution only, the refiner's too), so there it merges in the first level that has
    attention, at 1/2 resolution."""
    return 2 if model.family.uses_pooled_text else 1


def remove_approximations(pipe, *, keep_int8: bool = False) -> None:
    """Undo `approximate`: full VAE decode, plain UNet forward and attention processors, float UNet graph."""
    model = pipe.model
    remove_taesd_decode(model.vae)
    remove_deepcache(model.unet)
    remove_token_merging(model.unet)
    labels = model_labels(model)
    if not keep_int8:
        remove_int8(model)
    set_model_labels(model, labels.with_approximations(taesd=False, deepcache=None, tome=None, int8=keep_int8,
                                                       int8_vae=keep_int8 and labels.int8_vae))
    pipe.approximation = ApproximationReport()


def _unet_wrappers(unet) -> tuple[DeepCacheSettings | None, TokenMergingSettings | None]:
    """The DeepCache and ToMe settings installed on `unet` by an earlier `approximate`, if any."""
    deepcache, tome = deepcache_state(unet), token_merging_state(unet)
    return (deepcache.settings if deepcache is not None else None, tome.settings if tome is not None else None)


def _reinstall_unet_wrappers(unet, settings: tuple[DeepCacheSettings | None, TokenMergingSettings | None]) -> None:
    deepcache, tome = settings
    if deepcache is not None:
        apply_deepcache(unet, deepcache)
    if tome is not None:
        apply_token_merging(unet, tome)


def _wants_int8(int8) -> bool:
    return int8 is not None and int8 is not False


def _calibration(int8: bool | Int8Calibration) -> Int8Calibration:
    return int8 if isinstance(int8, Int8Calibration) else Int8Calibration()


def _is_openvino_unet(unet) -> bool:
    from mixkit.runtime.openvino_unet import OpenVinoUNet

    return isinstance(unet, OpenVinoUNet)


def check_plain_unet(unet) -> None:
    """ToMe replaces attention processors, so it needs the diffusers UNet's modules (DeepCache checks its own)."""
    from diffusers import UNet2DConditionModel

    if not isinstance(unet, UNet2DConditionModel):
        raise ValueError(f"ToMe needs the diffusers UNet; this model's UNet is {type(unet).__name__} "
                         "(e.g. the openvino backend's compiled graph). Use backend 'torch' with it.")
    if "_mixkit_eager_forward" in unet.__dict__:  # mixkit.runtime.compile's marker
        raise ValueError("ToMe cannot be used on a compiled UNet (the compiled graph fixes the attention it "
                         "changes); drop compile or ToMe")
