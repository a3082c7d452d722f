"""A1111's training-data Extras steps (its old "Preprocess images"), run after the upscale and face restoration.

A1111 1.6+ runs them as postprocessing scripts sharing `order = 4000`, so by name: Auto focal point crop, Caption,
Create flipped copies, Split oversized images. Each step runs on every picture made so far (except a focal-crop debug
image, which is only saved), and may add pictures (A1111's `PostprocessedImage.extra_images`): the debug image, the
flipped copies, the split crops. The target size is A1111's `pp.shared.target_width/height`, set by its upscale step:
the "Scale to" size, or the source's size times "Scale by" (`int(side * factor)`), whatever the upscaler.

Files: each picture of one source gets a suffix from its name tags (A1111's `get_suffix`): "" for the first, "-1",
"-2", ... for the next untagged ones, "-focal-crop-debug" for the debug image. A caption is written to a `.txt`
beside the picture's file, after the picture, so it replaces a `.txt` the save wrote, as A1111's; `existing_caption`
is A1111's "Action for existing captions". As A1111's Caption step, it is the Deepbooru tags then the BLIP caption
(whichever are chosen, in that order whatever the order chosen), joined with ", ".

Different from A1111 on purpose: copies made after the caption step (flips, split crops) keep their source's caption
(A1111's `create_copy` drops it, so its flipped copies get no `.txt`, which a training set needs).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pipelines.focal_crop import FaceFinder, FocalWeights, focal_crop
from pipelines.split_oversized import (DEFAULT_OVERLAP_RATIO, DEFAULT_SPLIT_THRESHOLD, check_split_settings,
                                       split_oversized)

FLIP_CHOICES = ("Horizontal", "Vertical", "Both")  # A1111's "Create flipped copies" choices, in its order
CAPTION_CHOICES = ("Deepbooru", "BLIP")  # A1111's "Caption" choices
EXISTING_CAPTION_ACTIONS = ("Ignore", "Keep", "Prepend", "Append")  # A1111's postprocessing_existing_caption_action
DEBUG_TAG = "focal-crop-debug"

Captioner = Callable[[object], str]  # PIL image -> caption


@dataclass(frozen=True)
class TrainingSteps:
    """Which training-data steps run and their settings (all off by default), as A1111's four accordions."""

    split: bool = False
    split_threshold: float = DEFAULT_SPLIT_THRESHOLD
    overlap_ratio: float = DEFAULT_OVERLAP_RATIO
    focal_crop: bool = False
    focal_weights: FocalWeights = FocalWeights()
    focal_debug: bool = False
    flips: tuple[str, ...] = ()
    captions: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.split or self.focal_crop or bool(self.flips) or bool(self.captions)

    @property
    def needs_target(self) -> bool:
        return self.split or self.focal_crop


def check_training_steps(steps: TrainingSteps) -> TrainingSteps:
    """The steps with every value checked; ValueError naming the setting and what is allowed."""
    check_split_settings(steps.split_threshold, steps.overlap_ratio)
    steps.focal_weights.checked()
    flips = tuple(steps.flips)
    for choice in flips:
        if choice not in FLIP_CHOICES:
            raise ValueError(f"Create flipped copies: {choice!r} is not one of {', '.join(FLIP_CHOICES)}.")
    captions = tuple(steps.captions)
    for choice in captions:
        if choice not in CAPTION_CHOICES:
            raise ValueError(f"Caption: {choice!r} is not one of {', '.join(CAPTION_CHOICES)}.")
    return replace(steps, flips=tuple(dict.fromkeys(flips)), captions=tuple(dict.fromkeys(captions)))


def target_size(width: int, height: int, *, scale_to: tuple[int, int] | None, scale_by: float) -> tuple[int, int]:
    """A1111's target size for a width x height source: the "Scale to" size, or each side times "Scale by"."""
    if scale_to is not None:
        return scale_to
    return int(width * scale_by), int(height * scale_by)


@dataclass
class TrainingImage:
    """One picture made from a source: its tags (the file suffix), its caption, whether later steps skip it."""

    image: object
    nametags: list[str] = field(default_factory=list)
    caption: str | None = None
    processed: bool = True

    def copy_with(self, image, *, nametags: tuple[str, ...] = (), processed: bool = True) -> "TrainingImage":
        return TrainingImage(image, [*self.nametags, *nametags], self.caption, processed)


def check_captioners(steps: TrainingSteps, captioner: Captioner | None, deepbooru: Captioner | None) -> None:
    """ValueError when a chosen caption has nothing to make it: BLIP needs `captioner`, Deepbooru `deepbooru`."""
    for choice, given, what in (("Deepbooru", deepbooru, "deepbooru=<function image -> tags> (the web UI passes its "
                                                          "DeepDanbooru tagger when started with "
                                                          "--deepdanbooru-models-path FOLDER)"),
                                ("BLIP", captioner, "captioner=<function image -> caption>")):
        if choice in steps.captions and given is None:
            raise ValueError(f"Caption: {choice} needs a {'tagger' if choice == 'Deepbooru' else 'captioner'} and "
                             f"none was given: pass {what}, or leave {choice} out.")


