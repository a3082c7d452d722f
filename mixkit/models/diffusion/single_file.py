"""Load a Civitai/A1111 single-file checkpoint (LDM/SGM layout) as a DiffusionModel, offline.

Recipe: read the tensors safely (mixkit.io), detect the family from marker keys, pick configs
(shipped with mixkit, or `config_dir`), build empty (meta) modules, check that the file holds
exactly the keys those modules need (computed by running our own LDM writer on the empty
modules), convert with diffusers' public single-file converters, and assign the tensors in place
(no second copy, no random init). Any mismatch is an error naming keys; nothing is half-loaded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from mixkit.errors import CheckpointFormatError, ConfigMismatchError, ModelNotFoundError
from mixkit.models.diffusion.components import DiffusionModel
from mixkit.models.diffusion.diffusers_folder import check_tokenizer
from mixkit.models.diffusion.detect_keys import (
    UNET_IN,
    detect_family,
    guess_prediction_type,
    normalize_legacy_keys,
    unet_in_channels,
    zero_snr_schedule,
)
from mixkit.models.diffusion.family import ModelFamily
from mixkit.models.diffusion.single_file_clip import (
    CLIP_PREFIX_SD1,
    CLIP_PREFIX_SDXL,
    OPEN_CLIP_PREFIX_SD2,
    OPEN_CLIP_PREFIX_SDXL,
    OPEN_CLIP_PREFIX_SDXL_REFINER,
    to_module_keys,
)
from mixkit.models.diffusion.single_file_configs import PREDICTION_TYPES, ModelConfigs, read_model_configs, shipped_configs
from mixkit.models.diffusion.single_file_writer import UNET_PREFIX, VAE_PREFIX, ldm_state_dict

# Keys real checkpoints carry that no diffusers module needs: EMA copies and DDPM schedule
# buffers from training (the scheduler config defines the schedule), prediction markers,
# CLIP's position_ids buffer, OpenCLIP's logit_scale, and SD 2.x's unused text projection.
IGNORED_KEYS = re.compile(
    r"^(model_ema\..*|betas|alphas_cumprod(_prev)?|sqrt_.*|log_one_minus_alphas_cumprod|posterior_.*"
    r"|logvar|lvlb_weights|v_pred|ztsnr"
    r"|(cond_stage_model|conditioner\.embedders\.0)\.transformer\.text_model\.embeddings\.position_ids"
    r"|(cond_stage_model\.model|conditioner\.embedders\.[01]\.model)\.logit_scale"
    r"|cond_stage_model\.model\.text_projection)$"
)
# Separate VAE files may carry their training loss (LPIPS, discriminator) and EMA bookkeeping.
IGNORED_VAE_KEYS = re.compile(r"^(loss\..*|model_ema\..*)$")
VAE_FILE_PREFIXES = (VAE_PREFIX, "vae.")
EXAMPLES = 5
CONFIG_DIR_KEY = "config_dir"  # extras key: the user's config_dir a single file was loaded with (absent: shipped)
CONFIG_DIR_HOW = (
    "load it with the configs of a diffusers folder that matches it: load_diffusion_model(path, config_dir=FOLDER) "
    "or TextToImage.from_pretrained(path, config_dir=FOLDER); on the command line, mixkit generate --config-dir FOLDER"
)


def load_single_file(
    path: str | os.PathLike,
    *,
    vae_path: str | os.PathLike | None = None,
    config_dir: str | os.PathLike | None = None,
    torch_dtype: torch.dtype = torch.float32,
    prediction_type: str | None = None,
    unet_dtype: torch.dtype | None = None,
) -> DiffusionModel:
    """Load an SD 1.x / 2.x / SDXL base / SDXL refiner single-file checkpoint, optionally with a separate VAE file.

    Text-to-image (4-channel UNet) and inpainting (9-channel) files load alike; the channel count
    comes from the file's first UNet conv and must match `config_dir`'s UNet config when given.

    `config_dir` (a diffusers model folder) replaces the shipped configs, scheduler and
    tokenizers included. The prediction type is, in order: `prediction_type=`, `config_dir`'s
    scheduler config, a `v_pred` marker key, `modelspec.prediction_type` metadata, then for SD 2.x
    ComfyUI's weight statistic (see `detect_keys.guess_prediction_type`); the reason is kept in
    `extras["prediction_type_reason"]`. A `ztsnr` marker next to v-prediction (ComfyUI's rule) gives the
    shipped scheduler diffusers' zero-terminal-SNR settings (`rescale_betas_zero_snr`, trailing spacing).
    A separate VAE's file name and A1111 hash go to `extras["vae_name"]` and `extras["vae_hash"]` (the
    infotext's `VAE:` / `VAE hash:`). `unet_dtype` (default: `torch_dtype`)
    loads the UNet in another dtype, e.g. bfloat16 for the fast preset, without a float32 copy first.
    """
    # 1. Check inputs
    path, vae_path, config_dir = _check_inputs(path, vae_path, config_dir, torch_dtype, prediction_type)
    unet_dtype = _check_dtype(unet_dtype, "unet_dtype") if unet_dtype is not None else torch_dtype
    from mixkit.io import a1111_model_hash, load_state_dict

    # 2. Read the weights and detect the family from their keys
    state = normalize_legacy_keys(load_state_dict(path))
    family = detect_family({key: tuple(value.shape) for key, value in state.items()}, str(path))

    # 3. Choose configs and prediction type
    configs, prediction, reason = _choose_configs(state, family, config_dir, prediction_type, path)
    _fit_in_channels(configs, state, config_dir, path)

    # 4. Build empty modules and check the file's keys and shapes against them
    unet, vae, encoders = _empty_modules(configs)
    expected = ldm_state_dict(unet, None if vae_path else vae, encoders, family)

    def unused(key: str) -> bool:
        # With a separate VAE file, the checkpoint's own VAE (if any) is replaced, so not needed.
        return _ignored(key, expected) or (vae_path is not None and key.startswith(VAE_PREFIX))

    _check_layout(state, expected, path, configs.source, unused)
    for tokenizer, encoder in zip(configs.tokenizers, encoders):
        check_tokenizer(tokenizer, encoder.config.vocab_size, f"{path} with the {configs.source!r} configs")

    # 5. Convert (diffusers' converters) and assign the tensors in place
    from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint

    _assign(unet, convert_ldm_unet_checkpoint(_under(state, UNET_PREFIX), dict(unet.config)), unet_dtype, "UNet", path)
    for encoder, converted in zip(encoders, _convert_text_encoders(state, encoders, family)):
        _assign(encoder, to_module_keys(converted, encoder), torch_dtype, "text encoder", path)

    # 6. VAE: the file's own, or a separate single-file VAE
    extras = {"prediction_type_reason": reason, "configs": configs.source}
    if config_dir is not None:
        # kept so a refiner file of this architecture can be read with the same configs (pipelines.refiner_configs)
        extras[CONFIG_DIR_KEY] = str(config_dir)
    if vae_path is None:
        _assign(vae, _convert_vae(_under(state, VAE_PREFIX), vae), torch_dtype, "VAE", path)
    else:
        _load_vae_file(vae, vae_path, torch_dtype, load_state_dict)
        # A1111's get_loaded_vae_name(): the file name with its extension ("vae-ft-mse-840000-ema-pruned.ckpt").
        extras.update(vae_name=vae_path.name, vae_hash=a1111_model_hash(vae_path))
    del state

    scheduler = {**configs.scheduler, "prediction_type": prediction}
    return DiffusionModel(
        unet=unet.eval(), vae=vae.eval(), text_encoders=[e.eval() for e in encoders], tokenizers=configs.tokenizers,
        scheduler_config=scheduler, family=family, name=path.stem, source=str(path),
        model_hash=a1111_model_hash(path), extras=extras,
    )


def load_single_file_vae(
    path: str | os.PathLike,
    *,
    vae_config: dict | None = None,
    family: ModelFamily = ModelFamily.SD1,
    torch_dtype: torch.dtype = torch.float32,
):
    """Load a single-file VAE (LDM keys, bare or under `first_stage_model.`/`vae.`) as an AutoencoderKL.

    SD 1.x/2.x and SDXL VAEs share one architecture but not the latent scaling factor (0.18215
    vs 0.13025), which the file does not record: pass the VAE config of the model it will serve
    (`vae_config=dict(model.vae.config)`) or its `family`, else SD 1.x's config is used.
    """
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKL

    from mixkit.io import load_state_dict

    path, _, _ = _check_inputs(path, None, None, torch_dtype, None)
    if vae_config is None:
        if not isinstance(family, ModelFamily):
            raise TypeError(f"family must be a ModelFamily (sd1, sd2, sdxl), got {family!r}")
        vae_config = shipped_configs(family, "epsilon").vae
    with init_empty_weights():
        vae = AutoencoderKL.from_config(dict(vae_config))
    _load_vae_file(vae, path, torch_dtype, load_state_dict)
    return vae.eval()


def _check_dtype(dtype, name: str):
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype (torch.float32, torch.float16, ...), got {dtype!r}")
    return dtype


def _check_inputs(path, vae_path, config_dir, torch_dtype, prediction_type):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike to a .safetensors/.ckpt file, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"Single-file checkpoint {str(path)!r} does not exist or is not a file")
    if vae_path is not None:
        vae_path = Path(vae_path)
        if not vae_path.is_file():
            raise ModelNotFoundError(f"VAE file {str(vae_path)!r} (vae_path=) does not exist or is not a file")
    if config_dir is not None:
        config_dir = Path(config_dir)
        if not (config_dir / "unet" / "config.json").is_file():
            raise ModelNotFoundError(f"config_dir {str(config_dir)!r} is not a diffusers model folder (no unet/config.json)")
    _check_dtype(torch_dtype, "torch_dtype")
    if prediction_type is not None and prediction_type not in PREDICTION_TYPES:
        raise ValueError(f"prediction_type must be one of {PREDICTION_TYPES} or None (auto), got {prediction_type!r}")
    return path, vae_path, config_dir


def _fit_in_channels(configs: ModelConfigs, state: dict, config_dir, path: Path) -> None:
    """Give the UNet config the file's input channels (4 text-to-image, 9 inpainting, 8 instruct-pix2pix), or refuse
    a config_dir that says otherwise."""
    in_channels = unet_in_channels({UNET_IN: state[UNET_IN].shape}, str(path))
    if config_dir is None:
        # Inpainting and instruct-pix2pix files share their family's architecture but for the first conv (A1111
        # swaps in its *-inpainting / instruct-pix2pix config the same way), so the shipped config takes the file's
        # channel count.
        configs.unet = {**configs.unet, "in_channels": in_channels}
    elif configs.unet.get("in_channels", 4) != in_channels:
        kind = {4: "a text-to-image", 9: "an inpainting", 8: "an instruct-pix2pix"}
        raise ValueError(
            f"{path} is {kind[in_channels]} model (its UNet takes {in_channels} input channels) but config_dir "
            f"{str(config_dir)!r} has unet in_channels={configs.unet.get('in_channels', 4)}; pass the folder of "
            f"{kind[in_channels]} model of this architecture, or omit config_dir to use the shipped configs"
        )


def _choose_configs(state, family, config_dir, prediction_type, path) -> tuple[ModelConfigs, str, str]:
    """The configs, prediction type and why; the shipped scheduler also takes the file's `ztsnr` schedule."""
    if config_dir is not None:
        configs = read_model_configs(config_dir)
        if configs.family is not family:
            raise ValueError(
                f"{path} is {family.label} but config_dir {str(config_dir)!r} describes {configs.family.label}; "
                "pass a config_dir of the same family or omit it to use the shipped configs"
            )
        if prediction_type is not None:
            return configs, prediction_type, "prediction_type= argument"
        prediction = configs.scheduler.get("prediction_type", "epsilon")
        return configs, prediction, f"scheduler config in {config_dir}"
    if prediction_type is not None:
        prediction, reason = prediction_type, "prediction_type= argument"
    else:
        prediction, reason = guess_prediction_type(state, family, _metadata(path))
    configs = shipped_configs(family, prediction)
    schedule = zero_snr_schedule(state, prediction)
    if schedule:
        configs.scheduler = {**configs.scheduler, **schedule}
        reason += ("; zero terminal SNR schedule (rescale_betas_zero_snr, trailing spacing): "
                   "the file has a 'ztsnr' marker key")
    return configs, prediction, reason


def _metadata(path: Path) -> dict:
    """safetensors text metadata (empty for pickled checkpoints, which have none)."""
    from mixkit.io import detect_checkpoint_format, read_safetensors_metadata

    return read_safetensors_metadata(path) if detect_checkpoint_format(path) == "safetensors" else {}


def _empty_modules(configs: ModelConfigs):
    """UNet, VAE and text encoders with meta-device parameters (no memory, no random init)."""
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    with init_empty_weights():
        unet = UNet2DConditionModel.from_config(configs.unet)
        vae = AutoencoderKL.from_config(configs.vae)
        encoders = []
        last = len(configs.text_encoders) - 1
        for i, config in enumerate(configs.text_encoders):
            # SDXL's second encoder (the refiner's only one) feeds its pooled projection to the UNet's added embedding.
            cls = CLIPTextModelWithProjection if i == last and configs.family.uses_pooled_text else CLIPTextModel
            fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "_name_or_path")}
            encoders.append(cls(CLIPTextConfig(**fields)))
    return unet, vae, encoders


