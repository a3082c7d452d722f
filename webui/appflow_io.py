"""AppFlow over HTTP and in the UI: JSON inputs -> typed app inputs, app outputs -> JSON.

Which inputs an app takes comes from its declared ports (`appflow.describe_app`), so the API and
the UI offer exactly what the chain validates. Images arrive as base64 only (never a path or
URL); models are the operator's (`--appflow-config`), never chosen by a request.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from webui.base64_images import base64_payload, decode_base64_image, encode_png_base64

HTTP_PORT_TYPES = ("image", "images", "text", "texts", "flag", "json")
# A video's frames are denoised and decoded as one batch: held to this many times the server's batch size limit
FRAMES_PER_BATCH_LIMIT = 4
HTTP_MAX_NEW_TOKENS = 256  # a captioner's or LLM's reply per request on a server


def decode_app_inputs(description: dict, inputs: Any, *, max_pixels: int, max_bytes: int, max_chars: int,
                      max_items: int = 8) -> dict:
    """Typed inputs for `Appflow(**inputs)`; raises ValueError naming the input and what it expects. A list of images
    holds at most `max_items` (the server's batch size limit): each is capped in pixels and bytes, the list too."""
    from appflow.task import rename_aliases

    if not isinstance(inputs, dict):
        raise ValueError(f"inputs must be a JSON object, got {type(inputs).__name__}.")
    aliases = description.get("input_aliases", {})
    # the Python API's other spellings (PaddleMIX's blip2_prompt), and the same error for one input given twice
    try:
        inputs = rename_aliases(inputs, aliases, f"App {description['name']!r}", "input")
    except TypeError as error:
        raise ValueError(str(error)) from None
    declared = {name: kind.rstrip("?") for name, kind in description["inputs"].items()}
    batched = set(description.get("batch_inputs", ()))
    masks = set(description.get("mask_inputs", ()))
    unknown = sorted(set(inputs) - set(declared))
    if unknown:
        spellings = "".join(f", {alias!r} for {name!r}" for alias, name in aliases.items())
        raise ValueError(f"App {description['name']!r} has no input(s) {unknown}; its inputs: {description['inputs']}"
                         f"{spellings}.")
    decoded = {}
    for name, value in inputs.items():
        kind, where = declared[name], f"input {name!r} ({declared[name]})"
        if value is None:
            continue
        if isinstance(value, list) and kind in ("image", "text"):
            _check_count(where, value, max_items)
            decoded[name] = _decode_batch(name, kind, value, where, batched, max_pixels=max_pixels,
                                          max_bytes=max_bytes, max_chars=max_chars)
        elif kind == "image" and name in masks:
            decoded[name] = decode_base64_mask(where, value, max_pixels=max_pixels, max_bytes=max_bytes)
        elif kind == "image":
            decoded[name] = decode_base64_image(where, value, max_pixels=max_pixels, max_bytes=max_bytes)
        elif kind == "images":
            if not isinstance(value, list) or not value:
                raise ValueError(f"{where} must be a non-empty list of base64 images.")
            _check_count(where, value, max_items)
            decoded[name] = [decode_base64_image(f"{where}[{i}]", v, max_pixels=max_pixels, max_bytes=max_bytes)
                             for i, v in enumerate(value)]
        elif kind in ("text", "texts"):
            items = [value] if kind == "text" else value
            if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
                raise ValueError(f"{where} must be {'a string' if kind == 'text' else 'a list of strings'}.")
            if any(len(t) > max_chars or "\x00" in t for t in items):
                raise ValueError(f"{where} is longer than {max_chars} characters or contains NUL.")
            decoded[name] = value
        elif kind == "flag":
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false, got {value!r}.")
            decoded[name] = value
        elif kind == "json":
            if not isinstance(value, dict):
                raise ValueError(f"{where} must be a JSON object.")
            decoded[name] = value
        else:
            raise ValueError(f"{where} cannot be sent over HTTP; accepted input types: {', '.join(HTTP_PORT_TYPES)}.")
    return decoded


def decode_base64_mask(where: str, value: Any, *, max_pixels: int, max_bytes: int):
    """A mask input as sent, transparency kept, for the app to read as A1111 reads masks (strokes in the alpha
    channel of a transparent mask). `decode_base64_image` checks it first (base64, bytes, pixel cap, a readable
    image) but flattens it on white, which turned a transparent canvas mask into "repaint everything"."""
    from PIL import Image

    decode_base64_image(where, value, max_pixels=max_pixels, max_bytes=max_bytes)
    image = Image.open(io.BytesIO(base64_payload(where, value, max_bytes=max_bytes)))
    image.load()
    return image


def _check_count(where: str, value: list, max_items: int) -> None:
    if len(value) > max_items:
        raise ValueError(f"{where} holds {len(value)} items; this server takes at most {max_items} per request "
                         "(its batch size limit); send them in several requests.")


def _decode_batch(name: str, kind: str, value: list, where: str, batched: set, *, max_pixels: int, max_bytes: int,
                  max_chars: int) -> list:
    """A list given to a one-value input: decoded item by item where the app batches that input, else refused."""
    if name not in batched:
        takes = ", ".join(sorted(batched)) or "none of its inputs"
        raise ValueError(f"{where} takes one {'base64 image' if kind == 'image' else 'string'}, not a list (this app "
                         f"takes lists for: {takes}).")
    if not value:
        raise ValueError(f"{where} is an empty list; pass one value or a list of at least one.")
    if kind == "image":
        return [decode_base64_image(f"{where}[{i}]", v, max_pixels=max_pixels, max_bytes=max_bytes)
                for i, v in enumerate(value)]
    if not all(isinstance(t, str) for t in value):
        raise ValueError(f"{where} must be a string or a list of strings.")
    if any(len(t) > max_chars or "\x00" in t for t in value):
        raise ValueError(f"{where} is longer than {max_chars} characters or contains NUL.")
    return value


# Options whose value names a folder on the server: the operator's choice (--interrogate-categories-dir), never a
# request's. A client's categories_dir made the interrogator read the *.txt files of any folder and answer with their
# lines (CLIP ranks each against the image): a way to read text files off the server.
SERVER_PATH_OPTIONS = {"categories_dir": "the server's interrogate categories come from --interrogate-categories-dir"}


def check_network_options(options: dict, lora_names: set[str] | None) -> None:
    """Refuse options that would have the server open a file a network client chose: a folder option, or a `loras`
    entry that is not a name from the server's LoRA folder. The Python API takes paths there (a local caller's files);
    over HTTP a LoRA is named as GET /sdapi/v1/loras lists it, as prompt tags are (`webui.prompt_guard`)."""
    from mixkit.lora import parse_lora_cli_spec

    for key, why in SERVER_PATH_OPTIONS.items():
        if options.get(key) is not None:
            raise ValueError(f"option {key} names a folder on the server, which a request may not choose ({why}); "
                             f"leave it out.")
    loras = options.get("loras")
    if loras is None:
        return
    if not isinstance(loras, list) or not all(isinstance(spec, str) for spec in loras):
        raise ValueError(f"option loras must be a list of 'NAME[:STRENGTH[:UNET_STRENGTH]]' strings, got {loras!r}.")
    for spec in loras:
        name = str(parse_lora_cli_spec(spec).source)
        if lora_names is None:
            raise ValueError(f"option loras: {spec!r} needs a LoRA folder, and this server has none (start it with "
                             "--lora-dir).")
        if name not in lora_names:
            shown = ", ".join(sorted(lora_names)[:10]) or "(none)"
            raise ValueError(f"option loras: no LoRA named {name!r} in the server's LoRA folder; available: {shown}. "
                             "Name a LoRA from GET /sdapi/v1/loras, never a file path.")


def check_app_options(options: Any, limits, lora_names: set[str] | None = None) -> dict:
    """Per-call options from a network client: the generation ones held to the server's limits (the app's own checks
    use defaults), none naming a server file (`check_network_options`; `lora_names`: the LoRA folder's names)."""
    from appflow.task import rename_aliases
    from appflow.tasks.diffusion import GENERATION_ALIASES
    from appflow.tasks.vision_language import CAPTION_OPTION_ALIASES
    from pipelines.params import SEED_MAX, check_size
    from webui.appflow_audio import check_audio_length_option

    if not isinstance(options, dict):
        raise ValueError(f"options must be a JSON object, got {type(options).__name__}.")
    given = options
    # PaddleMIX's `generate_kwargs` dict holds captioning options too: its values are held to the same limits
    # (the app spreads it into options and refuses a key given both ways).
    spread = options.get("generate_kwargs")
    if isinstance(spread, dict):
        options = {**{key: value for key, value in options.items() if key != "generate_kwargs"}, **spread}
    # LAVIS' and diffusers' spellings (max_length, num_captions, num_inference_steps, num_images_per_prompt) are held
    # to the same limits as the options they stand for
    aliases = {**CAPTION_OPTION_ALIASES, **GENERATION_ALIASES, "num_images_per_prompt": "batch_size",
               "num_waveforms_per_prompt": "batch_size"}
    try:
        options = rename_aliases(options, aliases, "options")
    except TypeError as error:
        raise ValueError(str(error)) from None
    check_network_options(options, lora_names)
    ranges = {"steps": (1, limits.max_steps), "batch_size": (1, limits.max_batch_size),
              "batch_count": (1, limits.max_batch_count), "seed": (-1, SEED_MAX), "subseed": (-1, SEED_MAX)}
    for name, (low, high) in ranges.items():
        value = options.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise ValueError(f"option {name} must be an integer in [{low}, {high}], got {value!r}.")
    if options.get("width") is not None or options.get("height") is not None:
        check_size(options.get("width", 512), options.get("height", 512), 8, limits)
    resize = options.get("seed_resize_from_w"), options.get("seed_resize_from_h")
    if all(isinstance(side, int) and not isinstance(side, bool) and side > 0 for side in resize):
        try:  # the noise is drawn at that size: it is an image size as far as the server's limits go
            check_size(*resize, 8, limits)
        except ValueError as error:
            raise ValueError(f"options seed_resize_from_w/h {resize[0]}x{resize[1]}: {error}") from None
    # Captioning's beams x returned sequences are rows of one generate call, as a batch is for an image model.
    beams, sequences = options.get("num_beams") or 1, options.get("num_return_sequences") or 1
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (beams, sequences)) and \
            beams * sequences > limits.max_batch_size * 4:
        raise ValueError(f"options num_beams x num_return_sequences = {beams * sequences} is above this server's "
                         f"{limits.max_batch_size * 4} (4 x its batch size limit); ask for fewer beams or sequences.")
    # A video's frames are denoised and decoded as one batch: held to 4 x the batch size limit (64 by default)
    frames, most = options.get("num_frames"), limits.max_batch_size * FRAMES_PER_BATCH_LIMIT
    if frames is not None and (isinstance(frames, bool) or not isinstance(frames, int) or not 1 <= frames <= most):
        raise ValueError(f"option num_frames must be an integer in [1, {most}] on this server "
                         f"({FRAMES_PER_BATCH_LIMIT} x its batch size limit), got {frames!r}.")
    check_audio_length_option(options)  # webui.appflow_audio: a clip's length held to the server's limit
    fps = options.get("fps")
    if isinstance(fps, (int, float)) and not isinstance(fps, bool):  # a video app's; its range is the app's check
        from webui.appflow_video import check_server_video_fps

        check_server_video_fps(fps)
    new_tokens = options.get("max_new_tokens")
    if isinstance(new_tokens, int) and not isinstance(new_tokens, bool) and new_tokens > HTTP_MAX_NEW_TOKENS:
        raise ValueError(f"option max_new_tokens must be at most {HTTP_MAX_NEW_TOKENS} on this server, got "
                         f"{new_tokens}.")
    return dict(given)


