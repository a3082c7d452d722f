"""A1111's `/sdapi/v1/txt2img` and `/img2img` request bodies: its field names and its defaults.

Only types are declared here; value ranges come from `pipelines.params.GenerationLimits` and are
checked by the pipelines' own `check_*_params` (see `webui.api_convert`), so the API, the CLI and
the UI sliders share one set of limits. Fields A1111 has but mixkit does not implement are
accepted at their "off" value and refused otherwise, never silently ignored.

Sampler, scheduler, steps, CFG scale, width and height keep A1111's defaults here for the
schema, but a request that leaves them out gets the server's Settings defaults instead: pydantic's
`model_fields_set` tells omitted from explicit (see `webui.generation_defaults`).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class A1111Request(BaseModel):
    """A1111's request models: unknown keys ignored, and `null` for any field the same as leaving it out."""

    # A1111's models ignore unknown keys; clients such as webuiapi send extension fields. NaN and Infinity (which
    # Python's json module reads and writes) are refused in every number field, naming it: a field the job does not
    # use would otherwise carry them into the answer's `parameters` echo, which JSON cannot encode (a 500 after the
    # work was done).
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _null_is_left_out(cls, data: Any) -> Any:
        """A1111 generates every request field as Optional and reads None as "use the default" (a null seed is a
        random seed, a null sampler_index falls back to sampler_name); JS clients send `"seed": null`. A null field
        is dropped here, so it gets the default and, for `model_fields_set`, counts as not sent."""
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _encodable_text(cls, value: Any, info: ValidationInfo) -> Any:
        encodable_text({info.field_name: value})  # per field: the error names it and echoes only its value
        return value


def encodable_text(data: dict) -> None:
    """ValueError naming the first field (or key) of a request body whose text holds a lone UTF-16 surrogate.

    `"\\ud800"` is valid JSON and json.loads turns it into a lone surrogate, which UTF-8 cannot encode: a field the
    job never reads (hr_prompt without hires fix, sampler_index next to sampler_name) came back in the answer's
    `parameters` echo and the client got a 500 after the images were made. Refused up front, naming where it is.
    Walked without recursion: json.loads takes ~990 nested lists.
    """
    pending: list[tuple[tuple, Any]] = [((key,), value) for key, value in data.items()]
    pending.extend(((key,), key) for key in data)
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
                where = where.encode("utf-8", "backslashreplace").decode("utf-8")  # a key may hold it too
                raise ValueError(f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not "
                                 f"text; send the character itself or its full surrogate pair") from None
        elif isinstance(value, dict):
            pending.extend(((*path, key), item) for key, item in value.items())
            pending.extend(((*path, key), key) for key in value)
        elif isinstance(value, list):
            pending.extend(((*path, index), item) for index, item in enumerate(value))


