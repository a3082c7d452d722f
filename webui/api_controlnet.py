"""sd-webui-controlnet's API units (`alwayson_scripts: {"controlnet": {"args": [...]}}`) -> unit specs.

Units are validated here (names, numbers, images); the models are only loaded in the generation
worker, which turns each `UnitSpec` into a `pipelines.controlnet.ControlNetUnit`. `pixel_perfect` and
`processor_res` (the extension's -1 or absent = 512) set the preprocessor resolution as the extension does
(`pipelines.controlnet.resolution`); `hr_option` other than "Both" is refused with hires fix, where the units
guide both passes. The three control modes are the extension's (1, "My prompt is more important", is soft
injection). Old clients' keys are renamed as the extension's `to_processing_unit` renames them (`guidance`,
`guessmode`, `lowvram`, `input_image`, `mask_image`); any other key the server does not read is refused, naming it.
A unit's `image` takes every shape the extension's `parse_image_formats` does (a base64 string,
`{"image": ..., "mask": ...}`, `[image, mask]`, a one-item list of such objects); its mask (`mask`, or the one inside
`image`) is decoded and handed to the unit as the extension uses it
(`pipelines.controlnet.unit_mask`: the inpaint modules' masked area, else a drawing replacing the picture, a blank
one ignored); a mask of another size than the unit's image is refused, as there. `effective_region_mask` (extension
1.1.4xx) is a base64 image limiting where the unit's control applies (`pipelines.controlnet.region_mask`).
Units with an IP-Adapter module (`ip-adapter_clip_sd15`, ...) are image prompts, not ControlNets: `parse_units` leaves
them to `parse_ip_adapter_units` (`webui.api_ip_adapter`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator

from mixkit.finite_numbers import is_finite_number
from webui.base64_images import decode_base64_image

logger = logging.getLogger(__name__)

RESIZE_MODES = {"just resize": "just resize", "crop and resize": "crop and resize", "resize and fill": "resize and fill",
                "inner fit (scale to fit)": "crop and resize", "outer fit (shrink to fit)": "resize and fill",
                "envelope (outer fit)": "resize and fill", "scale to fit (inner fit)": "crop and resize"}
RESIZE_CODES = {0: "just resize", 1: "crop and resize", 2: "resize and fill"}
# sd-webui-controlnet's control modes -> (guess_mode, soft_injection) of pipelines.controlnet.ControlNetUnit.
CONTROL_MODES = {0: (False, False), "balanced": (False, False),
                 1: (False, True), "my prompt is more important": (False, True),
                 2: (True, False), "controlnet is more important": (True, False)}
# Old clients' spellings, as sd-webui-controlnet's `external_code.to_processing_unit` (`ext_compat_keys`) renames them.
# `mask_image` is the extension's (and SD Forge's) other name for `mask` (`ControlNetUnit.mask_alias`).
LEGACY_UNIT_KEYS = {"guessmode": "guess_mode", "guidance": "guidance_end", "lowvram": "low_vram", "input_image": "image",
                    "mask_image": "mask"}
# Every unit key read here. `low_vram` and `save_detected_map` are accepted and have no effect (logged);
# `guess_mode` (removed from the extension in 1.1.136) means "ControlNet is more important", as it did there.
UNIT_KEYS = frozenset({"enabled", "module", "model", "weight", "image", "mask", "resize_mode", "processor_res",
                       "threshold_a", "threshold_b", "guidance_start", "guidance_end", "pixel_perfect", "control_mode",
                       "hr_option", "guess_mode", "low_vram", "save_detected_map", "effective_region_mask"})
HR_OPTIONS = {"both": "Both", "low res only": "Low res only", "high res only": "High res only"}
# sd-webui-controlnet module names -> mixkit preprocessors (same algorithm, different name).
MODULE_ALIASES = {"none": "none", "canny": "canny", "invert": "invert", "invert (from white bg & black line)": "invert",
                  "threshold": "threshold", "blur_gaussian": "blur_gaussian", "tile_resample": "tile_resample",
                  "depth_midas": "depth_midas", "depth_anything": "depth_anything", "monochrome": "monochrome",
                  "lineart_standard": "lineart_standard",
                  "lineart_standard (from white bg & black line)": "lineart_standard", "scribble_xdog": "scribble_xdog",
                  "inpaint": "inpaint", "inpaint_global_harmonious": "inpaint", "inpaint_only": "inpaint_only",
                  "depth": "depth_midas"}  # the extension's preprocessor_aliases: "depth" is depth_midas


def available_modules() -> str:
    """The module names a unit or /controlnet/detect takes, the extension's other names for them included."""
    from pipelines.preprocessors import PREPROCESSORS

    names = PREPROCESSORS.names()
    others = [f"{alias!r} for {name}" for alias, name in MODULE_ALIASES.items() if alias not in names]
    return f"{', '.join(names)} (also {', '.join(others)})"


