"""`mixkit img2img --mask M --soft-inpainting [--si-schedule-bias X ...]`: A1111's Soft inpainting accordion as flags.

One `--si-*` flag per slider, named after A1111's label ("Schedule bias" -> --si-schedule-bias), with its range
(`pipelines.soft_inpainting.SOFT_INPAINTING_FIELDS`). The flags need --soft-inpainting, which needs --mask (an
inpaint flag: `webui.cli.img2img.MASK_ONLY_FLAGS`); `--infotext` fills them from A1111's keys.
"""

from __future__ import annotations

import argparse

from pipelines.infotext_values import as_flag, as_number
from pipelines.soft_inpainting import ENABLED_INFOTEXT_KEY, SOFT_INPAINTING_FIELDS, SoftInpainting


def _dest(label: str) -> str:
    return "si_" + label.lower().replace(" ", "_")


# argparse destination -> (SoftInpainting field, flag, label, low, high)
SI_FLAGS = {_dest(label): (field, "--" + _dest(label).replace("_", "-"), label, low, high)
            for field, _, label, low, high, _ in SOFT_INPAINTING_FIELDS}
# argparse destination -> (infotext key, conversion), for `--infotext` (webui.cli.img2img_infotext)
SOFT_INPAINTING_INFOTEXT_KEYS = {"soft_inpainting": (ENABLED_INFOTEXT_KEY, as_flag),
                                 **{_dest(label): (key, as_number) for _, key, label, *_ in SOFT_INPAINTING_FIELDS}}


def add_soft_inpainting_flags(group) -> None:
    defaults = SoftInpainting()
    group.add_argument("--soft-inpainting", action="store_true", default=None,
                       help="A1111's Soft inpainting: the blurred mask used as an opacity for the per-step blend, and "
                            "a paste-back mask from how much each area changed (a large --mask-blur is recommended)")
    for dest, (field, flag, label, low, high) in SI_FLAGS.items():
        group.add_argument(flag, dest=dest, type=float, default=None, metavar="X",
                           help=f"with --soft-inpainting: {label}, {low:g}-{high:g} "
                                f"(default {getattr(defaults, field):g})")


def soft_inpainting_from_args(args: argparse.Namespace) -> SoftInpainting | None:
    """The run's SoftInpainting, None without --soft-inpainting; raises ValueError naming the flag out of range, or
    the --si-* flags given without --soft-inpainting."""
    given = {dest: getattr(args, dest) for dest in SI_FLAGS if getattr(args, dest, None) is not None}
    if not getattr(args, "soft_inpainting", None):
        if given:
            flags = ", ".join(SI_FLAGS[dest][1] for dest in given)
            raise ValueError(f"{flags}: Soft inpainting settings without --soft-inpainting; add --soft-inpainting "
                             f"or leave out {flags}")
        return None
    values = {}
    for dest, value in given.items():
        field, flag, label, low, high = SI_FLAGS[dest]
        if not low <= value <= high:
            raise ValueError(f"{flag} ({label}) must be in [{low:g}, {high:g}], got {value:g}")
        values[field] = value
    return SoftInpainting(**values)
