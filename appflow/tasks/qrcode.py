"""QR-code art: encode a text as a QR code, let a ControlNet paint a picture over it, check it scans.

Generation uses `segno` (pure Python) with the highest error correction (H, 30% of the code may
be damaged), the usual choice for artistic QR codes. The check decodes the result with OpenCV's
`QRCodeDetector`; an unscannable image is returned with `scannable=False` rather than raised,
since the user may still want it (lower `controlnet_weight` trades scannability for art).
"""

from __future__ import annotations

from typing import Any

from appflow.option_specs import OptionSpec
from appflow.progress import images_made, pipeline_hooks
from appflow.task import Port, Task, check_int_option, check_number_option, register_task
from appflow.tasks.diffusion import (
    GENERATION_OPTIONS, SD15, GenerationTask, check_lora_folder, generation_kwargs, generation_record,
    one_call_at_a_time, sd_pipeline, specs_for,
)

QR_ERROR_LEVELS = ("l", "m", "q", "h")


def qr_code_image(text: str, size: int, error: str = "h", border: int = 4):
    """A black-on-white QR code for `text` on a size x size canvas.

    Modules are scaled by a whole number of pixels and the code is centred on white: fractional
    scaling makes module edges uneven, which decoders (and the ControlNet) handle badly.
    """
    try:
        import segno
    except ImportError:
        raise ImportError("QR codes need the 'segno' package: pip install segno.") from None
    import numpy as np
    from PIL import Image

    try:
        code = segno.make(text, error=error, micro=False)
    except segno.DataOverflowError:
        raise ValueError(f"A text of {len(text)} characters ({len(text.encode('utf-8'))} UTF-8 bytes) does not fit in a "
                         f"QR code with error correction {error!r} (the largest, version 40, holds 2953 bytes at 'l', "
                         f"2331 at 'm', 1663 at 'q' and 1273 at 'h'); shorten it (a short URL) or pass a lower "
                         "qr_error.") from None
    dark = np.array([list(row) for row in code.matrix], dtype=bool)
    modules = dark.shape[0] + 2 * border
    if size < modules:
        raise ValueError(f"A QR code for {len(text)} characters needs at least {modules} pixels; width is {size}.")
    scale = size // modules
    pixels = np.pad(np.where(dark, 0, 255).astype(np.uint8), border, constant_values=255)  # quiet zone
    code_image = Image.fromarray(pixels).resize((modules * scale, modules * scale), Image.Resampling.NEAREST)
    canvas = Image.new("L", (size, size), 255)
    offset = (size - modules * scale) // 2
    canvas.paste(code_image, (offset, offset))
    return canvas.convert("RGB")


def decode_qr(image) -> str:
    """The text encoded in the image's QR code, or '' when none can be read."""
    try:
        import cv2
    except ImportError:
        raise ImportError("Checking QR codes needs OpenCV: pip install opencv-python-headless.") from None
    import numpy as np

    text, _, _ = cv2.QRCodeDetector().detectAndDecode(np.asarray(image.convert("RGB"))[:, :, ::-1].copy())
    return text or ""


@register_task
class QrCodeTask(Task):
    """Text or URL -> a QR code image (the ControlNet's control image)."""

    name = "qr_code"
    description = "text -> QR code image (segno)"
    inputs = {"text": Port("text")}
    outputs = {"qr_image": "image"}
    main_output = "qr_image"
    options = {"width": 512, "qr_error": "h"}
    # the smallest QR code (version 1: 21 modules + a 4-module quiet zone each side) at one pixel per module
    option_specs = {"width": OptionSpec("int", 29, 8192, 1, label="QR code and image width"),
                    "qr_error": OptionSpec("choice", choices=QR_ERROR_LEVELS, label="QR error correction")}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        if options["qr_error"] not in QR_ERROR_LEVELS:
            raise ValueError(f"qr_error must be one of {QR_ERROR_LEVELS} (segno's error-correction levels, h = 30%), "
                             f"got {options['qr_error']!r}.")
        width = cls.option_specs["width"]
        check_int_option("width", options["width"], width.low, width.high)

    @classmethod
    def check_inputs(cls, inputs: dict[str, Any]) -> None:
        if inputs.get("text") is not None and not inputs["text"]:
            raise ValueError("Task 'qr_code': text is empty; pass the text or URL to encode.")

    def run(self, models, options, *, text: str) -> dict[str, Any]:
        self.check_inputs({"text": text})
        try:
            return {"qr_image": qr_code_image(text, options["width"], options["qr_error"])}
        except ValueError as error:
            raise ValueError(f"Task 'qr_code': {error}") from None


@register_task
class ControlNetTextToImageTask(GenerationTask):
    """Text-to-image guided by one ControlNet and its control image; `infotexts` and `seeds` as text_to_image's (a
    scannable QR image drawn with seed -1 is made again from its seed)."""

    name = "controlnet_text_to_image"
    description = "SD txt2img + ControlNet"
    inputs = {"prompt": Port("text"), "control_image": Port("image")}
    outputs = {"image": "image", "infotexts": "texts", "seeds": "ints"}
    main_output = "image"
    models = {"generator": "stable-diffusion", "controlnet": "controlnet"}
    default_models = {"generator": SD15, "controlnet": "monster-labs/control_v1p_sd15_qrcode_monster"}
    options = {**GENERATION_OPTIONS, "width": 512, "controlnet_weight": 1.35, "guidance_start": 0.0, "guidance_end": 1.0}
    option_specs = specs_for(options, {
        "controlnet_weight": OptionSpec("float", 0.0, 2.0, 0.05, label="ControlNet weight"),
        "guidance_start": OptionSpec("float", 0.0, 1.0, 0.01, label="ControlNet starts at"),
        "guidance_end": OptionSpec("float", 0.0, 1.0, 0.01, label="ControlNet ends at")})

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """The generation options, and the ControlNet unit's ranges as `ControlNetUnit` checks them once loaded."""
        super().check_options(options)
        specs = cls.option_specs
        weight = specs["controlnet_weight"]
        check_number_option("controlnet_weight", options["controlnet_weight"], weight.low, weight.high)
        start, end = (check_number_option(name, options[name], specs[name].low, specs[name].high)
                      for name in ("guidance_start", "guidance_end"))
        if start > end:
            raise ValueError(f"guidance_start {start} is after guidance_end {end}; the ControlNet acts between them.")

    def run(self, models, options, *, prompt: str, control_image) -> dict[str, Any]:
        from pipelines.controlnet import ControlNetTextToImage, ControlNetUnit

        check_lora_folder(models, prompt, self.name)
        pipe = sd_pipeline(models, ControlNetTextToImage)
        unit = ControlNetUnit(model=models.get("controlnet"), image=control_image, weight=options["controlnet_weight"],
                              guidance_start=options["guidance_start"], guidance_end=options["guidance_end"],
                              resize_mode="just resize")
        size = options["width"]
        with one_call_at_a_time(pipe.model):
            result = pipe(prompt=prompt, width=size, height=size, controlnets=[unit], **generation_kwargs(options),
                          **pipeline_hooks())
        return {"image": images_made(result)[0], **generation_record(result)}


@register_task
class QrCheckTask(Task):
    """Decode the QR code in an image and compare it with the text it should carry."""

    name = "qr_check"
    description = "decode a QR code (OpenCV) and compare"
    inputs = {"image": Port("image"), "text": Port("text")}
    outputs = {"scannable": "flag", "decoded": "text"}
    main_output = "scannable"

    def run(self, models, options, *, image, text: str) -> dict[str, Any]:
        decoded = decode_qr(image)
        return {"scannable": decoded == text, "decoded": decoded}
