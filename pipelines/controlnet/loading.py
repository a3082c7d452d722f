"""Load ControlNets from diffusers folders or single files, offline and without running pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mixkit.errors import CheckpointFormatError, ModelNotFoundError

# Fields a ControlNet shares with the UNet it was trained from (ControlNetModel.from_unet copies the same).
_SHARED_UNET_FIELDS = (
    "in_channels", "flip_sin_to_cos", "freq_shift", "down_block_types", "only_cross_attention", "block_out_channels",
    "layers_per_block", "downsample_padding", "mid_block_scale_factor", "act_fn", "norm_num_groups", "norm_eps",
    "cross_attention_dim", "transformer_layers_per_block", "encoder_hid_dim", "encoder_hid_dim_type",
    "attention_head_dim", "num_attention_heads", "use_linear_projection", "class_embed_type",
    "addition_embed_type", "addition_time_embed_dim", "num_class_embeds", "upcast_attention",
    "resnet_time_scale_shift", "projection_class_embeddings_input_dim",
)


def controlnet_config_from_unet(unet_config) -> dict:
    """The ControlNet config matching a UNet (what a single-file ControlNet for that UNet needs)."""
    config = {name: unet_config[name] for name in _SHARED_UNET_FIELDS if name in unet_config}
    config["in_channels"] = 4  # ControlNets see the plain latents, even next to a 9-channel inpainting UNet
    return config


def load_controlnet(source: str | os.PathLike, *, config=None, base_unet=None, dtype=None, device=None):
    """Load a diffusers `ControlNetModel` from a folder, or from a single `.safetensors`/`.pth` file.

    A single file carries no config: give `config` (a diffusers ControlNet folder, its config.json,
    or a dict), or `base_unet` (the UNet of the model it will run with; the config is derived from
    it, which works offline for any SD 1.x/2.x/SDXL ControlNet). Files are read through
    `mixkit.io.load_state_dict` (safetensors, or pickles with `weights_only=True`); both the
    diffusers layout and the original ControlNet layout (`control_model.*`) are accepted.
    """
    import torch
    from diffusers import ControlNetModel

    path = Path(source).expanduser()
    if not path.exists():
        raise ModelNotFoundError(f"ControlNet {str(source)!r} does not exist; pass a diffusers ControlNet folder or a .safetensors file.")
    dtype = dtype or torch.float32
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} is not a diffusers ControlNet folder: config.json is missing.")
        model = ControlNetModel.from_pretrained(path, dtype=dtype)
    else:
        model = _load_single_file(path, _resolve_config(path, config, base_unet), dtype)
        model.register_to_config(_name_or_path=str(path))  # what the infotext's "Model:" shows
    model.eval()
    return model.to(device) if device is not None else model


def _resolve_config(path: Path, config, base_unet) -> dict:
    if isinstance(config, dict):
        return dict(config)
    if config is not None:
        config_path = Path(config)
        config_path = config_path / "config.json" if config_path.is_dir() else config_path
        if not config_path.is_file():
            raise ModelNotFoundError(f"ControlNet config {str(config)!r} not found (expected a folder with config.json or a .json file).")
        return {k: v for k, v in json.loads(config_path.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    if base_unet is not None:
        return controlnet_config_from_unet(base_unet.config)
    raise ValueError(
        f"{path.name} is a single-file ControlNet, which stores no config: pass config= (a diffusers ControlNet "
        "folder or config.json) or base_unet= (the UNet of the model it will run with)."
    )


def _load_single_file(path: Path, config: dict, dtype):
    from diffusers import ControlNetModel
    from diffusers.loaders.single_file_utils import convert_controlnet_checkpoint

    from mixkit.io import load_state_dict

    state = load_state_dict(path)
    _check_file_family(path, state, config)
    try:
        state = convert_controlnet_checkpoint(state, config)
    except (KeyError, IndexError, TypeError) as error:
        raise CheckpointFormatError(f"{path} is not a ControlNet checkpoint this loader understands ({error!r}).") from None
    state = {k: v for k, v in state.items() if v is not None}
    if "controlnet_cond_embedding.conv_in.weight" not in state:
        raise CheckpointFormatError(f"{path} has no ControlNet hint encoder (controlnet_cond_embedding / input_hint_block keys); "
                                    "is it a ControlNet file?")
    config = {**config, "conditioning_embedding_out_channels": _conditioning_channels(state),
              "in_channels": state["conv_in.weight"].shape[1]}
    model = ControlNetModel.from_config(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise CheckpointFormatError(
            f"{path} does not match the ControlNet config: {len(missing)} missing keys (e.g. {missing[:3]}), "
            f"{len(unexpected)} unexpected keys (e.g. {unexpected[:3]}). Check that config/base_unet is the model family "
            "this ControlNet was made for."
        )
    return model.to(dtype)


def _check_file_family(path: Path, state: dict, config: dict) -> None:
    """Refuse a file made for another family than its config (or base UNet) before converting it, naming both
    families; the conversion would otherwise fail with a list of missing and unexpected keys."""
    from pipelines.controlnet.family import family_of_config, family_of_shapes

    found = family_of_shapes({name: tuple(tensor.shape) for name, tensor in state.items()})
    if found is None or config.get("cross_attention_dim") is None:
        return
    wanted = family_of_config(config)
    if found != wanted:
        raise ValueError(f"{path.name} is a ControlNet for {found.label} models, but the config (or base_unet) it is "
                         f"loaded with is {wanted.label}; load it for a {found.label} model, or pick a ControlNet "
                         f"made for {wanted.label}.")


def _conditioning_channels(state: dict) -> tuple[int, ...]:
    """Hint-encoder widths, read from the weights: conv_in, then every stride-2 block's output."""
    channels = [state["controlnet_cond_embedding.conv_in.weight"].shape[0]]
    index = 1
    while f"controlnet_cond_embedding.blocks.{index}.weight" in state:
        channels.append(state[f"controlnet_cond_embedding.blocks.{index}.weight"].shape[0])
        index += 2
    return tuple(channels)