@dataclass
class UnitSpec:
    model_name: str
    image: Any
    weight: float
    guidance_start: float
    guidance_end: float
    guess_mode: bool
    resize_mode: str
    preprocessor: str
    threshold_a: float | None
    threshold_b: float | None
    pixel_perfect: bool = False
    processor_res: int | None = None  # None: preprocess at the generation size (the UI's units)
    hr_option: str = "Both"
    soft_injection: bool = False  # control mode "My prompt is more important"
    mask: Any = None  # the unit's mask (PIL), as sent; pipelines.controlnet.unit_mask says how it is used
    effective_region_mask: Any = None  # PIL; where the unit's control applies (pipelines.controlnet.region_mask)
    label: str = "ControlNet"  # how errors name the unit: "controlnet unit 0" (API), "ControlNet Unit 0" (UI)


def _number(label: str, value: Any, low: float, high: float) -> float:
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{label} must be a number in [{low}, {high}], got {value!r}.")
    return float(value)


def _weight(label: str, value: Any) -> float:
    from pipelines.controlnet.units import check_weight

    check_weight(label, value)
    return float(value)


def _processor_res(label: str, value: Any) -> int:
    """The unit's preprocessor resolution: sd-webui-controlnet reads a negative (its API default -1) or absent
    processor_res as its slider default, 512."""
    from pipelines.controlnet.resolution import DEFAULT_PROCESSOR_RES, PROCESSOR_RES_RANGE

    if default_if_negative(value) is None:
        return DEFAULT_PROCESSOR_RES
    low, high = PROCESSOR_RES_RANGE
    number = is_finite_number(value)
    if not number or value != int(value) or not low <= value <= high:
        raise ValueError(f"{label} processor_res must be an integer in [{low}, {high}] "
                         f"(or -1 for {DEFAULT_PROCESSOR_RES}), got {value!r}.")
    return int(value)


def default_if_negative(value: Any) -> Any:
    """None (the preprocessor's default) for a negative number: sd-webui-controlnet's `bound_check_params` resets
    any negative processor_res / threshold to its slider's default (-1 is its API's "default"); units and
    `/controlnet/detect` read the extension's numbers through here, so both apply the same rule."""
    negative = isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0
    return None if negative else value


def _threshold(label: str, value: Any) -> float | None:
    """A unit's threshold: None for the default, else a number the preprocessor checks against its slider."""
    value = default_if_negative(value)
    if value is None:
        return None
    if not is_finite_number(value):
        raise ValueError(f"{label} must be a number (-1 for the preprocessor's default), got {value!r}.")
    return float(value)


