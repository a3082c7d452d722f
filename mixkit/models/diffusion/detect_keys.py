"""Which model a single-file (LDM/SGM layout) checkpoint holds, decided from its keys and shapes.

Users rename files freely, so like A1111, ComfyUI and diffusers we look at marker keys:
the text-encoder layout tells the family apart (OpenAI CLIP for SD 1.x, OpenCLIP for SD 2.x,
both under `conditioner.embedders` for SDXL), and the UNet's first conv tells text-to-image (4
input channels) from inpainting (9: latent, mask, masked-image latent), as A1111's
`sd_models_config` does (it picks the inpainting config when that conv has 9 input channels, and its
instruct-pix2pix config when it has 8: latent and input-image latent). Other channel counts are refused.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from mixkit.errors import CheckpointFormatError
from mixkit.models.diffusion.family import ModelFamily

UNET_IN = "model.diffusion_model.input_blocks.0.0.weight"
LABEL_EMB = "model.diffusion_model.label_emb.0.0.weight"
SD1_CLIP = "cond_stage_model.transformer.text_model.embeddings.token_embedding.weight"
SD2_OPEN_CLIP = "cond_stage_model.model.token_embedding.weight"
SDXL_CLIP = "conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight"
SDXL_OPEN_CLIP = "conditioner.embedders.1.model.token_embedding.weight"
SDXL_REFINER_OPEN_CLIP = "conditioner.embedders.0.model.token_embedding.weight"

# ComfyUI's SD 2.x rule: v-prediction fine-tunes move this LayerNorm bias far more than
# epsilon ones (population std > 0.09). A1111 instead runs the UNet once at t=999 on a constant
# input; diffusers defaults SD 2.x to v unless `global_step == 875000` (the 512-base release).
SD2_V_PROBE_KEY = "model.diffusion_model.output_blocks.11.1.transformer_blocks.0.norm1.bias"
SD2_V_PROBE_THRESHOLD = 0.09
# Marker tensors some trainers (and ComfyUI's "save checkpoint") add to v-prediction files.
V_PRED_MARKER = "v_pred"
# Next to `v_pred`: the model was trained with a zero-terminal-SNR schedule (NoobAI-XL V-Pred style files).
# ComfyUI's supported_models.SDXL.model_type sets sampling_settings["zsnr"] only when "v_pred" is there too.
ZTSNR_MARKER = "ztsnr"
# diffusers' spelling of that schedule (Lin et al. 2024: rescaled betas, sampling from the last timestep).
ZERO_SNR_SCHEDULE = {"rescale_betas_zero_snr": True, "timestep_spacing": "trailing"}
# Stability's ModelSpec metadata, written by kohya sd-scripts: "epsilon" or "v".
MODELSPEC_PREDICTION = "modelspec.prediction_type"
MODELSPEC_VALUES = {"epsilon": "epsilon", "v": "v_prediction", "v_prediction": "v_prediction"}

# Early SD 1.x files were saved with transformers < 4.x, whose CLIPTextModel had no `text_model.`
# level; A1111 renames them on load (`checkpoint_dict_replacements_sd1`), and so do we.
LEGACY_SD1_CLIP_RENAMES = {
    f"cond_stage_model.transformer.{part}.": f"cond_stage_model.transformer.text_model.{part}."
    for part in ("embeddings", "encoder", "final_layer_norm")
}

WHAT_WE_LOOK_FOR = (
    f"SD 1.x: {UNET_IN!r} + {SD1_CLIP!r}; "
    f"SD 2.x: {UNET_IN!r} + {SD2_OPEN_CLIP!r}; "
    f"SDXL base: {UNET_IN!r} + {LABEL_EMB!r} + {SDXL_CLIP!r} + {SDXL_OPEN_CLIP!r}; "
    f"SDXL refiner: {UNET_IN!r} + {LABEL_EMB!r} + {SDXL_REFINER_OPEN_CLIP!r}"
)


def _looks_like(keys: Sequence[str]) -> str:
    """A hint for common wrong files, so the error tells the user what they actually picked."""
    sample = keys[:2000]
    if any("lora_" in k or ".lora_down." in k or ".lora_A." in k or "hada_w1" in k for k in sample):
        return " It looks like a LoRA/LyCORIS file: load it as a LoRA on top of a base model instead."
    if any(k.startswith(("encoder.", "decoder.")) for k in sample) and not any(k.startswith("model.") for k in sample):
        return " It looks like a VAE-only file: pass it as vae_path= together with a full checkpoint."
    if any(k.startswith(("down_blocks.", "unet.", "text_encoder.")) for k in sample):
        return " It looks like diffusers-format weights: load the diffusers folder instead of a single file."
    return ""


def normalize_legacy_keys(state: dict) -> dict:
    """The same tensors with pre-`text_model.` SD 1.x CLIP keys renamed to today's layout."""
    if not any(key.startswith(old) for key in state for old in LEGACY_SD1_CLIP_RENAMES):
        return state
    renamed = {}
    for key, value in state.items():
        old = next((o for o in LEGACY_SD1_CLIP_RENAMES if key.startswith(o)), None)
        renamed[LEGACY_SD1_CLIP_RENAMES[old] + key[len(old):] if old else key] = value
    return renamed


