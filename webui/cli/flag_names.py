"""The Python API's parameter-check messages in command-line terms: `cfg_scale must be …` becomes `--cfg must be …`.

The checks live in the Python API (`pipelines.params.check_txt2img_params` and the checks it calls), whose
messages name `Txt2ImgParams` fields, right for a Python caller. A command-line user typed flags, so the CLI
layer translates the field names of the error it caught and re-raises it; the checks themselves stay as they are.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from pipelines.sampler_parameters import OPTION_NAMES

# Txt2ImgParams field -> the `mixkit generate` flag that sets it (the sampler parameters are named alike:
# sigma_min -> --sigma-min). Fields with no flag of their own (prompt, sampler, ...) are left as they are.
FIELD_FLAGS = {
    "negative_prompt": "--negative",
    "restore_faces": "--restore-faces",
    "code_former_weight": "--code-former-weight",
    "face_restoration_model": "--face-restoration-model",
    "cfg_scale": "--cfg",
    "ip_adapter_image": "--ip-adapter-image",
    "ip_adapter_scale": "--ip-adapter-scale",
    "ip_adapter": "--ip-adapter",
    "ip_adapter_image_embeds": "--ip-adapter-embeds",
    "ip_adapter_mask": "--ip-adapter-mask",
    "ip_adapter_guidance": "--ip-adapter-guidance",
    "batch_size": "--batch-size",
    "batch_count": "--batch-count",
    "clip_skip": "--clip-skip",
    "schedule_type": "--schedule-type",
    "comma_padding_backtrack": "--comma-padding-backtrack",
    "sdxl_clip_l_skip": "--sdxl-clip-l-skip",
    "s_min_uncond": "--ngms",
    "s_min_uncond_all": "--ngms-all-steps",
    "skip_early_cond": "--skip-early-cfg",
    "refiner_switch_at": "--refiner-switch-at",
    "refiner_config_dir": "--refiner-config-dir",
    "refiner_switch_by_sample_steps": "--refiner-switch-by-sample-steps",
    "use_old_scheduling": "--use-old-scheduling",
    "tiling": "--tiling",
    "hypertile": "--hypertile",
    "freeu": "--freeu",
    "subseed_strength": "--subseed-strength",
    "seed_resize_from_w": "--seed-resize-from",
    "seed_resize_from_h": "--seed-resize-from",
    # `mixkit img2img`'s Img2ImgParams fields
    "denoising_strength": "--denoising-strength",
    "image_cfg_scale": "--image-cfg-scale",
    "resize_mode": "--resize-mode",
    "mask_blur": "--mask-blur",
    "inpainting_fill": "--masked-content",
    "inpainting_mask_invert": "--inpaint-not-masked",
    "inpaint_full_res_padding": "--only-masked-padding",
    "inpaint_full_res": "--only-masked",
    "mask_blur_x": "--mask-blur-x",
    "mask_blur_y": "--mask-blur-y",
    "latent_mask": "--latent-mask",
    "initial_noise_multiplier": "--noise-multiplier",
    "img2img_extra_noise": "--extra-noise",
    "inpainting_mask_weight": "--inpainting-mask-weight",
    "color_correction": "--color-correction",
    # `mixkit generate`'s hires-fix HiresParams fields (webui.cli.generate_hires)
    "hr_scale": "--hr-scale",
    "hr_resize_x": "--hr-resize-x",
    "hr_resize_y": "--hr-resize-y",
    "hr_upscaler": "--hr-upscaler",
    "hr_second_pass_steps": "--hr-steps",
    "hr_negative_prompt": "--hr-negative",
    "hr_prompt": "--hr-prompt",
    "hr_sampler": "--hr-sampler",
    "hr_schedule_type": "--hr-schedule-type",
    **{name: "--" + name.replace("_", "-") for name in OPTION_NAMES},
    # One-word fields are also ordinary words ("needs at least 2 steps"): translated only as a message's subject.
    "steps": "--steps",
    "width": "--width",
    "height": "--height",
    "seed": "--seed",
    "ensd": "--ensd",
    "rng_source": "--rng-source",
    "eta": "--eta",
    "emphasis": "--emphasis",
}
# A field name with an underscore is a Python identifier wherever it stands; one without only at the start.
_IDENTIFIERS = re.compile(r"(?<![\w-])(" + "|".join(sorted((f for f in FIELD_FLAGS if "_" in f), key=len, reverse=True))
                          + r")(?!\w)")
_SUBJECT = re.compile(r"^(" + "|".join(f for f in FIELD_FLAGS if "_" not in f) + r") ")


def in_flag_terms(message: str) -> str:
    """`message` with the Txt2ImgParams field names it holds replaced by their flags."""
    message = _IDENTIFIERS.sub(lambda m: FIELD_FLAGS[m.group(1)], message)
    return _SUBJECT.sub(lambda m: FIELD_FLAGS[m.group(1)] + " ", message)


@contextlib.contextmanager
def errors_in_flag_terms() -> Iterator[None]:
    """Re-raise a parameter check's ValueError / TypeError with its field names replaced by flags."""
    try:
        yield
    except ValueError as error:
        raise ValueError(in_flag_terms(str(error))) from None
    except TypeError as error:
        raise TypeError(in_flag_terms(str(error))) from None
