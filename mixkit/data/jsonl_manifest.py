"""Scan a JSONL manifest: one `{"image": "path", "text": "caption"}` object per line.

Relative image paths are resolved against the manifest's folder, so a dataset folder can be
moved as a whole. `caption` is accepted as an alias of `text` (both spellings are common), and
an optional `repeats` integer plays the role of kohya's folder prefix, and an optional `mask` path names
the image's loss mask for masked training (`loss_masks`; default: a `<stem>-masklabel.png` beside it).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mixkit.data.image_probe import probe_image
from mixkit.data.loss_masks import mask_file_beside
from mixkit.data.records import ImageRecord, ScanReport

logger = logging.getLogger(__name__)

TEXT_KEYS = ("text", "caption")


def manifest_entry(line: str, where: str, example: str) -> dict:
    """One manifest line as a JSON object with an 'image' path string (every manifest's common part, image-caption or
    VQA); the error names `where` ("<manifest>, line <n>") and shows a line like `example`."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} is not valid JSON ({error.msg}); each line must be one JSON object.") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("image"), str):
        raise ValueError(f"{where} needs an 'image' key with a path string, like {example}.")
    return entry


def _parse_line(line: str, number: int, manifest: Path) -> tuple[str, str, int, str | None]:
    where = f"{manifest}, line {number}"
    entry = manifest_entry(line, where, '{"image": "a.png", "text": "a cat"}')
    text = next((entry[key] for key in TEXT_KEYS if key in entry), None)
    if not isinstance(text, str):
        raise ValueError(f"{where} needs a 'text' (or 'caption') string for image {entry['image']!r}.")
    repeats = entry.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"{where}: 'repeats' must be an integer >= 1, got {repeats!r}.")
    mask = entry.get("mask")
    if mask is not None and not isinstance(mask, str):
        raise ValueError(f"{where}: 'mask' must be a path string (the image's loss mask), got {mask!r}.")
    return entry["image"], text, repeats, mask


def scan_jsonl_manifest(manifest: str | Path) -> ScanReport:
    """Every usable image listed in `manifest`; missing or corrupt images are skipped and reported."""
    manifest = Path(manifest).expanduser()
    if not manifest.is_file():
        raise FileNotFoundError(f"JSONL manifest {str(manifest)!r} does not exist; pass a .jsonl file.")
    report = ScanReport()
    concept = manifest.stem
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        image, text, repeats, mask = _parse_line(line, number, manifest)
        path = Path(image) if Path(image).is_absolute() else manifest.parent / image
        if mask is not None:
            mask_path = Path(mask) if Path(mask).is_absolute() else manifest.parent / mask
            if not mask_path.is_file():
                raise ValueError(f"{manifest}, line {number}: the mask {str(mask_path)!r} of {image!r} does not exist; "
                                 "fix the path or drop the 'mask' key.")
        else:
            mask_path = mask_file_beside(path)
        size = probe_image(path) if path.is_file() else f"file not found (listed on line {number})"
        if isinstance(size, str):
            report.skipped.append((path, size))
            logger.warning("Skipping training image %s: %s", path, size)
            continue
        report.records.append(ImageRecord(path, text, repeats, concept, size[0], size[1], mask=mask_path))
    return report
