"""Post-training int8 quantization of the OpenVINO UNet graph with NNCF (an approximate speed-up).

Why: at 256 px the bf16 UNet graph already runs at 80-85% of this CPU's bf16 matmul peak, so no
exact change makes it much faster. AVX512-VNNI int8 does twice the multiply-adds per instruction
of AVX512-BF16 and reads half the weight bytes: one SD 1.5 UNet call at 256 px took 0.55 s in
int8 against 0.89 s in bf16 (1.62x, 2-core AMD EPYC, 2026-11-24). The image changes, so this is
opt-in and labelled (`pipelines.approx.int8` collects the calibration data and installs it).

What stays in floating point, and why (measured on mixkit-tiny-sd, 12 prompts, median PSNR
against the float32 torch image; all layers quantized: 24.6 dB):
- SmoothQuant is off: with it 25.9 dB, without 29.9 dB (it moves activation outliers into
  weights, which these small convolution-heavy nets tolerate worse than transformers do).
- `conv_in`, `conv_out`, the time embedding and each resnet's time projection: the first and
  last layers set the latent's scale and are tiny in FLOPs.
- The 1x1 `conv_shortcut` of resnets whose input is a concatenated skip connection: the two
  halves have different ranges (Q-Diffusion's "shortcut splitting" problem), and they are cheap.
With calibration on all steps of 8 prompts: 32.1 dB median, at 1.62x per UNet call.

The VAE decoder (`load_or_quantize_decoder`) is quantized the same way, with its first and last layers
in float (`DECODER_KEPT_IN_FLOAT`): at 256 px its 256- and 128-channel convolutions over 128x128 and
256x256 maps took a fifth of a generation with the int8 UNet while they ran in bf16. It is converted with free height and
width, so one calibration (at the size the UNet was calibrated at) serves every image size.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from mixkit.runtime.openvino_cache import key_digest, load_or_export, require_openvino

NNCF_HINT = "pip install nncf  (or: pip install 'mixkit[openvino]', which includes it)"
KEPT_IN_FLOAT = (".*conv_in.*", ".*conv_out.*", ".*time_embedding.*", ".*time_emb_proj.*", ".*conv_shortcut.*")
DECODER_KEPT_IN_FLOAT = (".*post_quant_conv.*", ".*conv_in.*", ".*conv_out.*")
RECIPE_VERSION = 1  # bump when the quantization settings below change: old cache entries are then not reused


def int8_overflow_fix() -> str:
    """NNCF's overflow fix for this CPU: "enable" (7-bit weights everywhere) where int8 lacks VNNI, else its default.

    Without VNNI (AVX512-VNNI, AVX-VNNI or AMX), x86 int8 kernels sum u8 x s8 pairs in saturating 16-bit
    lanes (vpmaddubsw), so full 8-bit weights can overflow: on such a CPU the tiny VAE decoder's int8 output
    was 23% off the float decoder (mean abs), 7-bit weights bring it within the test's 10%. With VNNI the
    sums are 32-bit and the default (first layer only) keeps the measured PSNR. Without /proc/cpuinfo (not
    Linux) the default stays.
    """
    from mixkit.runtime.capability import cpu_flags

    flags = cpu_flags()
    if not flags or any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8")):
        return "first_layer_only"
    return "enable"


def require_nncf():
    try:
        import nncf
    except ImportError as error:
        raise ImportError(f"int8 quantization of the OpenVINO UNet needs NNCF: {NNCF_HINT}") from error
    return nncf


def int8_graph_key(float_graph_path: Path, settings: dict) -> dict:
    """Everything the int8 graph made from `float_graph_path` with these calibration `settings` depends on."""
    nncf = require_nncf()
    return {"part": f"{float_graph_path.stem}-int8", "float_graph": float_graph_path.name, "settings": settings,
            "kept_in_float": list(KEPT_IN_FLOAT), "recipe": RECIPE_VERSION, "nncf": nncf.__version__,
            "overflow_fix": int8_overflow_fix()}


def int8_graph_path(float_graph_path: Path, settings: dict) -> Path:
    """Cache path of that int8 graph (named as `openvino_cache.load_or_export` names every entry)."""
    key = int8_graph_key(float_graph_path, settings)
    return float_graph_path.parent / f"{key['part']}-{key_digest(key)}.xml"


def quantize_graph(graph, calibration: Sequence[Sequence[np.ndarray]], kept_in_float: Sequence[str] = KEPT_IN_FLOAT,
                   what: str = "UNet"):
    """An int8 copy of the OpenVINO model `graph`, its activation ranges taken from `calibration`
    (each item: one call's inputs in graph input order), layers matching `kept_in_float` left alone.
    The copy is reshaped to the first item's static shapes; other shapes reshape it again when
    compiled, the per-channel ranges stay valid."""
    nncf = require_nncf()
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters,
        AdvancedSmoothQuantParameters,
        OverflowFix,
    )

    if not calibration:
        raise ValueError(f"int8 quantization needs at least one recorded {what} call to calibrate on; got none")
    model = graph.clone()
    model.reshape({port.get_any_name(): list(array.shape) for port, array in zip(model.inputs, calibration[0])})
    no_smooth_quant = AdvancedQuantizationParameters(smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=-1),
                                                     overflow_fix=OverflowFix(int8_overflow_fix()))
    logger = logging.getLogger("nncf")  # one INFO line per layer it leaves alone: hundreds
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:  # its progress bars go to stderr: stdout is for results (the CLI prints the images' paths there)
        with contextlib.redirect_stdout(sys.stderr):
            return nncf.quantize(model, nncf.Dataset(list(calibration)), subset_size=len(calibration),
                                 model_type=nncf.ModelType.TRANSFORMER,
                                 ignored_scope=nncf.IgnoredScope(patterns=list(kept_in_float), validate=False),
                                 advanced_parameters=no_smooth_quant)
    finally:
        logger.setLevel(level)


def load_or_quantize(unet, settings: dict, calibrate: Callable[[], Sequence[Sequence[np.ndarray]]]):
    """The int8 graph of the OpenVINO UNet stand-in `unet` for these settings, its path, and whether it came
    from the cache. `calibrate()` (which runs the pipeline: slow) is only called on a cache miss; saving is
    `load_or_export`'s (atomic, a readable `.json` beside the graph)."""
    ov = require_openvino()
    core = ov.Core()
    model, path, hit = load_or_export(unet.cache_path.parent, int8_graph_key(unet.cache_path, settings),
                                      lambda: quantize_graph(core.read_model(unet.cache_path), calibrate()))
    # Read back after a fresh save: OpenVINO then maps the weights file instead of holding NNCF's copy.
    return (model if hit else core.read_model(path)), path, hit


def int8_decoder_key(vae, settings: dict) -> dict:
    """Everything the int8 decoder of the OpenVINO VAE stand-in `vae` made with these calibration `settings`
    depends on (no shapes: the graph serves every size)."""
    from mixkit.runtime.openvino_cache import cache_key

    nncf = require_nncf()
    return cache_key("vae-decoder-int8", vae.torch_module, vae.identity, None, fingerprint=vae.fingerprint(),
                     extra={"settings": settings, "kept_in_float": list(DECODER_KEPT_IN_FLOAT),
                            "recipe": RECIPE_VERSION, "nncf": nncf.__version__, "overflow_fix": int8_overflow_fix()})


def load_or_quantize_decoder(vae, settings: dict, calibrate: Callable[[], Sequence[Sequence[np.ndarray]]]):
    """The int8 decoder graph of the OpenVINO VAE stand-in `vae`, its path, and whether it came from the cache;
    `calibrate()` (the recorded latents) is only called on a cache miss."""
    ov = require_openvino()
    model, path, hit = load_or_export(
        vae.cache_dir, int8_decoder_key(vae, settings),
        lambda: quantize_graph(vae.dynamic_decoder_graph(), calibrate(), DECODER_KEPT_IN_FLOAT, "VAE decoder"))
    return (model if hit else ov.Core().read_model(path)), path, hit