def _mask_png(mask) -> str:
    from PIL import Image

    array = (mask.detach().cpu().numpy().astype("uint8") * 255)
    buffer = io.BytesIO()
    Image.fromarray(array, mode="L").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def encode_app_output(value: Any) -> Any:
    """JSON for one output: images as base64 PNG, bool masks as base64 PNG masks, tensors as lists, a video as its
    base64 .mp4 (.gif without an MPEG-4 encoder) with fps and frame count (`webui.appflow_video`), an audio clip as
    its base64 16-bit .wav with its sample rate (`webui.appflow_audio`)."""
    from PIL import Image

    if isinstance(value, Image.Image):
        return encode_png_base64(value)
    if isinstance(value, (list, tuple)):
        return [encode_app_output(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_app_output(v) for k, v in value.items()}
    if type(value).__module__.startswith("torch"):
        import torch

        if value.dtype == torch.bool and value.ndim == 3:
            return [_mask_png(m) for m in value]
        return value.detach().cpu().tolist()
    if type(value).__module__.startswith("numpy"):
        return value.tolist()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    from appflow.video import Video

    if isinstance(value, Video):
        from webui.appflow_video import encode_video_output

        return encode_video_output(value)
    from appflow.audio import Audio

    if isinstance(value, Audio):
        from webui.appflow_audio import encode_audio_output

        return encode_audio_output(value)
    return repr(value)


def encode_app_outputs(outputs: dict) -> dict:
    """JSON for all of an app's outputs: each `encode_app_output`, but an audio clip and the bare waveforms that are
    its samples (`waveform`, `result`) as one base64 .wav each (`webui.appflow_audio`), not lists of floats."""
    from webui.appflow_audio import encode_audio_outputs

    audio = encode_audio_outputs(outputs)
    return {key: audio[key] if key in audio else encode_app_output(value) for key, value in outputs.items()}


def output_images(outputs: dict) -> list:
    """Every PIL image among an app's outputs (for the UI gallery), in output order, without duplicates."""
    from PIL import Image

    found: list = []
    for value in outputs.values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, Image.Image) and not any(item is seen for seen in found):
                found.append(item)
    return found