def finite_json(data: Any, field: str) -> Any:
    """`data` unchanged, or ValueError naming the first NaN or Infinity in it (a free-form JSON field).

    `allow_inf_nan=False` covers the typed number fields; `script_args`, `override_settings`, `alwayson_scripts` and
    `comments` hold any JSON, and a NaN there that the job never reads came back in the answer's `parameters` echo,
    which JSON cannot encode: a 500 after the images were made. Walked without recursion: json.loads takes ~990
    nested lists.
    """
    pending = [((field,), data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
            raise ValueError(f"{where} is {value}, which is not a JSON number; send a finite number")
        if isinstance(value, dict):
            pending.extend(((*path, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            pending.extend(((*path, index), item) for index, item in reversed(list(enumerate(value))))
    return data


class Txt2ImgRequest(A1111Request):

    prompt: str = ""
    negative_prompt: str = ""
    styles: list[str] | None = None
    seed: int = -1
    subseed: int = -1
    subseed_strength: float = 0.0
    seed_resize_from_h: int = -1
    seed_resize_from_w: int = -1
    sampler_name: str | None = None
    sampler_index: str = "Euler"  # A1111's API default sampler
    scheduler: str | None = None
    batch_size: int = 1
    n_iter: int = 1
    steps: int = 50  # A1111's API default (its UI's is 20)
    cfg_scale: float = 7.0
    width: int = 512
    height: int = 512
    restore_faces: bool | None = None
    tiling: bool | None = None
    do_not_save_samples: bool = False
    do_not_save_grid: bool = False
    eta: float | None = None
    denoising_strength: float | None = None
    s_min_uncond: float | None = None
    s_churn: float | None = None
    s_tmax: float | None = None
    s_tmin: float | None = None
    s_noise: float | None = None
    override_settings: dict[str, Any] | None = None
    override_settings_restore_afterwards: bool = True
    refiner_checkpoint: str | None = None
    refiner_switch_at: float | None = None
    # mixkit's: the configs a single-file refiner is read with (the Python API's refiner_config_dir), named as a
    # diffusers folder among the server's checkpoints, never a path (webui.refiner_config_folders)
    refiner_config_dir: str | None = None
    disable_extra_networks: bool = False
    comments: dict[str, Any] | None = None
    enable_hr: bool = False
    firstphase_width: int = 0
    firstphase_height: int = 0
    hr_scale: float = 2.0
    hr_upscaler: str | None = None
    hr_second_pass_steps: int = 0
    hr_resize_x: int = 0
    hr_resize_y: int = 0
    hr_checkpoint_name: str | None = None
    hr_sampler_name: str | None = None
    hr_scheduler: str | None = None
    hr_prompt: str = ""
    hr_negative_prompt: str = ""
    script_name: str | None = None
    script_args: list[Any] = Field(default_factory=list)
    send_images: bool = True
    save_images: bool = False
    alwayson_scripts: dict[str, Any] = Field(default_factory=dict)
    infotext: str | None = None  # fills the fields the request leaves out (webui.api_infotext)
    # A1111's id for `POST /internal/progress` to follow this request by (`webui.ui_tasks`); checked, not ignored
    force_task_id: str | None = None

    @field_validator("override_settings", "comments", "script_args", "alwayson_scripts")
    @classmethod
    def _finite_free_form(cls, value: Any, info: ValidationInfo) -> Any:
        return finite_json(value, info.field_name)


class Img2ImgRequest(Txt2ImgRequest):
    init_images: list[str] = Field(default_factory=list)
    resize_mode: int = 0
    denoising_strength: float = 0.75
    # An instruct-pix2pix checkpoint's Image CFG scale (pipelines.instruct_pix2pix); ignored for any other model, as
    # A1111 sets it to None unless the model is one (`cond_stage_key == "edit"`): webuiapi and most scripts send 1.5
    # with every request. Left out (None), A1111 runs the plain CFG with the image on every row and records nothing.
    image_cfg_scale: float | None = None
    mask: str | None = None
    mask_blur_x: int = 4
    mask_blur_y: int = 4
    mask_blur: int | None = None
    mask_round: bool = True
    inpainting_fill: int = 0
    inpaint_full_res: bool = True
    inpaint_full_res_padding: int = 0
    inpainting_mask_invert: int = 0
    initial_noise_multiplier: float | None = None
    latent_mask: str | None = None
    include_init_images: bool = False


class ExtrasBaseRequest(A1111Request):
    """A1111's Extras fields, shared by `/extra-single-image` and `/extra-batch-images` (see `webui.api_extras`)."""

    resize_mode: int = 0  # 0: scale by upscaling_resize; 1: scale to upscaling_resize_w x upscaling_resize_h
    show_extras_results: bool = True
    gfpgan_visibility: float = 0.0
    codeformer_visibility: float = 0.0
    codeformer_weight: float = 0.0
    upscaling_resize: float = 2.0
    upscaling_resize_w: int = 512
    upscaling_resize_h: int = 512
    upscaling_crop: bool = True
    upscaler_1: str = "None"
    upscaler_2: str = "None"
    extras_upscaler_2_visibility: float = 0.0
    upscale_first: bool = False


class ExtrasSingleImageRequest(ExtrasBaseRequest):

    image: str


class ExtrasFileData(BaseModel):
    data: str  # base64 image
    name: str  # A1111 names saved files after it; nothing is saved here


class ExtrasBatchImagesRequest(ExtrasBaseRequest):

    imageList: list[ExtrasFileData]  # noqa: N815  (A1111's field name)


class PngInfoRequest(BaseModel):
    image: str


class AppflowRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)  # per-call task options (steps, width, seed, ...)
