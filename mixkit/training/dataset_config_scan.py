"""The training set of a kohya dataset config: each subset's images scanned with its own settings, each dataset
bucketed at its own resolution, all trained as one `DatasetGroup`, and kohya's `ss_datasets` metadata of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mixkit.data import BucketedImageDataset, ScanReport
from mixkit.data.class_balance import balance_class_images
from mixkit.data.kohya_folder import scan_image_folder
from mixkit.training.dataset_config import DatasetSettings, read_dataset_config
from mixkit.training.dataset_group import DatasetGroup


def scan_dataset_config(config) -> tuple[ScanReport, list[tuple[DatasetSettings, list]]]:
    """All images of `config.dataset` (a kohya dataset config) in one report, and each dataset's own records.

    A record carries its subset's caption augmentation and flip_aug; a missing caption is the subset's
    class_tokens (none: empty), kohya's fallback, under `missing_captions: folder_name`; is_reg subsets are class
    images at `prior_loss_weight`."""
    datasets = read_dataset_config(config.dataset, config)
    report, members = ScanReport(), []
    for dataset in datasets:
        records = []
        for subset in dataset.subsets:
            part = ScanReport()
            scan_image_folder(subset.image_dir, subset.num_repeats, subset.class_tokens or "",
                              missing_captions=config.missing_captions, caption_extension=subset.caption_extension,
                              report=part)
            if not part.records and not part.skipped:
                raise ValueError(f"{config.dataset} {subset.where}: image_dir {str(subset.image_dir)!r} has no images; "
                                 "add .png/.jpg/.webp files or remove the subset")
            part.check_not_all_unreadable(subset.image_dir)
            for record in part.records:
                record = dataclasses.replace(record, captions=subset.captions, flip_aug=subset.flip_aug)
                if subset.is_reg:
                    record = dataclasses.replace(record, prior=True, loss_weight=config.prior_loss_weight,
                                                 concept=f"class: {record.concept}")
                records.append(record)
            report.skipped += part.skipped
            report.warnings += part.warnings
        if not any(not r.prior for r in records):
            raise ValueError(f"{config.dataset} {dataset.where}: only is_reg subsets; a dataset needs training images "
                             "(a subset without is_reg = true)")
        report.records += records
        members.append((dataset, records))
    return report, members


def without_held_out(members: list[tuple[DatasetSettings, list]], kept: list) -> list[tuple[DatasetSettings, list]]:
    """`members` with only the records in `kept` (the training records left after a validation split)."""
    ids = {id(record) for record in kept}
    return [(dataset, [r for r in records if id(r) in ids]) for dataset, records in members]


def dataset_group(members: list[tuple[DatasetSettings, list]], source: str, loss_masks: bool,
                  balance: bool = True) -> DatasetGroup:
    """The datasets as kohya trains them: each one's class images balanced against its own training images
    (kohya's DreamBoothDataset does it per dataset; `balance=False`: as given), bucketed at its resolution."""
    group = []
    for dataset, records in members:
        bucketed = BucketedImageDataset(balance_class_images(records) if balance else records, dataset.resolution,
                                        dataset.buckets,
                                        source=f"{source} {dataset.where}", loss_masks=loss_masks)
        group.append((bucketed, dataset.batch_size))
    return DatasetGroup(group)


# The run-wide `ss_*` keys kohya writes only without a dataset config (train_network.py): with one, each dataset's
# own values are in `ss_datasets`, and the run's fallbacks would misreport them.
RUN_WIDE_DATASET_KEYS = ("ss_batch_size_per_device", "ss_resolution", "ss_color_aug", "ss_flip_aug", "ss_random_crop",
                         "ss_shuffle_caption", "ss_enable_bucket", "ss_bucket_no_upscale", "ss_min_bucket_reso",
                         "ss_max_bucket_reso", "ss_keep_tokens", "ss_bucket_info")


def datasets_metadata(members: list[tuple[DatasetSettings, list]], group: DatasetGroup) -> list[dict]:
    """kohya's `ss_datasets` (train_network.py with a dataset config): per dataset its batch size, sample counts,
    resolution, buckets and tag frequency, and per subset its folder (basename), repeats and settings."""
    out = []
    for (dataset, records), bucketed in zip(members, group.members):
        report = ScanReport(records=records)
        subsets = []
        for subset in dataset.subsets:
            count = sum(1 for r in records if r.path.parent == subset.image_dir)
            subsets.append({"img_count": count, "num_repeats": subset.num_repeats, "color_aug": False,
                            "flip_aug": subset.flip_aug, "random_crop": False,
                            "shuffle_caption": subset.captions.shuffle, "keep_tokens": subset.captions.keep_tokens,
                            "image_dir": Path(subset.image_dir).name, "class_tokens": subset.class_tokens,
                            "is_reg": subset.is_reg})
        out.append({"is_dreambooth": True, "batch_size_per_device": dataset.batch_size,
                    "num_train_images": sum(r.repeats for r in records if not r.prior),
                    "num_reg_images": sum(r.repeats for r in records if r.prior),
                    "resolution": list(dataset.resolution),  # kohya's (width, height)
                    "enable_bucket": dataset.buckets.enabled, "min_bucket_reso": dataset.buckets.min_side,
                    "max_bucket_reso": dataset.buckets.max_side, "tag_frequency": report.tag_frequency(),
                    "bucket_info": bucketed.bucket_info(), "subsets": subsets})
    return out