TEXT_TO_IMAGE_CHANNELS = 4
INPAINTING_CHANNELS = 9  # 4 latent + 1 mask + 4 masked-image latent
INSTRUCT_PIX2PIX_CHANNELS = 8  # 4 latent + 4 input-image latent
SUPPORTED_UNET_CHANNELS = (TEXT_TO_IMAGE_CHANNELS, INPAINTING_CHANNELS, INSTRUCT_PIX2PIX_CHANNELS)


def unet_in_channels(shapes: Mapping[str, Sequence[int]], path: str = "<state dict>") -> int:
    """The UNet's input channels read from its first conv: 4 (text-to-image), 9 (inpainting) or 8 (instruct-pix2pix)."""
    in_channels = int(shapes[UNET_IN][1])
    check_unet_in_channels(in_channels, path, f"{UNET_IN} has shape {list(shapes[UNET_IN])}")
    return in_channels


def check_unet_in_channels(in_channels: int, path: str, evidence: str) -> None:
    """Refuse, at load, a UNet whose input channels mixkit cannot feed (a depth-to-image UNet's 5, say), which would
    otherwise load and then fail mid-generation on its first convolution."""
    if in_channels not in SUPPORTED_UNET_CHANNELS:
        raise CheckpointFormatError(
            f"{path}: the UNet takes {in_channels} input channels ({evidence}); only text-to-image (4), inpainting (9) "
            "and instruct-pix2pix (8) models are supported."
        )


def detect_family(shapes: Mapping[str, Sequence[int]], path: str = "<state dict>") -> ModelFamily:
    """The family of an LDM-layout checkpoint given its key -> shape table; errors name what is missing."""
    keys = list(shapes)
    if UNET_IN not in shapes:
        raise CheckpointFormatError(
            f"{path} is not a Stable Diffusion single-file checkpoint in the LDM/A1111 layout: key "
            f"{UNET_IN!r} is missing (found {len(keys)} keys, e.g. {keys[:3]}).{_looks_like(keys)} "
            f"Looked for: {WHAT_WE_LOOK_FOR}."
        )
    unet_in_channels(shapes, path)
    if SDXL_REFINER_OPEN_CLIP in shapes:  # sd_xl_refiner_1.0: OpenCLIP bigG alone, as the first embedder
        if LABEL_EMB not in shapes:
            raise CheckpointFormatError(f"{path} has the SDXL refiner's text encoder but no {LABEL_EMB!r}; the UNet is "
                                        "incomplete: download the full checkpoint again.")
        return ModelFamily.SDXL_REFINER
    if SDXL_OPEN_CLIP in shapes and SDXL_CLIP in shapes:
        if LABEL_EMB not in shapes:
            raise CheckpointFormatError(f"{path} has SDXL text encoders but no {LABEL_EMB!r}; the UNet is incomplete.")
        return ModelFamily.SDXL
    if LABEL_EMB in shapes:
        raise CheckpointFormatError(_sdxl_like_problem(shapes, path))
    if SD2_OPEN_CLIP in shapes:
        return ModelFamily.SD2
    if SD1_CLIP in shapes:
        return ModelFamily.SD1
    raise CheckpointFormatError(
        f"{path} has an LDM UNet but no text encoder this loader knows. Looked for: {WHAT_WE_LOOK_FOR}."
    )


