"""Extras' face restoration (A1111's postprocessing_gfpgan / postprocessing_codeformer scripts) after the upscale.

A1111 runs its Extras steps by their order: upscale (and its crop), then GFPGAN, then CodeFormer. Each restorer runs
only at a visibility above 0 and its result is blended over the image by that visibility (`Image.blend`); CodeFormer
runs at fidelity `codeformer_weight`. The postprocessing text gains "GFPGAN visibility", "CodeFormer visibility" and
"CodeFormer weight", rounded to 3 places as A1111 writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.registry import Registry
from pipelines.face_restoration import (FACE_RESTORERS, check_face_restoration, check_face_restoration_weight,
                                        restore_faces)


@dataclass(frozen=True)
class ExtrasFaceRestoration:
    """The Extras face settings as A1111's API names them (all 0: off)."""

    gfpgan_visibility: float = 0.0
    codeformer_visibility: float = 0.0
    codeformer_weight: float = 0.0

    @property
    def active(self) -> bool:
        return self.gfpgan_visibility > 0 or self.codeformer_visibility > 0


def check_extras_face_restoration(settings: ExtrasFaceRestoration, registry: Registry = FACE_RESTORERS
                                  ) -> ExtrasFaceRestoration:
    """The settings with floats checked in [0, 1] and each restorer they turn on found; ValueError naming the field."""
    checked = ExtrasFaceRestoration(*(check_face_restoration_weight(getattr(settings, name), name)
                                      for name in ("gfpgan_visibility", "codeformer_visibility", "codeformer_weight")))
    for name, visibility in (("GFPGAN", checked.gfpgan_visibility), ("CodeFormer", checked.codeformer_visibility)):
        if visibility > 0:
            try:
                check_face_restoration(name, checked.codeformer_weight, registry=registry)
            except ValueError as error:
                raise ValueError(f"{name.lower()}_visibility={visibility}: {error}") from None
    return checked


def extras_restore_faces(image, settings: ExtrasFaceRestoration, *, unload: bool = False,
                         registry: Registry = FACE_RESTORERS):
    """`image` after A1111's Extras GFPGAN then CodeFormer steps (each blended by its visibility; skipped at 0)."""
    from PIL import Image

    for name, visibility in (("GFPGAN", settings.gfpgan_visibility), ("CodeFormer", settings.codeformer_visibility)):
        if visibility <= 0:
            continue
        source = image.convert("RGB")
        restored = restore_faces(source, name, settings.codeformer_weight, unload=unload, registry=registry)
        image = restored if visibility >= 1.0 else Image.blend(source, restored, visibility)
    return image


def extras_face_restoration_values(settings: ExtrasFaceRestoration) -> dict[str, str]:
    """The postprocessing text's face keys, in A1111's order and rounding ({} when off)."""
    values = {}
    if settings.gfpgan_visibility > 0:
        values["GFPGAN visibility"] = str(round(float(settings.gfpgan_visibility), 3))
    if settings.codeformer_visibility > 0:
        values["CodeFormer visibility"] = str(round(float(settings.codeformer_visibility), 3))
        values["CodeFormer weight"] = str(round(float(settings.codeformer_weight), 3))
    return values
