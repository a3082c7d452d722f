"""sd-webui-controlnet's own API routes (`/controlnet/...`), which its clients call besides `/sdapi/v1/*`.

`/controlnet/detect` runs a preprocessor alone (the extension's "Run preprocessor"), through
`pipelines.controlnet.detect_control_map`, which checks the values; this layer only translates the extension's
request (its module names, -1 for "default") and its answers: 422 "Module not available" / "No image selected" as
it words them, with the reason appended.
"""

from __future__ import annotations

from fastapi import APIRouter, Body, HTTPException
from fastapi.concurrency import run_in_threadpool

from webui.api_controlnet import MODULE_ALIASES, available_modules, default_if_negative
from webui.base64_images import decode_base64_image, encode_png_base64

# The extension's `external_code.get_api_version()` at the unit keys this server reads (`webui.api_controlnet`).
CONTROLNET_API_VERSION = 2
# The extension's UI names (its `preprocessor_aliases`) where they differ from the module names, listed by
# `/controlnet/module_list?alias_names=true` as the extension lists them; units take either name.
EXTENSION_LABELS = {"inpaint": "inpaint_global_harmonious", "invert": "invert (from white bg & black line)",
                    "lineart_standard": "lineart_standard (from white bg & black line)"}
# The extension's control types (its UI's radio row) that this server's preprocessors serve: each lists the
# preprocessors of that kind, its default, and the words a ControlNet model's file name is matched on.
CONTROL_TYPES = {
    "Canny": (("none", "canny", "invert"), "canny", ("canny",)),
    "Depth": (("none", "depth_midas", "depth_anything"), "depth_midas", ("depth",)),
    "Inpaint": (("none", "inpaint", "inpaint_only"), "inpaint_only", ("inpaint",)),
    "Lineart": (("none", "lineart_standard", "invert"), "lineart_standard", ("lineart",)),
    "Scribble/Sketch": (("none", "scribble_xdog", "invert", "threshold"), "invert", ("scribble", "sketch")),
    "Tile/Blur": (("none", "blur_gaussian", "tile_resample"), "tile_resample", ("tile", "blur")),
    "IP-Adapter": (("ip-adapter-auto", "ip-adapter_clip_h", "ip-adapter_clip_g", "ip-adapter_clip_sd15",
                    "ip-adapter_clip_sdxl", "ip-adapter_clip_sdxl_plus_vith"), "ip-adapter-auto",
                   ("ip-adapter", "ip_adapter")),
}


def control_types(model_names: list[str], preprocessor_names: list[str]) -> dict:
    """The extension's `/controlnet/control_types` answer for these models ("None" first, as it lists them)."""
    from webui.api_ip_adapter import IP_ADAPTER_MODULES

    models = ["None", *model_names]
    modules = [*preprocessor_names, *IP_ADAPTER_MODULES]
    answer = {"All": {"module_list": modules, "model_list": models, "default_option": "none",
                      "default_model": "None"}}
    for kind, (kind_modules, default, words) in CONTROL_TYPES.items():
        matching = ["None"] + [name for name in model_names if any(word in name.lower() for word in words)]
        answer[kind] = {"module_list": [m for m in kind_modules if m in modules], "model_list": matching,
                        "default_option": default, "default_model": matching[1] if len(matching) > 1 else "None"}
    return answer


def module_detail(preprocessor) -> dict:
    """The extension's `module_detail` entry (its `get_modules_detail`): `model_free` is whether the module runs
    without a ControlNet model (only its reference/revision modules, none of which exist here: it does not mean "no
    preprocessor weights"); `sliders` is positional, (resolution, threshold_a, threshold_b) with the extension's
    labels, None in the resolution slot of a module without one, and empty for a module without sliders."""
    from pipelines.controlnet.resolution import DEFAULT_PROCESSOR_RES, PROCESSOR_RES_RANGE, uses_resolution

    low, high = PROCESSOR_RES_RANGE
    resolution = {"name": "Preprocessor Resolution", "value": DEFAULT_PROCESSOR_RES, "min": low, "max": high}
    thresholds = [slider.api_json() for slider in (preprocessor.threshold_a, preprocessor.threshold_b) if slider]
    if uses_resolution(preprocessor.name):
        sliders = [resolution, *thresholds]
    else:
        sliders = [None, *thresholds] if thresholds else []
    return {"model_free": False, "sliders": sliders}