def _sdxl_like_problem(shapes: Mapping[str, Sequence[int]], path: str) -> str:
    """Why a file with a class/ADM embedding but not both SDXL text encoders cannot load, and what to do."""
    if SDXL_CLIP in shapes or SDXL_OPEN_CLIP in shapes:
        present, missing = (SDXL_CLIP, SDXL_OPEN_CLIP) if SDXL_CLIP in shapes else (SDXL_OPEN_CLIP, SDXL_CLIP)
        return (f"{path} has one of SDXL's two text encoders ({present!r}) but not the other ({missing!r}); the file "
                "is incomplete: download the full checkpoint again.")
    if not any(key.startswith(("conditioner.", "cond_stage_model.")) for key in shapes):
        adm = int(shapes[LABEL_EMB][1]) if len(shapes[LABEL_EMB]) > 1 else None
        if adm in (2816, 2560):  # SDXL base's / refiner's added embedding input (1280 pooled + 6 or 5 x 256)
            return (f"{path} holds an SDXL UNet only (no text encoders, no VAE: a 'UNet-only' file as ComfyUI's "
                    "UNETLoader reads them); mixkit loads complete checkpoints: use the full SDXL checkpoint, or put "
                    "the UNet into a diffusers SDXL folder's unet/ and load the folder.")
    return (f"{path} has a class/ADM embedding ({LABEL_EMB!r}) without SDXL's text encoders "
            "(an unCLIP or upscaler model?); only SD 1.x, SD 2.x and SDXL base are supported.")


def zero_snr_schedule(state: Mapping[str, torch.Tensor], prediction_type: str) -> dict:
    """The scheduler settings a `ztsnr` marker asks for (ZERO_SNR_SCHEDULE), or {} without it.

    As ComfyUI, only for v-prediction: at zero SNR an epsilon model sees pure noise and cannot say anything
    about the image (Lin et al. 2024, section 3.2), so a marker on an epsilon file is ignored.
    """
    return dict(ZERO_SNR_SCHEDULE) if ZTSNR_MARKER in state and prediction_type == "v_prediction" else {}


def guess_prediction_type(
    state: Mapping[str, torch.Tensor], family: ModelFamily, metadata: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """(prediction_type, reason) for a file whose configs say nothing; pass prediction_type= to override.

    Order: the `v_pred` marker key, ModelSpec metadata, then (SD 2.x only) ComfyUI's statistic, which
    is skipped for inpainting (9-channel) UNets: ComfyUI's `supported_models.SD20.model_type` applies it
    only `if self.unet_config["in_channels"] == 4` ("SD2.0 inpainting models are not v prediction"), and
    A1111 picks its epsilon `v2-inpainting-inference.yaml` for 9 channels before its v-prediction test.
    """
    if V_PRED_MARKER in state:
        return "v_prediction", f"the file has a {V_PRED_MARKER!r} marker key"
    declared = MODELSPEC_VALUES.get(str((metadata or {}).get(MODELSPEC_PREDICTION, "")).strip().lower())
    if declared:
        return declared, f"safetensors metadata {MODELSPEC_PREDICTION}={metadata[MODELSPEC_PREDICTION]!r}"
    if family is not ModelFamily.SD2:
        return "epsilon", f"{family.label} checkpoints are epsilon-prediction unless marked {V_PRED_MARKER!r}"
    unet_in = state.get(UNET_IN)
    if unet_in is not None and unet_in.ndim == 4 and int(unet_in.shape[1]) != TEXT_TO_IMAGE_CHANNELS:
        return "epsilon", (f"SD 2.x inpainting or instruct-pix2pix UNet ({int(unet_in.shape[1])} input channels) is "
                           "epsilon-prediction unless marked (ComfyUI's and A1111's SD 2.x inpainting rule)")
    probe = state.get(SD2_V_PROBE_KEY)
    if probe is None:
        return "epsilon", f"SD 2.x file without {SD2_V_PROBE_KEY!r} to test; assuming epsilon"
    spread = float(probe.float().std(unbiased=False))
    if spread > SD2_V_PROBE_THRESHOLD:
        return "v_prediction", f"std of {SD2_V_PROBE_KEY} is {spread:.3f} > {SD2_V_PROBE_THRESHOLD} (ComfyUI's SD 2.x rule)"
    return "epsilon", f"std of {SD2_V_PROBE_KEY} is {spread:.3f} <= {SD2_V_PROBE_THRESHOLD} (ComfyUI's SD 2.x rule)"