def run_training_steps(image, steps: TrainingSteps, target: tuple[int, int] | None, *,
                       captioner: Captioner | None = None, deepbooru: Captioner | None = None,
                       face_finder: FaceFinder | None = None) -> list[TrainingImage]:
    """Every picture the steps make from `image` (PIL, already upscaled and restored), the first being `image`'s own
    result; in A1111's step order. `target` is A1111's target size (needed by split and focal crop); `captioner`
    makes the BLIP caption, `deepbooru` the Deepbooru tags (each needed only when its caption is chosen)."""
    steps = check_training_steps(steps)
    if steps.needs_target and (target is None or target[0] < 1 or target[1] < 1):
        raise ValueError(f"Split oversized images and Auto focal point crop need a positive target size, got {target}.")
    check_captioners(steps, captioner, deepbooru)
    captioners = {"Deepbooru": deepbooru, "BLIP": captioner}
    pictures = [TrainingImage(image)]
    for step in (_focal_step, _caption_step, _flip_step, _split_step):
        made = []  # A1111's order: the pictures there were, then the new ones in the order they were made
        for picture in pictures:
            if picture.processed:
                made += step(picture, steps, target, captioners, face_finder)
        pictures += made
    return pictures


def _focal_step(picture, steps, target, captioners, face_finder):
    if not steps.focal_crop:
        return []
    result, *debug = focal_crop(picture.image, *target, steps.focal_weights, debug=steps.focal_debug,
                                face_finder=face_finder)
    picture.image = result
    return [picture.copy_with(extra, nametags=(DEBUG_TAG,), processed=False) for extra in debug]


def _caption_step(picture, steps, target, captioners, face_finder):
    if steps.captions:  # A1111's order: Deepbooru, then BLIP, whatever order they were chosen in
        texts = [picture.caption, *(captioners[choice](picture.image) for choice in CAPTION_CHOICES
                                    if choice in steps.captions)]
        picture.caption = ", ".join(text for text in texts if text)
    return []


def _flip_step(picture, steps, target, captioners, face_finder):
    from PIL import Image

    flips = {"Horizontal": (Image.Transpose.FLIP_LEFT_RIGHT,), "Vertical": (Image.Transpose.FLIP_TOP_BOTTOM,),
             "Both": (Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.FLIP_LEFT_RIGHT)}
    made = []
    for choice in FLIP_CHOICES:
        if choice in steps.flips:
            flipped = picture.image
            for transpose in flips[choice]:
                flipped = flipped.transpose(transpose)
            made.append(picture.copy_with(flipped))
    return made


def _split_step(picture, steps, target, captioners, face_finder):
    if not steps.split:
        return []
    first, *others = split_oversized(picture.image, *target, steps.split_threshold, steps.overlap_ratio)
    picture.image = first
    return [picture.copy_with(crop) for crop in others]


def file_suffixes(pictures: list[TrainingImage]) -> list[str]:
    """A1111's `get_suffix` for one source's pictures: the tags joined by "-", "-1", "-2", ... when taken.

    Unlike A1111's, the numbering does not stop at 99 (where A1111 hands the taken suffix out again, so the 101st
    crop of a long strip split with a large overlap overwrote the first picture's file)."""
    used: set[str] = set()
    suffixes = []
    for picture in pictures:
        suffix = "-".join(picture.nametags)
        suffix = f"-{suffix}" if suffix else ""
        if suffix in used:
            suffix = next(f"{suffix}-{n}" for n in itertools.count(1) if f"{suffix}-{n}" not in used)
        used.add(suffix)
        suffixes.append(suffix)
    return suffixes


def write_caption(image_path: str | os.PathLike, caption: str | None, existing_caption: str = "Ignore") -> Path | None:
    """Write `caption` to the `.txt` beside `image_path` as A1111 does ("Ignore" replaces a file there, "Keep" keeps
    it, "Prepend"/"Append" put the old caption before/after, space-separated); None when nothing is written."""
    from pipelines.png import written_temporary_file

    if existing_caption not in EXISTING_CAPTION_ACTIONS:
        raise ValueError(f"existing_caption must be one of {', '.join(EXISTING_CAPTION_ACTIONS)}, got "
                         f"{existing_caption!r}.")
    if not caption:
        return None
    path = Path(image_path).with_suffix(".txt")
    try:
        existing = path.read_text(encoding="utf8").strip()
    except FileNotFoundError:
        existing = ""
    if existing and existing_caption == "Prepend":
        caption = f"{existing} {caption}"
    elif existing and existing_caption == "Append":
        caption = f"{caption} {existing}"
    elif existing and existing_caption == "Keep":
        caption = existing
    caption = caption.strip()
    if not caption:
        return None
    os.replace(written_temporary_file(path.parent, path.stem, caption.encode("utf-8")), path)
    return path


def vlm_captioner(source: str = "mixkit-tiny-blip2", **generation) -> Captioner:
    """A captioner running a mixkit VLM (BLIP-2 family, as Interrogate CLIP's caption model), loaded now, so a bad
    model name fails before any file is written; `generation` defaults to Interrogate's caption settings (beams,
    min / max length)."""
    from mixkit.interrogate import InterrogateSettings
    from mixkit.models.vlm import load_vlm

    generation = generation or InterrogateSettings().caption_options()
    model = load_vlm(source)

    def caption(image) -> str:
        return str(model.caption([image.convert("RGB")], **generation)[0]).strip()

    return caption


def picture_suffixes(width: int, height: int, steps: TrainingSteps, target: tuple[int, int] | None) -> list[str]:
    """The file suffixes the steps will give a width x height picture (after the upscale), known before any work, so
    a batch's file names (and the steps' resize sizes: ValueError) can be checked before the first is written: one
    picture, times the split crops, times 1 + the flips, plus the debug image."""
    from pipelines.focal_crop import check_cover_size
    from pipelines.split_oversized import split_plan

    if steps.focal_crop:
        check_cover_size(width, height, *target)
        width, height = target
    plan = split_plan(width, height, *target, steps.split_threshold, steps.overlap_ratio) if steps.split else None
    count = (1 + len(steps.flips)) * (len(plan.boxes) if plan else 1)
    debug = ["-" + DEBUG_TAG] if steps.focal_crop and steps.focal_debug else []
    return ["", *debug, *(f"-{number}" for number in range(1, count))]
