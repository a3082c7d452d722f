"""`/sdapi/v1/extra-single-image` and `/extra-batch-images`: A1111's Extras upscale, its sizes and its metadata.

The size is A1111's `scripts/postprocessing_upscale.py`: resize_mode 0 scales by `upscaling_resize`; resize_mode 1
scales by max(upscaling_resize_w / width, upscaling_resize_h / height), so the image covers W x H, and with
`upscaling_crop` pastes it centred on a black W x H canvas. Either way the upscale itself ends at A1111's
`Upscaler.upscale` size, each side floored to a multiple of 8 (`pipelines.upscale.target_size`).

The result PNG carries the source image's text chunks (its `parameters` too when the source held them in
EXIF, as a JPEG does) plus a `postprocessing` chunk naming what was done ("Postprocess upscale by: 2.0,
Postprocess upscaler: Lanczos"), so PNG Info on an upscaled image still shows how it was generated.
`html_info` is that postprocessing text as HTML.

`gfpgan_visibility` / `codeformer_visibility` / `codeformer_weight` are A1111's face restoration steps, run after the
upscale and its crop (`pipelines.extras_faces`), with "GFPGAN visibility", "CodeFormer visibility" and "CodeFormer
weight" added to the postprocessing text; a restorer whose folder the server was not started with is a 422.
"""

from __future__ import annotations

import base64
import html
import io

from pipelines.infotext import quote_value


def source_text_chunks(data: str, *, max_pixels: int, max_bytes: int) -> dict[str, str]:
    """The text chunks of the base64 source image, with its infotext under `parameters` wherever it was stored."""
    from webui.base64_images import decode_base64_png_info

    read = decode_base64_png_info("image", data, max_pixels=max_pixels, max_bytes=max_bytes)
    chunks = dict(read["items"])
    if read["infotext"]:
        chunks["parameters"] = read["infotext"]
    return chunks


SCALE_BY, SCALE_TO = 0, 1  # A1111's Extras resize modes ("Scale by", "Scale to")
REFUSED_OPTIONS = ("extras_upscaler_2_visibility",)


def check_extras_request(body) -> None:
    """Refuse, before any work, what this server's Extras does not do; raises ValueError naming the field."""
    unsupported = [f"{name}={getattr(body, name)}" for name in REFUSED_OPTIONS if getattr(body, name)]
    if body.upscaler_2 not in ("None", "", None):
        unsupported.append(f"upscaler_2={body.upscaler_2!r}")
    if unsupported:
        raise ValueError(f"Not supported by this server's Extras: {', '.join(unsupported)} (no second upscaler); leave "
                         "them at 0 / 'None'.")
    extras_faces(body)  # visibilities and weight in [0, 1], the restorers they turn on registered
    if body.resize_mode not in (SCALE_BY, SCALE_TO):
        raise ValueError(f"resize_mode must be {SCALE_BY} (scale by upscaling_resize) or {SCALE_TO} (scale to "
                         f"upscaling_resize_w x upscaling_resize_h), got {body.resize_mode}.")
    if body.resize_mode == SCALE_TO and (body.upscaling_resize_w < 1 or body.upscaling_resize_h < 1):
        raise ValueError(f"upscaling_resize_w and upscaling_resize_h must be positive for resize_mode 1, got "
                         f"{body.upscaling_resize_w}x{body.upscaling_resize_h}.")


def extras_faces(body):
    """The request's GFPGAN / CodeFormer settings, checked (`pipelines.extras_faces`); ValueError naming the field."""
    from pipelines.extras_faces import ExtrasFaceRestoration, check_extras_face_restoration

    return check_extras_face_restoration(ExtrasFaceRestoration(
        body.gfpgan_visibility, body.codeformer_visibility, body.codeformer_weight))


def upscale_factor(body, width: int, height: int) -> float:
    """The factor A1111 upscales a width x height image by: upscaling_resize, or, scaling to W x H, the factor
    that makes the image cover W x H (A1111's `max(upscale_to_width / width, upscale_to_height / height)`)."""
    if body.resize_mode != SCALE_TO:
        return body.upscaling_resize
    from pipelines.upscale import UpscaleLimits

    factor = max(body.upscaling_resize_w / width, body.upscaling_resize_h / height)
    if factor > UpscaleLimits().max_scale:
        raise ValueError(f"Scaling a {width}x{height} image to {body.upscaling_resize_w}x{body.upscaling_resize_h} "
                         f"needs an upscale by {factor:.3g}, over the limit of {UpscaleLimits().max_scale}; "
                         "choose a smaller upscaling_resize_w / upscaling_resize_h.")
    return factor


