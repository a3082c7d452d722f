"""Gallery files for results that were not saved: PNGs carrying their infotext, as A1111's gallery images do.

Handing Gradio bare PIL images made it write `image.png` without the `parameters` chunk, so an
image downloaded from the gallery (or dropped into PNG Info) had lost its generation parameters.
"""

from __future__ import annotations

import uuid
from pathlib import Path


def gallery_pngs(images: list, seeds: list, infotexts: list, cache_dir: str | Path) -> list[str]:
    """Write each image as `<n>-<seed>.png` with its infotext under Gradio's cache folder; returns the paths.

    Gradio serves files from its cache folder without copying them elsewhere first; each result
    gets a fresh subfolder so concurrent jobs never share a file name."""
    from pipelines.png import save_png

    folder = Path(cache_dir) / "mixkit-gallery" / uuid.uuid4().hex
    return [str(save_png(image, folder / f"{number:05d}-{seed}.png", infotext or None))
            for number, (image, seed, infotext) in enumerate(zip(images, seeds, infotexts), start=1)]
