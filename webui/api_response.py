"""What a generation response holds besides its images: A1111's `info` JSON (canonical names, the infotext's extra
keys typed) and the request echoed as `parameters`."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from pipelines.params import Txt2ImgParams
from webui.api_requests import Txt2ImgRequest


def generation_info(params: Txt2ImgParams, result, *, model_name: str | None, model_hash: str | None,
                    job_timestamp: str, vae_name: str | None = None, vae_hash: str | None = None,
                    styles: list[str] | None = None, with_grid: bool = False) -> dict[str, Any]:
    """The JSON A1111 returns (as a string) in a response's `info` field: canonical names, as the infotext's
    ("k_dpmpp_2m" comes back as "DPM++ 2M" with its schedule type "Karras").

    The variation seed is the one the pipeline made concrete (`result.subseed`), else `fixed_subseed`'s; A1111
    reports it and `subseed + i` per image, and the resize sides as the request gave them (-1 when left out).
    `with_grid`: the response's images start with the grid (`webui.result_grid`), so its infotext (the first
    image's) starts `infotexts` and `index_of_first_image` is 1, as in A1111's `Processed`."""
    from pipelines.params import per_image
    from pipelines.samplers import resolve_sampler

    spec, schedule_type = resolve_sampler(params.sampler, params.schedule_type)
    subseed = getattr(result, "subseed", None)
    subseed = fixed_subseed(params.subseed) if subseed is None else subseed

    prompts = per_image(params.prompt, params.batch_size) * params.batch_count
    negatives = per_image(params.negative_prompt, params.batch_size) * params.batch_count
    count = len(result.images)
    infotexts = list(result.infotexts)
    if with_grid and infotexts:
        infotexts.insert(0, infotexts[0])
    return {
        "prompt": prompts[0] if prompts else "", "all_prompts": prompts[:count],
        "negative_prompt": negatives[0] if negatives else "", "all_negative_prompts": negatives[:count],
        "seed": result.seeds[0] if result.seeds else params.seed, "all_seeds": list(result.seeds),
        "subseed": subseed, "all_subseeds": [subseed + index for index in range(count)],
        "subseed_strength": params.subseed_strength,
        "width": params.width, "height": params.height, "sampler_name": spec.name, "scheduler": schedule_type,
        "cfg_scale": params.cfg_scale, "steps": params.steps, "batch_size": params.batch_size,
        # A1111's `p.restore_faces` and, for a restoring call, its face_restoration_model setting
        "restore_faces": bool(getattr(params, "restore_faces", False)),
        "face_restoration_model": params.face_restoration_model if getattr(params, "restore_faces", False) else None,
        "sd_model_name": model_name, "sd_model_hash": model_hash,
        "sd_vae_name": vae_name, "sd_vae_hash": vae_hash, "seed_resize_from_w": params.seed_resize_from_w or -1,
        "seed_resize_from_h": params.seed_resize_from_h or -1,
        "denoising_strength": getattr(params, "denoising_strength", None),
        "extra_generation_params": extra_generation_params(result.infotexts[0]) if result.infotexts else {},
        "index_of_first_image": int(with_grid), "infotexts": infotexts, "styles": list(styles or []), "job_timestamp": job_timestamp,
        "clip_skip": params.clip_skip, "interrupted": result.interrupted,
        "is_using_inpainting_conditioning": bool(getattr(result, "inpainting_conditioning", False)),
        "version": "mixkit",
    }


# The keys A1111's `create_infotext` writes itself; every other key of an infotext comes from the processing's
# `extra_generation_params` (hires recipe, denoising strength, LoRA hashes, NGMS ...), which `info` returns.
INFOTEXT_CORE_KEYS = frozenset({
    "Steps", "Sampler", "Schedule type", "CFG scale", "Image CFG scale", "Seed", "Face restoration", "Size",
    "Model hash", "Model", "FP8 weight", "Cache FP16 weight for LoRA", "VAE hash", "VAE", "Variation seed",
    "Variation seed strength", "Seed resize from", "Conditional mask weight", "Clip skip", "ENSD", "Tiling",
    "RNG", "Version", "User",
})


def extra_generation_params(infotext: str) -> dict[str, Any]:
    """`info.extra_generation_params`: the infotext's keys beyond A1111's core ones, numbers and booleans typed."""
    from pipelines.infotext import split_infotext

    def typed(text: str):
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", text):
            return float(text)
        return {"True": True, "False": False}.get(text, text)

    return {key: typed(value) for key, value in split_infotext(infotext)[2].items() if key not in INFOTEXT_CORE_KEYS}


def fixed_subseed(requested: int | None) -> int:
    """The request's variation seed made concrete as A1111's `get_fixed_seed` does: -1 (or none) becomes a random
    integer in [0, 4294967294). A1111 reports it in `info` even when `subseed_strength` is 0, and a client copies
    it into its next variation request."""
    if requested is None or requested == -1:
        return random.randrange(4294967294)
    return int(requested)


def request_parameters(request: Txt2ImgRequest) -> dict[str, Any]:
    """The request echoed back in `parameters`, images left out (A1111 sets them to None)."""
    echoed = request.model_dump()
    for name in ("init_images", "mask"):
        if name in echoed and not echoed.get("include_init_images"):
            echoed[name] = None
    return echoed


def info_json(info: dict[str, Any]) -> str:
    return json.dumps(info, ensure_ascii=False)
