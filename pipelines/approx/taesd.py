"""TAESD: a tiny distilled VAE decoder (madebyollin) swapped in for the model's VAE decode.

TAESD decodes roughly an order of magnitude faster than the SD VAE with visibly softer detail, so
it is an approximation: opt-in, and recorded in the infotext as A1111 does (`VAE Decoder: TAESD`).
Its weights differ per latent space: `madebyollin/taesd` for SD 1.x/2.x, `madebyollin/taesdxl`
for SDXL. Both have the same architecture and 4 latent channels, so a mix-up would decode wrong
colours without any error; the variant is therefore checked against the model family by name.

TAESD works on the latents the UNet produces (its `scaling_factor` is 1.0). The swap wraps
`vae.decode`, which every caller reaches with `latents / scaling_factor + shift_factor`, and
undoes that scaling before calling TAESD; encoding (img2img, hires fix) keeps the full VAE.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mixkit.errors import ModelNotFoundError
from mixkit.forward_patches import ForwardPatch, install_forward_patch
from mixkit.models.diffusion import ModelFamily
from mixkit.registry import Registry

_INSTALLED = "_mixkit_taesd"
HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass(frozen=True)
class TaesdVariant:
    """One TAESD release: its hub id and the model families whose latents it decodes."""

    name: str
    hub_id: str
    families: frozenset


TAESD_VARIANTS: Registry[TaesdVariant] = Registry("TAESD variant")
TAESD_VARIANTS.register("taesd", TaesdVariant("taesd", "madebyollin/taesd", frozenset({ModelFamily.SD1, ModelFamily.SD2})))
TAESD_VARIANTS.register("taesdxl", TaesdVariant("taesdxl", "madebyollin/taesdxl",
                                                frozenset({ModelFamily.SDXL, ModelFamily.SDXL_REFINER})))
# Other latent spaces (SD3 and Flux: 16 channels) are not SD pipelines mixkit runs; their names
# are listed so that a folder called e.g. "taesd3" is refused by name, not decoded as noise.
_OTHER_LATENT_SPACES = ("taesd3", "taef1", "taef2", "taesdv", "taehv")


def default_taesd_source(family: ModelFamily) -> str:
    """The hub id of the TAESD for `family` (what `--taesd` without a value loads)."""
    for name in TAESD_VARIANTS.names():
        variant = TAESD_VARIANTS.get(name)
        if family in variant.families:
            return variant.hub_id
    raise ValueError(f"no TAESD variant decodes {family.label} latents")


def variant_from_source(source: str | os.PathLike) -> str | None:
    """'taesd' / 'taesdxl' read from a folder name or hub id, None when the name does not say."""
    name = Path(str(source).rstrip("/\\")).name.lower()
    for other in _OTHER_LATENT_SPACES:
        if other in name:
            raise ValueError(f"TAESD source {str(source)!r} looks like {other!r}, a decoder for another latent space "
                             "(SD3/Flux/video); mixkit's SD 1.x/2.x/XL pipelines need madebyollin/taesd or taesdxl")
    if "taesdxl" in name:
        return "taesdxl"
    if "taesd" in name:
        return "taesd"
    return None


def check_taesd_family(source: str | os.PathLike, family: ModelFamily, variant: str | None) -> TaesdVariant:
    """The TAESD variant for `source`, refused (ValueError) when it does not match `family`."""
    if variant is None:
        variant = variant_from_source(source)
    if variant is None:
        raise ValueError(f"Cannot tell which latent space the TAESD at {str(source)!r} decodes: its name contains "
                         f"neither 'taesd' nor 'taesdxl'. Pass variant='taesd' (SD 1.x/2.x) or 'taesdxl' (SDXL), "
                         "or keep the hub folder name.")
    chosen = TAESD_VARIANTS.get(variant)  # UnknownNameError lists the variants
    if family not in chosen.families:
        wanted = default_taesd_source(family)
        raise ValueError(f"TAESD {str(source)!r} ({chosen.name}) decodes {', '.join(sorted(f.label for f in chosen.families))} "
                         f"latents, but the model is {family.label}; use {wanted!r} instead.")
    return chosen


def load_taesd(source: str | os.PathLike, family: ModelFamily, *, variant: str | None = None, device=None,
               dtype=None, latent_channels: int = 4):
    """Load a diffusers `AutoencoderTiny` from a local folder, an original TAESD decoder file (A1111's
    `models/VAE-approx/taesd_decoder.pth`) or a hub id, checked against `family`.

    Folders and hub ids are read as safetensors only; `.pth` files with `weights_only=True`. Raises ModelNotFoundError (missing folder, hub id not
    available offline) and ValueError (wrong family or latent channels), naming the source.
    """
    import torch
    from diffusers import AutoencoderTiny

    from pipelines.approx.taesd_files import is_taesd_file, load_taesd_file

    chosen = check_taesd_family(source, family, variant)
    path = Path(source)
    is_local = path.exists() or HUB_ID_PATTERN.fullmatch(str(source)) is None
    if is_taesd_file(path):
        taesd = load_taesd_file(path, dtype=dtype)  # A1111 / ComfyUI's taesd_decoder.pth and friends
    elif is_local and not path.is_dir():
        raise ModelNotFoundError(f"TAESD folder {str(source)!r} does not exist (or is not a folder); pass a folder "
                                 f"with config.json and diffusion_pytorch_model.safetensors, an original "
                                 f"taesd_decoder.pth / .safetensors file, or the hub id {chosen.hub_id!r}")
    else:
        try:
            taesd = AutoencoderTiny.from_pretrained(str(source), use_safetensors=True, torch_dtype=dtype or torch.float32)
        except (OSError, ValueError) as error:
            where = "folder" if is_local else "hub id"
            raise ModelNotFoundError(f"Could not load TAESD from {where} {str(source)!r}: {str(error).rstrip('.')}. "
                                     f"Download {chosen.hub_id!r} (config.json + diffusion_pytorch_model.safetensors) "
                                     "to a folder and pass that folder.") from None
    if taesd.config.latent_channels != latent_channels:
        raise ValueError(f"TAESD {str(source)!r} has {taesd.config.latent_channels} latent channels, the model's VAE "
                         f"{latent_channels}; use {chosen.hub_id!r}")
    taesd.eval().requires_grad_(False)
    taesd.to(device=device or "cpu")
    taesd.mixkit_variant = chosen.name
    return taesd


@dataclass
class _InstalledTaesd:
    """A TAESD decode on a VAE: the decoder, its patch on `vae.decode`, and how many `taesd_suspended` blocks are
    open (the patch then passes the call down to what is below it)."""

    taesd: object
    patch: ForwardPatch
    suspended: int = 0


def install_taesd_decode(vae, taesd) -> None:
    """Make `vae.decode` decode with `taesd` (undo with `remove_taesd_decode`); encode is untouched. A TAESD decode
    installed before is replaced; other decode patches (the NaN guard, a spy) stay, above or below it."""
    from diffusers.models.autoencoders.vae import DecoderOutput

    remove_taesd_decode(vae)
    scale = vae.config.scaling_factor
    shift = getattr(vae.config, "shift_factor", None) or 0.0

    def decode(below, z, *args, return_dict: bool = True, **kwargs):
        if installed.suspended:  # `installed` is bound below, before the first call
            return below(z, *args, return_dict=return_dict, **kwargs)
        latents = ((z - shift) * scale).to(device=taesd.device, dtype=taesd.dtype)
        pixels = taesd.decode(latents).sample.to(device=z.device, dtype=z.dtype)
        return DecoderOutput(sample=pixels) if return_dict else (pixels,)

    # replaces what is below rather than calling it: the VAE's own decoder is what TAESD stands in for
    installed = _InstalledTaesd(taesd, install_forward_patch(vae, decode, "TAESD decode", attribute="decode"))
    vae.__dict__[_INSTALLED] = installed


def remove_taesd_decode(vae) -> bool:
    """Take the TAESD decode out of `vae.decode`, leaving other decode patches (above or below it) in place; False
    if none was installed."""
    installed = vae.__dict__.pop(_INSTALLED, None)
    if installed is None:
        return False
    installed.patch.remove()
    return True


@contextmanager
def taesd_suspended(vae) -> Iterator[None]:
    """The VAE's own decode inside the block (int8 calibration records what the real decoder sees), the TAESD decode
    again after it, also when the block fails. The patch stays where it is in the chain of decode patches, so a NaN
    guard above or below it keeps its place."""
    installed = vae.__dict__.get(_INSTALLED)
    if installed is None:
        yield
        return
    installed.suspended += 1
    try:
        yield
    finally:
        installed.suspended -= 1


def installed_taesd(vae):
    installed = vae.__dict__.get(_INSTALLED)
    return None if installed is None else installed.taesd


def preview_images(model, latents) -> list:
    """Live-preview images: TAESD at full size when it is installed on the model, else the cheap
    latent-to-RGB preview (1/8 size)."""
    taesd = installed_taesd(model.vae)
    if taesd is None:
        from pipelines.preview import latent_preview

        return latent_preview(latents, sdxl=model.family.uses_pooled_text)  # SDXL latents, base or refiner
    import torch
    from PIL import Image

    with torch.inference_mode():
        pixels = taesd.decode(latents.to(device=taesd.device, dtype=taesd.dtype)).sample.float().cpu()
    frames = ((pixels / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return [Image.fromarray(frame) for frame in frames]