def _ignored(key: str, expected: dict) -> bool:
    if IGNORED_KEYS.match(key):
        return True
    # SD 2.x conditions on OpenCLIP's penultimate layer, so diffusers' encoder stops one short of
    # the file's last resblock, which is present in every SD 2.x file but never used.
    resblocks = OPEN_CLIP_PREFIX_SD2 + "transformer.resblocks."
    layer = key[len(resblocks):].split(".", 1)[0] if key.startswith(resblocks) else ""
    if layer.isdigit():
        return f"{resblocks}{int(layer) - 1}.ln_1.weight" in expected
    return False


def _check_layout(state: dict, expected: dict, path: Path, source: str, ignored) -> None:
    """Every needed key present with its shape, every file key used or known to be unused."""
    missing = [k for k in expected if k not in state]
    wrong = [f"{k}: file {list(state[k].shape)} vs config {list(expected[k].shape)}"
             for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    unexpected = [k for k in state if k not in expected and not ignored(k)]
    problems = []
    if missing and all(k.startswith(VAE_PREFIX) for k in missing):
        problems.append(f"no VAE ({len(missing)} missing {VAE_PREFIX}* keys): pass vae_path= a separate VAE file")
    elif missing:
        problems.append(f"{len(missing)} missing keys (e.g. {missing[:EXAMPLES]})")
    if wrong:
        problems.append(f"{len(wrong)} keys with other shapes (e.g. {wrong[:EXAMPLES]})")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys (e.g. {unexpected[:EXAMPLES]})")
    if problems:
        raise ConfigMismatchError(f"{path} does not match the {source!r} configs: " + "; ".join(problems),
                                  f"If the file is complete, it has a different architecture: {CONFIG_DIR_HOW}.")


def _under(state: dict, prefix: str) -> dict:
    return {key: value for key, value in state.items() if key.startswith(prefix)}


def _convert_text_encoders(state: dict, encoders: list, family: ModelFamily) -> list[dict]:
    from diffusers.loaders.single_file_utils import convert_ldm_clip_checkpoint, convert_open_clip_checkpoint

    if family is ModelFamily.SD1:
        return [convert_ldm_clip_checkpoint(_under(state, CLIP_PREFIX_SD1))]
    if family is ModelFamily.SD2:
        return [convert_open_clip_checkpoint(encoders[0], _under(state, OPEN_CLIP_PREFIX_SD2), prefix=OPEN_CLIP_PREFIX_SD2)]
    if family is ModelFamily.SDXL_REFINER:
        prefix = OPEN_CLIP_PREFIX_SDXL_REFINER
        return [convert_open_clip_checkpoint(encoders[0], _under(state, prefix), prefix=prefix)]
    return [
        convert_ldm_clip_checkpoint(_under(state, CLIP_PREFIX_SDXL)),
        convert_open_clip_checkpoint(encoders[1], _under(state, OPEN_CLIP_PREFIX_SDXL), prefix=OPEN_CLIP_PREFIX_SDXL),
    ]


def _convert_vae(vae_state: dict, vae) -> dict:
    from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint

    return convert_ldm_vae_checkpoint(vae_state, dict(vae.config))


def _load_vae_file(vae, vae_path: Path, torch_dtype, load_state_dict) -> None:
    """A separate VAE file: bare `encoder./decoder./quant_conv` keys or under `first_stage_model.`/`vae.`."""
    raw = load_state_dict(vae_path)
    prefix = next((p for p in VAE_FILE_PREFIXES if any(k.startswith(p) for k in raw)), "")
    state = {VAE_PREFIX + k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    if not any(k.startswith(VAE_PREFIX + "decoder.") for k in state):
        raise CheckpointFormatError(
            f"VAE file {vae_path} has no decoder weights (looked for 'decoder.*', 'first_stage_model.decoder.*', "
            f"'vae.decoder.*'; found e.g. {list(raw)[:3]}); pass an SD VAE such as vae-ft-mse-840000-ema-pruned.safetensors"
        )
    from mixkit.models.diffusion.ldm_layout import vae_to_ldm

    expected = vae_to_ldm(vae, VAE_PREFIX)
    _check_layout(state, expected, vae_path, "VAE", lambda k: bool(IGNORED_VAE_KEYS.match(k[len(VAE_PREFIX):])))
    _assign(vae, _convert_vae(state, vae), torch_dtype, "VAE", vae_path)


def _assign(module, converted: dict, dtype: torch.dtype, what: str, path: Path) -> None:
    """Put converted tensors into a meta module (strict: every parameter, right shapes)."""
    wanted = module.state_dict()
    missing = [k for k in wanted if k not in converted]
    wrong = [k for k in wanted if k in converted and tuple(converted[k].shape) != tuple(wanted[k].shape)]
    if missing or wrong:
        raise CheckpointFormatError(
            f"{path}: converting the {what} left {len(missing)} parameters unset (e.g. {missing[:EXAMPLES]}) and "
            f"{len(wrong)} with wrong shapes (e.g. {wrong[:EXAMPLES]}); the file does not fit this architecture."
        )
    tensors = {k: converted[k].to(dtype) if converted[k].is_floating_point() else converted[k] for k in wanted}
    module.load_state_dict(tensors, strict=True, assign=True)
    # Buffers outside the state dict (none today) would still be on the meta device: fail loudly.
    left = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"{what} tensors {left[:EXAMPLES]} were not initialised while loading {path}; please report this")
