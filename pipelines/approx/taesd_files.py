"""TAESD from the original single files A1111 and ComfyUI use (`taesd_decoder.pth`, `taesdxl_decoder.safetensors`).

madebyollin's repository ships TAESD as two `nn.Sequential` state dicts, `<variant>_decoder` and
`<variant>_encoder` (`.pth` or `.safetensors`); A1111 keeps them in `models/VAE-approx/`, ComfyUI in
`models/vae_approx/`. diffusers' `AutoencoderTiny` holds the same layers under `decoder.layers.*` /
`encoder.layers.*`, except that the original decoder starts with a `Clamp` module (index 0, no
weights) that diffusers applies inside `forward`, so decoder indices shift by one. Encoder indices
are the same. Only the decoder is needed here (mixkit encodes with the full VAE); a sibling encoder
file is loaded too when present so the tiny VAE is complete.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

FILE_SUFFIXES = (".pth", ".pt", ".safetensors")
_INDEXED_KEY = re.compile(r"(\d+)\.(.+)")


def is_taesd_file(source: str | os.PathLike) -> bool:
    path = Path(source)
    return path.is_file() and path.suffix.lower() in FILE_SUFFIXES


def diffusers_keys(state: dict, part: str) -> dict:
    """Rename one original `nn.Sequential` state dict (`part` = "decoder" or "encoder") to AutoencoderTiny's keys."""
    if part not in ("decoder", "encoder"):
        raise ValueError(f"part must be 'decoder' or 'encoder', got {part!r}")
    shift = 1 if part == "decoder" else 0  # the decoder's leading Clamp has no weights
    renamed = {}
    for key, tensor in state.items():
        match = _INDEXED_KEY.fullmatch(key)
        if match is None or int(match.group(1)) < shift:
            raise ValueError(f"key {key!r} is not one of an original TAESD {part} (expected '<index>.<name>')")
        renamed[f"{part}.layers.{int(match.group(1)) - shift}.{match.group(2)}"] = tensor
    return renamed


def guess_part(path: Path) -> str:
    name = path.stem.lower()
    if name.endswith("decoder"):
        return "decoder"
    if name.endswith("encoder"):
        return "encoder"
    raise ValueError(f"TAESD file {str(path)!r}: its name must end in _decoder or _encoder (as madebyollin's files "
                     "do: taesd_decoder.pth, taesdxl_encoder.safetensors) to tell which half it holds")


def sibling_encoder(decoder_path: Path) -> Path | None:
    stem = decoder_path.stem[: -len("decoder")] + "encoder"
    for suffix in FILE_SUFFIXES:
        candidate = decoder_path.with_name(stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def load_taesd_file(path: str | os.PathLike, *, dtype=None):
    """An `AutoencoderTiny` from an original TAESD decoder file (plus its encoder file when next to it).

    Pickled `.pth` files are read with `torch.load(weights_only=True)` through `mixkit.io`. Raises
    ValueError when the file is an encoder alone, or when its tensors do not fit TAESD's layout
    (naming the first mismatching key), so a wrong file never decodes silently into noise.
    """
    import torch
    from diffusers import AutoencoderTiny

    from mixkit.io import load_state_dict

    path = Path(path)
    if guess_part(path) != "decoder":
        raise ValueError(f"{str(path)!r} is a TAESD encoder; pass the decoder file (…_decoder{path.suffix}) to decode with it")
    decoder = load_state_dict(path)
    latent_channels = _first_conv_in_channels(decoder, path)
    state = diffusers_keys(decoder, "decoder")
    encoder_path = sibling_encoder(path)
    if encoder_path is not None:
        state.update(diffusers_keys(load_state_dict(encoder_path), "encoder"))
    taesd = AutoencoderTiny(latent_channels=latent_channels)
    expected = taesd.state_dict()
    wanted = {k: v for k, v in expected.items() if k.startswith("decoder.") or encoder_path is not None}
    missing = sorted(set(wanted) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{str(path)!r} does not have TAESD's layout: missing {missing[:3]}, unexpected {unexpected[:3]}")
    for key, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise ValueError(f"{str(path)!r}: tensor {key} has shape {tuple(tensor.shape)}, TAESD expects "
                             f"{tuple(expected[key].shape)}")
    taesd.load_state_dict(state, strict=False)
    taesd.mixkit_has_encoder = encoder_path is not None
    return taesd.to(dtype or torch.float32)


def _first_conv_in_channels(decoder: dict, path: Path) -> int:
    weight = decoder.get("1.weight")
    if weight is None or weight.ndim != 4:
        raise ValueError(f"{str(path)!r} is not an original TAESD decoder: it has no first convolution '1.weight'")
    return int(weight.shape[1])