def crops_to_size(body) -> bool:
    return body.resize_mode == SCALE_TO and body.upscaling_crop


def crop_to(image, width: int, height: int):
    """A1111's "Crop to fit": the upscaled image pasted centred on a black width x height canvas (cut where it
    overhangs, black where A1111's multiple-of-8 flooring left it smaller)."""
    from PIL import Image

    canvas = Image.new("RGB", (width, height))
    canvas.paste(image, (width // 2 - image.width // 2, height // 2 - image.height // 2))
    return canvas


def postprocessing_text(upscale_by: float, upscaler: str) -> str:
    """A1111's postprocessing infotext for an upscale by a factor (the factor written as the float it is)."""
    # str(float): A1111's request model holds the factor as a float, so 2 is written "2.0".
    return _joined({"Postprocess upscale by": str(float(upscale_by)), "Postprocess upscaler": upscaler})


def request_postprocessing_text(body) -> str:
    """A1111's postprocessing infotext for an Extras request, its keys in A1111's order ("Scale to": the size, then
    the crop when "Crop to fit" is on, then the upscaler; then the face restorers' keys, which alone make the text of
    a request that does not upscale)."""
    from pipelines.extras_faces import ExtrasFaceRestoration, extras_face_restoration_values

    faces = extras_face_restoration_values(ExtrasFaceRestoration(
        body.gfpgan_visibility, body.codeformer_visibility, body.codeformer_weight))
    if not upscales(body):
        return _joined(faces)
    if body.resize_mode != SCALE_TO:
        upscale = {"Postprocess upscale by": str(float(body.upscaling_resize)), "Postprocess upscaler": body.upscaler_1}
        return _joined({**upscale, **faces})
    size = f"{body.upscaling_resize_w}x{body.upscaling_resize_h}"
    values = {"Postprocess upscale to": size, **({"Postprocess crop to": size} if crops_to_size(body) else {})}
    return _joined({**values, "Postprocess upscaler": body.upscaler_1, **faces})


def _joined(values: dict[str, str]) -> str:
    return ", ".join(f"{key}: {quote_value(value)}" for key, value in values.items())


def extras_postprocess(body, faces, *, unload: bool = False):
    """What runs in the Extras job after the upscale: A1111's crop (its upscale step's end), then the face restorers;
    None when no face restorer is on (the crop is then done when the job ends, as before)."""
    if not faces.active:
        return None
    from pipelines.extras_faces import extras_restore_faces

    def after(image):
        if crops_to_size(body):
            image = crop_to(image, body.upscaling_resize_w, body.upscaling_resize_h)
        return extras_restore_faces(image, faces, unload=unload)

    return after


def upscales(body) -> bool:
    """A1111's "None" upscaler (webuiapi's default) upscales nothing: the image comes back as sent."""
    return body.upscaler_1 not in ("None", "", None)


def size_after_upscale(body, width: int, height: int, factor: float) -> tuple[int, int]:
    """The size a width x height source has when the training steps (focal crop, split) get it: as sent with the
    "None" upscaler, the "Scale to" size with "Crop to fit", else the upscale's size (floored to a multiple of 8).
    Known before the job, so the steps' resize budgets can be checked before anything is queued."""
    from pipelines.upscale import target_size

    if not upscales(body):
        return width, height
    if crops_to_size(body):
        return body.upscaling_resize_w, body.upscaling_resize_h
    return target_size(width, height, factor)


def plaintext_to_html(text: str) -> str:
    """Text as one HTML paragraph, lines joined by <br>, as A1111's `html_info`."""
    return "<p>" + "<br>\n".join(html.escape(line) for line in text.split("\n")) + "</p>"


def encode_png_with_chunks(image, chunks: dict[str, str]) -> str:
    """Base64 PNG of the image holding every given text chunk (UTF-8 where needed)."""
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for key, value in chunks.items():
        if value.isascii():
            info.add_text(key, value)
        else:
            info.add_itxt(key, value)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
