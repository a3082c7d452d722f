"""`mixkit extras`' work on files: every source checked before the first write, the output names, one upscale saved.

Split from webui.cli.extras (the flags and the request) because this part is about files: reading each source as
the API reads an upload (`mixkit.io.images.load_image`), naming the results as A1111's Extras names them, and
writing each PNG atomically with the source's text chunks (`webui.ui.extras_output`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """One source image, checked: its file, its size (upright) and the factor A1111 upscales it by."""

    file: Path
    width: int
    height: int
    factor: float


def checked_sources(files: list[Path], body, max_pixels: int) -> list[Source]:
    """Read every file and check its upscale (upscaler name, factor, output size) as `/sdapi/v1/extra-*` checks one,
    before anything is written; the pixels are read again when each is upscaled, so a large folder is never held
    in memory at once. Errors name the file."""
    from pipelines.upscale import UPSCALERS, UpscaleLimits, check_upscale
    from webui.api_extras import upscale_factor, upscales
    from webui.cli.extras import in_flag_terms
    from webui.cli.img2img import read_init_image

    if upscales(body):
        UPSCALERS.get(body.upscaler_1)  # an unknown name lists the valid ones
    checked = []
    for file in files:
        try:
            image = read_init_image(str(file), max_pixels)
            factor = upscale_factor(body, image.width, image.height) if upscales(body) else 1.0
            if upscales(body):
                check_upscale(image.width, image.height, factor, UpscaleLimits(), body.upscaler_1)
        except ValueError as error:
            message = in_flag_terms(str(error))
            raise ValueError(message if str(file) in message else f"{file}: {message}") from None
        checked.append(Source(file, image.width, image.height, factor))
    return checked


def output_paths(files: list[Path], batch: bool, output: str) -> tuple[list[Path | None], Path]:
    """Where each result goes: `-o NAME.png` for a single image, else in the -o folder, named by the next counter
    (None: chosen when it is written, `00007.png`) for a single image and by its source's name for a batch (A1111's
    `use_original_name_batch`). The folder is proven writable; a batch whose names collide, or that would overwrite
    one of its sources, is refused. Returns the paths and the folder."""
    from webui.cli.generate import ensure_writable_folder, output_target

    target, is_file = output_target(output)
    if is_file and batch:
        raise ValueError(f"-o {output}: a batch of {len(files)} images needs an output folder; name a folder")
    if is_file:
        if target.suffix.lower() != ".png":
            raise ValueError(f"-o {output}: Extras writes PNG (it keeps the source's infotext); name a .png file")
        return [target], target.parent
    folder = ensure_writable_folder(target)
    if not batch:
        return [None], folder
    paths = [folder / f"{file.stem}.png" for file in files]
    seen: dict[Path, Path] = {}
    sources = {file.resolve() for file in files}
    for file, path in zip(files, paths):
        if path in seen:
            raise ValueError(f"{seen[path]} and {file} would both be written as {path}; upscale them into separate "
                             "folders")
        if path.resolve() in sources:
            raise ValueError(f"{path} would overwrite its source; choose another output folder with -o")
        seen[path] = file
    return paths, folder


def upscale_and_save(source: Source, body, path: Path | None, folder: str | os.PathLike,
                     writing=None) -> tuple[Path, str, str]:
    """Upscale one checked source as the API does, save it (at `path`, or the next counter name in `folder`) with the
    source's text chunks and the postprocessing text where `writing` (`pipelines.png.InfotextWriting`) says; returns
    (file written, "WxH" before, "WxH" after)."""
    from PIL import Image

    from pipelines.upscale import upscale_image
    from webui.api_extras import crop_to, crops_to_size, extras_faces, request_postprocessing_text, upscales
    from webui.cli.img2img import read_init_image
    from webui.ui.extras_output import extras_chunks, save_extras_png, save_extras_png_numbered

    image = read_init_image(str(source.file), source.width * source.height)
    faces = extras_faces(body)
    if upscales(body):
        result = upscale_image(image, source.factor, upscaler=body.upscaler_1)
        if crops_to_size(body):
            result = crop_to(result, body.upscaling_resize_w, body.upscaling_resize_h)
    else:  # A1111's "None" upscaler: the image as it was read (an empty postprocessing text without face restoration)
        result = image
    if faces.active:  # A1111's order: after the upscale and its crop, GFPGAN then CodeFormer
        from pipelines.extras_faces import extras_restore_faces

        result = extras_restore_faces(result, faces)
    text = request_postprocessing_text(body) if upscales(body) or faces.active else ""
    with Image.open(source.file) as opened:  # the file's own chunks and EXIF, which the upright RGB copy lacks
        chunks = extras_chunks(opened, text)
    if path is not None:
        written = save_extras_png(result, path, chunks, writing=writing)
    else:
        written = save_extras_png_numbered(result, folder, chunks, writing=writing)
    return written, f"{image.width}x{image.height}", f"{result.width}x{result.height}"
