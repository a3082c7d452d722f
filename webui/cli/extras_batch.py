"""`mixkit extras`' work on files: every source checked before the first write, the output names, one upscale saved.

Split from webui.cli.extras (the flags and the request) because this part is about files: reading each source as
the API reads an upload (`mixkit.io.images.load_image`), naming the results as A1111's Extras names them, and
writing each PNG atomically with the source's text chunks (`webui.ui.extras_output`). With training-data steps
(`pipelines.extras_training`) one source gives several files, each named with A1111's suffix (`cat.png`, `cat-1.png`,
`cat-focal-crop-debug.png`; one image: `00007.png`, `00008-1.png`), and a caption `.txt` beside each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Source:
    """One source image, checked: its file, its size (upright), the factor A1111 upscales it by, A1111's target size
    for the training steps, and the file suffixes those steps will give its pictures ("" alone without them)."""

    file: Path
    width: int
    height: int
    factor: float
    target: tuple[int, int] | None = None
    suffixes: tuple[str, ...] = ("",)


@dataclass(frozen=True)
class TrainingRun:
    """The training-data steps of a run and what they use (None / off: the upscale alone)."""

    steps: Any = None  # pipelines.extras_training.TrainingSteps
    captioner: Any = None  # BLIP
    deepbooru: Any = None
    face_finder: Any = None
    existing_caption: str = "Ignore"


def checked_sources(files: list[Path], body, max_pixels: int, steps=None) -> list[Source]:
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
        checked.append(_with_training_plan(Source(file, image.width, image.height, factor), body, steps))
    return checked


def _with_training_plan(source: Source, body, steps) -> Source:
    """`source` with A1111's target size and the suffixes its pictures will get (the size after the upscale and its
    crop decides how many split crops there are)."""
    if steps is None or not steps.active:
        return source
    from pipelines.extras_training import picture_suffixes, target_size
    from webui.api_extras import SCALE_TO, size_after_upscale

    scale_to = (body.upscaling_resize_w, body.upscaling_resize_h) if body.resize_mode == SCALE_TO else None
    target = target_size(source.width, source.height, scale_to=scale_to, scale_by=body.upscaling_resize)
    size = size_after_upscale(body, source.width, source.height, source.factor)
    return Source(source.file, source.width, source.height, source.factor, target,
                  tuple(picture_suffixes(*size, steps, target)))


def output_paths(sources: list[Source], batch: bool, output: str) -> tuple[list[Path | None], Path]:
    """Where each source's first result goes (the others add their suffix to its stem): `-o NAME.png` for a single
    image, else in the -o folder, named by the next counter (None: chosen when it is written, `00007.png`) for a
    single image and by its source's name for a batch (A1111's `use_original_name_batch`). The folder is proven
    writable; a batch whose names (with every suffix) collide, or that would overwrite one of its sources, is
    refused. Returns the paths and the folder."""
    from webui.cli.generate import ensure_writable_folder, output_target

    files = [source.file for source in sources]
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
    originals = {file.resolve() for file in files}
    for source, path in zip(sources, paths):
        for written in (suffixed(path, suffix) for suffix in source.suffixes):
            if written in seen:
                raise ValueError(f"{seen[written]} and {source.file} would both be written as {written}; upscale them "
                                 "into separate folders")
            if written.resolve() in originals:
                whose = "its source" if written.resolve() == source.file.resolve() else "another source"
                raise ValueError(f"{written} would overwrite {whose}; choose another output folder with -o")
            seen[written] = source.file
    return paths, folder


def suffixed(path: Path, suffix: str) -> Path:
    return path.with_name(f"{path.stem}{suffix}{path.suffix}")


def upscale_and_save(source: Source, body, path: Path | None, folder: str | os.PathLike, writing=None,
                     training: TrainingRun | None = None) -> tuple[list[Path], str, str]:
    """Upscale one checked source as the API does, run the training steps, and save every picture (at `path` and
    its suffixed names, or the next counter names in `folder`) with the source's text chunks and the postprocessing
    text where `writing` (`pipelines.png.InfotextWriting`) says, then each caption `.txt`; returns (files written,
    "WxH" before, "WxH" of the first after)."""
    from PIL import Image

    from pipelines.extras_training import TrainingImage, file_suffixes, run_training_steps, write_caption
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
    training = training or TrainingRun()
    if training.steps is not None and training.steps.active:
        pictures = run_training_steps(result, training.steps, source.target, captioner=training.captioner,
                                      deepbooru=training.deepbooru, face_finder=training.face_finder)
    else:
        pictures = [TrainingImage(result)]
    text = request_postprocessing_text(body) if upscales(body) or faces.active else ""
    with Image.open(source.file) as opened:  # the file's own chunks and EXIF, which the upright RGB copy lacks
        chunks = extras_chunks(opened, text)
    written = []
    for picture, suffix in zip(pictures, file_suffixes(pictures)):
        if path is not None:
            file = save_extras_png(picture.image, suffixed(path, suffix), chunks, writing=writing)
        else:
            file = save_extras_png_numbered(picture.image, folder, chunks, writing=writing, suffix=suffix)
        write_caption(file, picture.caption, training.existing_caption)  # after the save's own .txt, as A1111
        written.append(file)
    return written, f"{image.width}x{image.height}", f"{pictures[0].image.width}x{pictures[0].image.height}"