def _flag(label: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{label} must be true or false, got {value!r}.")
    return value


def controlnet_args(alwayson_scripts: dict) -> tuple[list, dict]:
    """(ControlNet args, the other scripts) from an A1111 `alwayson_scripts` object."""
    rest = dict(alwayson_scripts)
    for key in list(rest):
        if key.lower() == "controlnet":
            entry = rest.pop(key)
            args = entry.get("args") if isinstance(entry, dict) else None
            if not isinstance(args, list):
                raise ValueError("alwayson_scripts.controlnet must be {\"args\": [unit, ...]}.")
            return args, rest
    return [], rest


def _model_name(label: str, models, name: object) -> str:
    """The catalog name, refused now (a 422, not a failed job) if the ControlNet infotext could not hold it."""
    from pipelines.controlnet.units import check_infotext_name

    resolved = models.resolve(name)
    check_infotext_name(label, resolved)
    return resolved


def canonical_unit_keys(label: str, unit: dict) -> dict:
    """The unit with old clients' keys renamed as the extension renames them (`guidance` -> `guidance_end`, ...);
    ValueError for a key this server does not read (a misspelt `weigth` would otherwise be dropped silently) and for
    an old key given together with its new name."""
    renamed = {}
    for key, value in unit.items():
        new = LEGACY_UNIT_KEYS.get(key, key)
        if new not in UNIT_KEYS:
            valid = ", ".join(sorted(UNIT_KEYS | set(LEGACY_UNIT_KEYS)))
            raise ValueError(f"{label}: unknown key {key!r}; valid keys: {valid}. "
                             "Check the spelling, or remove the field (this server does not support it).")
        if new in renamed and new != "low_vram" and _given(value) and _given(renamed[new]):
            old = next(k for k, v in LEGACY_UNIT_KEYS.items() if v == new and k in unit)
            raise ValueError(f"{label}: {old!r} and {new!r} are the same field ({old!r} is its old name); send one.")
        if new not in renamed or _given(value):
            renamed[new] = value
    return renamed


def _given(value: Any) -> bool:
    """Clients fill unused fields with None or "" (webuiapi sends `"image": ""` next to an old `input_image`)."""
    return value is not None and value != ""


def _control_mode(label: str, unit: dict) -> tuple[bool, bool]:
    """(guess_mode, soft_injection) from `control_mode`, or from an old client's `guess_mode` flag."""
    control = unit.get("control_mode", 0)
    control_key = control.lower() if isinstance(control, str) else control
    if isinstance(control_key, bool) or control_key not in CONTROL_MODES:
        raise ValueError(f"{label}: control_mode {control!r} is not one of 'Balanced', 'My prompt is more important', "
                         "'ControlNet is more important' (or 0, 1, 2).")
    mode = CONTROL_MODES[control_key]
    guess = _flag(f"{label} guess_mode", unit.get("guess_mode", False))
    if guess and "control_mode" in unit and mode != (True, False):
        raise ValueError(f"{label}: guess_mode true means control_mode 'ControlNet is more important', but control_mode "
                         f"is {control!r}; send only control_mode.")
    return (True, False) if guess else mode


def _log_ignored_fields(label: str, unit: dict) -> None:
    for key in ("low_vram", "save_detected_map"):
        if unit.get(key):
            logger.info("%s: %s has no effect here (ControlNets stay on the generation device and detected maps "
                        "are not returned); ignored.", label, key)


def unit_picture(label: str, unit: dict) -> tuple[Any, Any, str]:
    """(image data, mask data, the mask's field name) from a unit's `image` in any shape the extension's
    `parse_image_formats` takes: a base64 string (its mask in `mask`), `{"image": ..., "mask": ...}`, `[image, mask]`,
    or a one-item list `[{"image": ..., "mask": ...}]`. Several inputs (a longer list of objects, which only the
    extension's IP-Adapter modules read) and a mask given twice are refused, naming the field."""
    image = unit.get("image")
    if isinstance(image, list):
        if image and all(isinstance(item, dict) for item in image):
            if len(image) > 1:
                raise ValueError(f"{label}: image is a list of {len(image)} inputs; a ControlNet unit takes one (only "
                                 "IP-Adapter modules such as ip-adapter_clip_sd15 take several). "
                                 "Send one {\"image\": ..., \"mask\": ...} object.")
            image, inner_key = image[0], "image[0].mask"
        elif len(image) == 2 and not any(isinstance(item, (dict, list)) for item in image):
            image, inner_key = {"image": image[0], "mask": image[1]}, "image[1]"
        else:
            raise ValueError(f"{label}: image must be a base64 image, {{\"image\": ..., \"mask\": ...}}, "
                             f"[image, mask] or a one-item list of such objects, got a list of {len(image)} items.")
    else:
        inner_key = "image.mask"
    if not isinstance(image, dict):
        return image, unit.get("mask"), "mask"
    unknown = sorted(set(image) - {"image", "mask"})
    if unknown:
        raise ValueError(f"{label}: the image object has unknown keys {unknown}; it takes 'image' and 'mask'.")
    if _given(image.get("mask")) and _given(unit.get("mask")):
        raise ValueError(f"{label}: got both 'mask' and {inner_key!r}; send the unit's mask once.")
    if _given(image.get("mask")):
        return image.get("image"), image.get("mask"), inner_key
    return image.get("image"), unit.get("mask"), "mask"


def _decoded(label: str, key: str, data: Any, *, max_pixels: int, max_bytes: int, what: str):
    """A base64 image field decoded, None when not given; ValueError naming the field otherwise."""
    if not _given(data):
        return None
    if not isinstance(data, str):
        raise ValueError(f"{label} {key} must be a base64-encoded image ({what}), got {type(data).__name__}.")
    return decode_base64_image(f"{label} {key}", data, max_pixels=max_pixels, max_bytes=max_bytes)


def enabled_units(units: list, name: str) -> Iterator[tuple[str, dict]]:
    """(label, unit with canonical keys) for each enabled unit of an sd-webui-controlnet `args` list, labelled
    f"{name} {index}" by its place in the list; ValueError for an item that is not an object or has a key this server
    does not read. The API and `mixkit --controlnet-json` read units through here, so both refuse the same units."""
    for index, unit in enumerate(units):
        label = f"{name} {index}"
        if not isinstance(unit, dict):
            raise ValueError(f"{label} must be an object, got {type(unit).__name__}.")
        unit = canonical_unit_keys(label, unit)
        if unit.get("enabled", True):
            yield label, unit


def parse_units(args: list, *, models, max_units: int, max_pixels: int, max_bytes: int) -> list[UnitSpec]:
    """UnitSpecs for the enabled units; raises ValueError naming the unit and the field."""
    from webui.api_ip_adapter import is_ip_adapter_module

    specs = []
    for label, unit in enabled_units(args, "controlnet unit"):
        if models is None:
            raise ValueError(f"{label}: this server has no ControlNet folder (start it with --controlnet-dir).")
        if is_ip_adapter_module(unit.get("module")):  # read by parse_ip_adapter_units
            continue
        image, mask, mask_key = unit_picture(label, unit)
        sizes = dict(max_pixels=max_pixels, max_bytes=max_bytes)
        mask = _decoded(label, mask_key, mask, what="white = masked", **sizes)
        region = _decoded(label, "effective_region_mask", unit.get("effective_region_mask"),
                          what="white = the unit's control applies there", **sizes)
        _log_ignored_fields(label, unit)
        if _given(image) and not isinstance(image, str):
            raise ValueError(f"{label} image must be a base64-encoded image, got {type(image).__name__}.")
        decoded = decode_base64_image(f"{label} image", image, **sizes) if image else None
        spec = unit_spec(label, unit, decoded, models, mask)
        spec.effective_region_mask = region
        specs.append(spec)
    if len(specs) > max_units:
        raise ValueError(f"Got {len(specs)} enabled ControlNet units; the limit is {max_units}.")
    return specs


def parse_ip_adapter_units(args: list, *, models, max_pixels: int, max_bytes: int) -> list:
    """`webui.api_ip_adapter.IPAdapterUnitSpec`s for the enabled units with an IP-Adapter module (the extension runs
    image prompts as units); raises ValueError naming the unit and the field."""
    from pipelines.ip_adapter_inputs import MAX_IP_ADAPTERS
    from webui.api_ip_adapter import ip_adapter_unit_spec, is_ip_adapter_module

    def decode(name: str, data: str):
        return decode_base64_image(name, data, max_pixels=max_pixels, max_bytes=max_bytes)

    specs = [ip_adapter_unit_spec(label, unit, models, decode=decode)
             for label, unit in enabled_units(args, "controlnet unit")
             if models is not None and is_ip_adapter_module(unit.get("module"))]
    if len(specs) > MAX_IP_ADAPTERS:
        raise ValueError(f"Got {len(specs)} enabled IP-Adapter units; at most {MAX_IP_ADAPTERS} run in one call.")
    return specs


def unit_spec(label: str, unit: dict, image, models, mask=None) -> UnitSpec:
    """One enabled unit (the extension's keys, already canonical) with its decoded image and mask, checked field by
    field; the API's units and the web UI's go through here, so both take the same values and defaults."""
    from pipelines.controlnet.unit_mask import check_unit_mask
    from pipelines.preprocessors import UNAVAILABLE_PREPROCESSORS

    module = str(unit.get("module", "none")).lower()
    if module in UNAVAILABLE_PREPROCESSORS:
        raise ValueError(f"{label}: module {unit.get('module')!r} is not available: {UNAVAILABLE_PREPROCESSORS[module]}.")
    if module not in MODULE_ALIASES:
        raise ValueError(f"{label}: unknown module {unit.get('module')!r}; available: {available_modules()}.")
    resize = unit.get("resize_mode", "Crop and Resize")
    if isinstance(resize, bool):  # an int subclass: true would silently be 1, "Crop and Resize"
        resize_mode = None
    else:
        resize_mode = RESIZE_CODES.get(resize) if isinstance(resize, int) else RESIZE_MODES.get(str(resize).lower())
    if resize_mode is None:
        raise ValueError(f"{label}: resize_mode {resize!r} is not one of {list(RESIZE_CODES.values())} (or 0, 1, 2).")
    guess_mode, soft_injection = _control_mode(label, unit)
    check_unit_mask(label, image, mask)
    thresholds = [_threshold(f"{label} {name}", unit.get(name)) for name in ("threshold_a", "threshold_b")]
    start = _number(f"{label} guidance_start", unit.get("guidance_start", 0.0), 0.0, 1.0)
    end = _number(f"{label} guidance_end", unit.get("guidance_end", 1.0), 0.0, 1.0)
    if start > end:  # the pipeline's check would only fail the job, after the request was accepted
        raise ValueError(f"{label}: guidance_start {unit['guidance_start']} is after guidance_end "
                         f"{unit['guidance_end']}; the unit would never act. Lower guidance_start or raise guidance_end.")
    return UnitSpec(
        model_name=_model_name(label, models, unit.get("model")), image=image,
        weight=_weight(f"{label} weight", unit.get("weight", 1.0)),
        guidance_start=start, guidance_end=end,
        guess_mode=guess_mode, soft_injection=soft_injection, resize_mode=resize_mode,
        preprocessor=MODULE_ALIASES[module],
        threshold_a=thresholds[0], threshold_b=thresholds[1],
        pixel_perfect=_flag(f"{label} pixel_perfect", unit.get("pixel_perfect", False)),
        processor_res=_processor_res(label, unit.get("processor_res")), hr_option=hr_option_of(label, unit), mask=mask,
        label=label)


def hr_option_of(label: str, unit: dict) -> str:
    """sd-webui-controlnet's `hr_option` (which hires-fix passes the unit guides), in its spelling."""
    value = unit.get("hr_option", "Both")
    if not isinstance(value, str) or value.lower() not in HR_OPTIONS:
        raise ValueError(f"{label}: hr_option {value!r} is not one of {sorted(HR_OPTIONS.values())}.")
    return HR_OPTIONS[value.lower()]


def ui_unit_spec(models, fields: dict) -> UnitSpec:
    """A UnitSpec from one web-UI unit's widget values (`webui.ui.controlnet_units.UNIT_FIELDS`), through the API's
    own `unit_spec`, so the same unit gives the same image from the UI and from a request."""
    if models is None:
        raise ValueError("This server has no ControlNet folder (start it with --controlnet-dir).")
    unit = {"module": fields["preprocessor"], "model": fields["model"], "weight": fields["weight"],
            "guidance_start": fields["start"], "guidance_end": fields["end"], "resize_mode": fields["resize_mode"],
            "control_mode": fields["control_mode"], "pixel_perfect": fields["pixel_perfect"],
            "processor_res": _whole(fields["processor_res"]), "threshold_a": fields["threshold_a"],
            "threshold_b": fields["threshold_b"]}
    spec = unit_spec("ControlNet", unit, fields["image"], models, fields.get("mask"))
    spec.effective_region_mask = fields.get("effective_region_mask")
    return spec


def _whole(value: Any) -> Any:
    """A slider's float as the int a field wants (512.0 -> 512); anything else is left for the field's check."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def build_units(specs: list[UnitSpec], models, base_unet) -> list:
    """ControlNetUnits with loaded models (runs in the worker: loading may take a while)."""
    from pipelines.controlnet import ControlNetUnit

    return [ControlNetUnit(model=models.load(spec.model_name, base_unet), image=spec.image, weight=spec.weight,
                           guidance_start=spec.guidance_start, guidance_end=spec.guidance_end, guess_mode=spec.guess_mode,
                           soft_injection=spec.soft_injection,
                           resize_mode=spec.resize_mode, preprocessor=spec.preprocessor, threshold_a=spec.threshold_a,
                           threshold_b=spec.threshold_b, model_name=spec.model_name, pixel_perfect=spec.pixel_perfect,
                           processor_res=spec.processor_res, mask=spec.mask,
                           effective_region_mask=spec.effective_region_mask)
            for spec in specs]
