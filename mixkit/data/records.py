"""What a scan of a dataset produces: one record per usable image, plus what was skipped and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mixkit.data.caption_augmentation import CaptionAugmentation
from mixkit.errors import MixkitError


class EmptyDatasetError(MixkitError, ValueError):
    """A dataset has no usable image."""


@dataclass(frozen=True)
class ImageRecord:
    """One training image: where it is, its caption, how often an epoch repeats it, its pixel size."""

    path: Path
    caption: str
    repeats: int = 1
    concept: str = ""
    width: int = 0
    height: int = 0
    loss_weight: float = 1.0  # DreamBooth class (prior-preservation) images get the prior loss weight
    prior: bool = False  # a class (prior-preservation) image, not one of the concept being trained
    mask: Path | None = None  # a loss mask file for masked training (`loss_masks`), if the image has one
    # A kohya dataset-config subset's own caption augmentation and flip_aug (None: the run's settings apply).
    captions: CaptionAugmentation | None = None
    flip_aug: bool | None = None


@dataclass
class ScanReport:
    """Images kept, and images skipped with the reason (corrupt file, missing caption...)."""

    records: list[ImageRecord] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def check_not_all_unreadable(self, source: str | Path, shown: int = 5) -> None:
        """Raise EmptyDatasetError naming the files (the first `shown`) and their decode errors when every image of
        `source` was unreadable: the per-file warnings go to the log, which an API caller may never see."""
        if self.records or not self.skipped:
            return
        listed = "; ".join(f"{path} ({reason})" for path, reason in self.skipped[:shown])
        more = f"; and {len(self.skipped) - shown} more" if len(self.skipped) > shown else ""
        raise EmptyDatasetError(f"{source} has no usable images: all {len(self.skipped)} image(s) are unreadable: "
                                f"{listed}{more}. Replace or re-save those files (or remove them).")

    def tag_frequency(self) -> dict[str, dict[str, int]]:
        """kohya's `ss_tag_frequency`: per image folder (its name, as kohya keys it: "10_sks dog"), how often each
        comma tag occurs in its images' captions, counted as kohya's `set_tag_frequency` counts: tags stripped and
        lower-cased, every occurrence (a tag twice in one caption counts twice), each image once whatever its
        repeats; class-image folders included."""
        result: dict[str, dict[str, int]] = {}
        for record in self.records:
            counts = result.setdefault(record.path.parent.name, {})
            for tag in (t.strip().lower() for t in record.caption.split(",")):
                if tag:
                    counts[tag] = counts.get(tag, 0) + 1
        return result

    def dataset_dirs(self, prior: bool = False) -> dict[str, dict[str, int]]:
        """kohya's `ss_dataset_dirs` (with `prior`: `ss_reg_dataset_dirs`, the class images'): per image folder (by
        name, as kohya), its repeat count and image count."""
        result: dict[str, dict[str, int]] = {}
        for record in self.records:
            if record.prior != prior:
                continue
            entry = result.setdefault(record.path.parent.name, {"n_repeats": record.repeats, "img_count": 0})
            entry["img_count"] += 1
        return result
