"""The images a training run learns from: a dataset folder or manifest, plus DreamBooth class images, checked once.

Every trainer (LoRA, full fine-tune, textual inversion, BLIP-2) scans its dataset with these, so a
missing caption, an unreadable image or an unused loss mask is reported the same way whichever runs.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from mixkit.data import ScanReport, scan_jsonl_manifest, scan_kohya_folder
from mixkit.data.loss_masks import MASK_SUFFIX, check_loss_masks
from mixkit.training.dataset_config import is_dataset_config

logger = logging.getLogger(__name__)


def scan_path(path: Path, missing_captions: str, caption_extension: str = ".txt") -> ScanReport:
    """A dataset folder (kohya layout, captions in `<image stem><caption_extension>` files) or a .jsonl manifest."""
    if is_dataset_config(path):
        raise ValueError(f"{str(path)!r} is a kohya dataset config, which only `sd-lora`'s dataset setting reads (its "
                         "subsets train with their own settings); give this trainer a folder or a .jsonl manifest")
    if path.suffix.lower() == ".jsonl":
        report = scan_jsonl_manifest(path)
    else:
        report = scan_kohya_folder(path, missing_captions=missing_captions, caption_extension=caption_extension)
    report.check_not_all_unreadable(path)
    return report


def scan_dataset(config) -> ScanReport:
    """The training images, plus DreamBooth class images (weighted by `prior_loss_weight`) if configured.

    Prior preservation (Ruiz et al. 2023) trains on generic images of the class ("a dog") alongside
    the instance images ("a sks dog") so the model does not forget the class. The report lists every
    class image once with its folder's repeats (what the `ss_*` metadata describes, as kohya's does);
    the trainers then balance them against the training images with `balance_class_images` (kohya's
    rule: an epoch holds as many class samples as training samples, repeats included).
    """
    report = scan_path(Path(config.dataset), config.missing_captions, config.caption_extension)
    class_dataset = getattr(config, "class_dataset", None)
    if class_dataset:
        prior = scan_path(Path(class_dataset), config.missing_captions, config.caption_extension)
        if not prior.records:
            raise ValueError(f"class_dataset {class_dataset!r} has no usable images; add class images or unset it.")
        weight = config.prior_loss_weight
        report.records += [dataclasses.replace(r, loss_weight=weight, concept=f"class: {r.concept}", prior=True)
                           for r in prior.records]
        report.skipped += prior.skipped
        report.warnings += prior.warnings
    check_masks(config, report)
    return report


def check_masks(config, report: ScanReport) -> None:
    """With `masked_loss`, refuse unusable masks and log how images are masked; without, name unused mask files."""
    if getattr(config, "masked_loss", False):  # scan_dataset also serves the BLIP-2 trainers' configs
        files, alphas = check_loss_masks(report.records)
        logger.info("Masked loss: %d images with a mask file, %d masked by their alpha channel, %d learned whole",
                    files, alphas, len(report.records) - files - alphas)
    elif any(r.mask is not None for r in report.records):
        report.warnings.append(f"{sum(r.mask is not None for r in report.records)} images have a "
                               f"'{MASK_SUFFIX}' mask beside them, unused: set masked_loss: true to train with them")
        logger.warning(report.warnings[-1])
