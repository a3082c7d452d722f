"""SAI's model spec (`modelspec.*` metadata) of a trained LoRA, as kohya's `sai_model_spec.build_metadata` writes it.

UIs (ComfyUI, Civitai's uploader, A1111's card editor) show `modelspec.title` and read the architecture to tell
which base a file was trained for; kohya writes the block into every file, `--no_metadata` ones included.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

SAI_MODEL_SPEC_VERSION = "1.0.1"  # kohya's current BASE_METADATA
STABILITY_IMPLEMENTATION = "https://github.com/Stability-AI/generative-models"


# The trainers' settings the texts come from (kohya's argument names), in `ModelSpecTexts`' order.
METADATA_TEXTS = ("metadata_title", "metadata_author", "metadata_description", "metadata_license", "metadata_tags")


@dataclass(frozen=True)
class ModelSpecTexts:
    """The user-written parts (kohya's --metadata_title/author/description/license/tags); None: not written."""

    title: str | None = None
    author: str | None = None
    description: str | None = None
    license: str | None = None
    tags: str | None = None

    @classmethod
    def of_config(cls, config) -> ModelSpecTexts:
        """The texts a trainer's config sets (`METADATA_TEXTS`)."""
        return cls(*(getattr(config, name) for name in METADATA_TEXTS))


def lora_architecture(family: str, v_prediction: bool) -> str:
    """kohya's `determine_architecture` for a LoRA: the base's SAI id and `/lora` (SD 2.x split by its v-prediction
    768 and epsilon 512 variants)."""
    base = {"sd1": "stable-diffusion-v1", "sdxl": "stable-diffusion-xl-v1-base",
            "sd2": "stable-diffusion-v2-768-v" if v_prediction else "stable-diffusion-v2-512"}[family]
    return f"{base}/lora"


def lora_modelspec(*, family: str, v_prediction: bool, title: str, resolution, timestamp: float,
                   texts: ModelSpecTexts = ModelSpecTexts(), min_timestep: int = 0, max_timestep: int | None = None,
                   clip_skip: int = 1, sgm_names: bool = True, version: str = "") -> dict[str, str]:
    """The `modelspec.*` keys of a LoRA file. `title` is used when `texts.title` is None (kohya: the output name);
    the date is the local time of `timestamp` in ISO 8601 without microseconds, as kohya's; `timestep_range` only
    when the run limited its timesteps and `encoder_layer` only for a clip skip other than 1 (kohya's unset).
    `resolution` is one side or (width, height), written "<width>x<height>" as kohya's sai_model_spec does."""
    from mixkit.data.bucketing import resolution_size

    width, height = resolution_size(resolution)
    spec = {
        "modelspec.sai_model_spec": SAI_MODEL_SPEC_VERSION,
        "modelspec.architecture": lora_architecture(family, v_prediction),
        # kohya's `determine_implementation`: SDXL LoRAs carry SGM names, SD 1.x/2.x ones diffusers' module paths
        # (as do SDXL files written with sdxl_key_layout="diffusers").
        "modelspec.implementation": STABILITY_IMPLEMENTATION if family == "sdxl" and sgm_names else "diffusers",
        "modelspec.title": texts.title if texts.title is not None else title,
        "modelspec.resolution": f"{width}x{height}",
        "modelspec.date": datetime.datetime.fromtimestamp(int(timestamp)).isoformat(),
        "modelspec.prediction_type": "v" if v_prediction else "epsilon",
    }
    for key in ("author", "description", "license", "tags"):
        value = getattr(texts, key)
        if value is not None:
            spec[f"modelspec.{key}"] = value
    if min_timestep or max_timestep is not None:
        spec["modelspec.timestep_range"] = f"{min_timestep},{1000 if max_timestep is None else max_timestep}"
    if clip_skip != 1:
        spec["modelspec.encoder_layer"] = str(clip_skip)
    if version:
        spec["modelspec.implementation_version"] = version
    return spec
