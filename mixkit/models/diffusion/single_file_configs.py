"""The configs a single-file checkpoint is assembled with: shipped with mixkit, or a user's folder.

Single files carry weights only. diffusers' `from_single_file` fetches the matching configs from
the hub; mixkit ships them instead (`configs/<name>/`, diffusers folder layout, written from the
published SD 1.5, SD 2.1 512/768-v, SDXL base 1.0 and SDXL refiner 1.0 architectures) so loading works offline.
A `config_dir` (any diffusers model folder) replaces them, e.g. for non-standard architectures
or for tests that pair a tiny model with its own configs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mixkit.models.diffusion.family import ModelFamily, detect_family
from mixkit.models.diffusion.single_file_tokenizer import load_clip_tokenizer

SHIPPED_CONFIGS = Path(__file__).resolve().parent / "configs"
PREDICTION_TYPES = ("epsilon", "v_prediction")

# (family, prediction type) -> shipped folder. SD 1.x/XL v-prediction fine-tunes reuse their
# family's architecture with the scheduler's prediction type switched.
SHIPPED_BY_FAMILY = {
    (ModelFamily.SD1, "epsilon"): "sd15",
    (ModelFamily.SD1, "v_prediction"): "sd15",
    (ModelFamily.SD2, "epsilon"): "sd21-512",
    (ModelFamily.SD2, "v_prediction"): "sd21-768-v",
    (ModelFamily.SDXL, "epsilon"): "sdxl-base",
    (ModelFamily.SDXL, "v_prediction"): "sdxl-base",
    # sd_xl_refiner_1.0 (Stability's sd_xl_refiner.yaml: 384 channels x [1, 2, 4, 4], depth 4, context 1280,
    # ADM input 2560 = 1280 pooled + 5 x 256 time ids); text encoder, VAE and scheduler are SDXL base's.
    (ModelFamily.SDXL_REFINER, "epsilon"): "sdxl-refiner",
    (ModelFamily.SDXL_REFINER, "v_prediction"): "sdxl-refiner",
}
TEXT_ENCODER_FOLDERS = ("text_encoder", "text_encoder_2")
TOKENIZER_FOLDERS = ("tokenizer", "tokenizer_2")


@dataclass
class ModelConfigs:
    """Everything but the weights: component configs, tokenizers, and where they came from."""

    unet: dict
    vae: dict
    text_encoders: list[dict]
    tokenizers: list
    scheduler: dict
    source: str  # shipped folder name, or the user's config_dir

    @property
    def family(self) -> ModelFamily:
        return detect_family(self.unet, has_second_text_encoder=len(self.text_encoders) > 1)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"Config file {path} is missing; config_dir must be a diffusers model folder") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"Config file {path} is not valid JSON ({error}); fix or replace it") from None


def _tokenizer(folder: Path):
    """A folder with a saved tokenizer (vocab.json/merges.txt, or tokenizer.json as transformers 5
    writes it) or only a config, which selects the shipped CLIP vocabulary."""
    if (folder / "vocab.json").is_file() or (folder / "tokenizer.json").is_file():
        from transformers import CLIPTokenizer

        return CLIPTokenizer.from_pretrained(folder)
    settings = _read_json(folder / "tokenizer_config.json")
    return load_clip_tokenizer(settings.get("pad_token", "<|endoftext|>"), settings.get("model_max_length", 77))


def read_model_configs(folder: str | Path, source: str | None = None) -> ModelConfigs:
    """Read the UNet/VAE/text-encoder/scheduler configs and tokenizers of a diffusers-layout folder."""
    folder = Path(folder)
    encoders = [_read_json(folder / name / "config.json") for name in TEXT_ENCODER_FOLDERS if (folder / name).is_dir()]
    tokenizers = [_tokenizer(folder / name) for name in TOKENIZER_FOLDERS if (folder / name).is_dir()]
    if not encoders or len(tokenizers) != len(encoders):
        raise FileNotFoundError(
            f"{folder} needs text_encoder/ (and text_encoder_2/ for SDXL; only text_encoder_2/ for the SDXL refiner) "
            "with matching tokenizer folders; "
            f"found {len(encoders)} text encoder and {len(tokenizers)} tokenizer folders"
        )
    return ModelConfigs(
        unet=_read_json(folder / "unet" / "config.json"),
        vae=_read_json(folder / "vae" / "config.json"),
        text_encoders=encoders,
        tokenizers=tokenizers,
        scheduler=_read_json(folder / "scheduler" / "scheduler_config.json"),
        source=source or str(folder),
    )


def shipped_configs(family: ModelFamily, prediction_type: str) -> ModelConfigs:
    """mixkit's own configs for a family; the scheduler's prediction type is set to `prediction_type`."""
    name = SHIPPED_BY_FAMILY[(family, prediction_type)]
    configs = read_model_configs(SHIPPED_CONFIGS / name, source=name)
    configs.scheduler = {**configs.scheduler, "prediction_type": prediction_type}
    return configs
