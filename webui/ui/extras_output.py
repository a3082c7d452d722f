"""The Extras tab's result file: a PNG with the source's text chunks plus the `postprocessing` chunk.

A1111's `run_postprocessing` (modules/postprocessing.py) keeps the source image's PNG info, adds
`postprocessing` ("Postprocess upscale by: 2.0, Postprocess upscaler: Lanczos"), saves the result
when saving is on and shows that text under the result. `/sdapi/v1/extra-single-image` writes the
same chunks (`webui.api_extras`), so an image upscaled in the UI or through the API is the same file.
"""

from __future__ import annotations

import os
from pathlib import Path

POSTPROCESSING_KEY = "postprocessing"


def extras_chunks(source, postprocessing: str) -> dict[str, str]:
    """The result's text chunks: the source's (its infotext under `parameters`, wherever it was stored), then
    `postprocessing`, the text naming the upscale (`webui.api_extras.request_postprocessing_text`)."""
    from pipelines.infotext_read import infotext_from_image

    chunks = {key: str(value) for key, value in source.info.items() if isinstance(key, str) and isinstance(value, str)}
    infotext = infotext_from_image(source)
    if infotext:
        chunks["parameters"] = infotext
    chunks[POSTPROCESSING_KEY] = postprocessing
    return chunks


def next_extras_path(folder: str | os.PathLike, suffix: str = "") -> Path:
    """The next free counter name in `folder`, without a seed (an upscale has none): `00007.png`, as A1111's
    extras names its files (`short_filename`, `no_prompt`); the counter is shared with the generated images.
    `suffix` is a training step's picture tag (`00008-1.png`, `00009-focal-crop-debug.png`, A1111's `suffix`)."""
    from pipelines.png import next_image_path

    numbered = next_image_path(folder, 0)  # `00007-0.png`: the counter is what is wanted
    return numbered.with_name(numbered.name.split("-", 1)[0] + suffix + ".png")


def save_extras_png_numbered(image, folder: str | os.PathLike, chunks: dict[str, str], *, writing=None,
                             suffix: str = "") -> Path:
    """`save_extras_png` under the next free counter name of `folder` (`next_extras_path`), never over a file another
    writer (another browser tab's Extras, another `mixkit extras`) saved under that name meanwhile."""
    for _ in range(100):
        try:
            return save_extras_png(image, next_extras_path(folder, suffix), chunks, replace=False, writing=writing)
        except FileExistsError:
            continue
    raise FileExistsError(f"Could not find a free file name in {str(folder)!r}: 100 counter names were taken while "
                          "saving; is another program writing there in a loop?")


def save_extras_png(image, path: str | os.PathLike, chunks: dict[str, str], *, replace: bool = True,
                    writing=None) -> Path:
    """Write `image` as PNG at `path` holding every chunk (UTF-8 `iTXt` where Latin-1 cannot hold it), atomically;
    a file already at `path` is replaced, or with `replace=False` kept and FileExistsError raised.

    `writing` (`pipelines.png.InfotextWriting`; None: chunks only), as A1111's Extras save: `pnginfo` off writes no
    chunk at all, `txt` writes the `postprocessing` text to `<stem>.txt` beside the PNG."""
    from PIL.PngImagePlugin import PngInfo

    from pipelines.png import PNG_ONLY, write_png_file

    path, writing = Path(path), writing or PNG_ONLY
    info = PngInfo()
    for key, value in chunks.items():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            info.add_itxt(key, value)
        else:
            info.add_text(key, value)
    text = chunks.get(POSTPROCESSING_KEY) if writing.txt else None
    return write_png_file(image, path, info if writing.pnginfo else None, replace=replace, text=text)