def add_controlnet_routes(router: APIRouter, state) -> None:
    limits, request_limits = state.limits, state.config.request_limits

    @router.get("/controlnet/version")
    async def controlnet_version():
        return {"version": CONTROLNET_API_VERSION}

    @router.get("/controlnet/settings")
    async def controlnet_settings():
        from pipelines.controlnet import ControlNetLimits

        return {"control_net_unit_count": ControlNetLimits().max_units}

    @router.get("/controlnet/model_list")
    async def controlnet_model_list():
        return {"model_list": state.controlnets.names() if state.controlnets is not None else []}

    @router.get("/controlnet/module_list")
    async def controlnet_module_list(alias_names: bool = False):
        from pipelines.preprocessors import PREPROCESSORS

        from webui.api_ip_adapter import IP_ADAPTER_MODULES

        shown = {name: EXTENSION_LABELS.get(name, name) if alias_names else name for name in PREPROCESSORS.names()}
        # IP-Adapter modules after the preprocessors: they make image prompts, not control maps (no sliders)
        return {"module_list": [*shown.values(), *IP_ADAPTER_MODULES],
                "module_detail": {**{shown[name]: module_detail(entry) for name, entry in PREPROCESSORS.items()},
                                  **{name: {"model_free": False, "sliders": []} for name in IP_ADAPTER_MODULES}}}

    @router.get("/controlnet/control_types")
    async def controlnet_control_types():
        from pipelines.preprocessors import PREPROCESSORS

        models = state.controlnets.names() if state.controlnets is not None else []
        return {"control_types": control_types(models, PREPROCESSORS.names())}

    @router.post("/controlnet/detect")
    async def controlnet_detect(controlnet_module: str = Body("none"), controlnet_input_images: list[str] = Body([]),
                                controlnet_processor_res: float = Body(-1), controlnet_threshold_a: float = Body(-1),
                                controlnet_threshold_b: float = Body(-1), controlnet_masks: list[str] = Body([]),
                                low_vram: bool = Body(False), controlnet_images: list[str] = Body([])):
        from pipelines.controlnet.detect import detect_control_map
        from pipelines.controlnet.resolution import DEFAULT_PROCESSOR_RES
        from pipelines.preprocessors import PREPROCESSORS, UNAVAILABLE_PREPROCESSORS, PreprocessorWeightsMissing

        module = MODULE_ALIASES.get(str(controlnet_module).lower())
        if str(controlnet_module).lower() in UNAVAILABLE_PREPROCESSORS:
            raise HTTPException(status_code=422, detail=f"Module not available: {controlnet_module!r}: "
                                                        f"{UNAVAILABLE_PREPROCESSORS[str(controlnet_module).lower()]}.")
        if module is None:
            raise HTTPException(status_code=422, detail=f"Module not available: {controlnet_module!r}; available: "
                                                        f"{available_modules()}.")
        if controlnet_images and controlnet_input_images:
            raise HTTPException(status_code=422, detail="Send the images in controlnet_input_images only (got "
                                                        "controlnet_images too, an old spelling).")
        # webuiapi's controlnet_detect sends `controlnet_images`, which the extension ignores and then answers "No
        # image selected"; taking it as the images is what that client's user means.
        controlnet_input_images = controlnet_input_images or controlnet_images
        if not controlnet_input_images:
            raise HTTPException(status_code=422, detail="No image selected: send controlnet_input_images, a list of "
                                                        "base64 images.")
        if controlnet_masks and PREPROCESSORS.get(module).takes_mask:
            raise HTTPException(status_code=422, detail=f"Preprocessor {module!r} returns the picture as given here; its "
                                                        "mask is used when a unit generates (the unit's 'mask'): send no "
                                                        "controlnet_masks.")
        if controlnet_masks:
            raise HTTPException(status_code=422, detail=f"Preprocessor {module!r} does not take a mask (the extension "
                                                        "ignores it with a warning); send no controlnet_masks.")
        if len(controlnet_input_images) > limits.max_batch_size:
            raise HTTPException(status_code=422, detail=f"Got {len(controlnet_input_images)} images; this server "
                                                        f"detects at most {limits.max_batch_size} per request.")
        resolution = default_if_negative(controlnet_processor_res)
        resolution = DEFAULT_PROCESSOR_RES if resolution is None else resolution
        if isinstance(resolution, float) and resolution.is_integer():
            resolution = int(resolution)

        def detect() -> list[str]:
            maps = []
            for index, data in enumerate(controlnet_input_images):
                image = decode_base64_image(f"controlnet_input_images[{index}]", data,
                                            max_pixels=request_limits.image_pixel_cap(limits),
                                            max_bytes=request_limits.max_image_bytes)
                maps.append(encode_png_base64(detect_control_map(
                    image, module, processor_res=resolution, threshold_a=default_if_negative(controlnet_threshold_a),
                    threshold_b=default_if_negative(controlnet_threshold_b))))
            return maps

        try:
            images = await run_in_threadpool(detect)
        except PreprocessorWeightsMissing as error:
            raise HTTPException(status_code=503, detail=str(error)) from None
        except (ValueError, TypeError, KeyError) as error:
            message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
            raise HTTPException(status_code=422, detail=message) from None
        return {"info": "Success", "images": images}
