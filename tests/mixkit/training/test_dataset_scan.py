"""`mixkit.training.dataset_scan`: the images every trainer learns from, DreamBooth class images with their weight,
and loss-mask files named when masked training is off."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from PIL import Image

from mixkit.training.dataset_scan import scan_dataset, scan_path


def _config(dataset, **settings):
    """The settings scan_dataset reads, as a trainer's config carries them (the BLIP-2 configs have no class data)."""
    return SimpleNamespace(dataset=str(dataset), missing_captions="error", caption_extension=".txt", **settings)


def test_a_dataset_config_file_is_refused_by_trainers_that_read_folders_and_manifests(tmp_path):
    with pytest.raises(ValueError, match=r"is a kohya dataset config, which only `sd-lora`'s dataset setting reads"):
        scan_path(tmp_path / "datasets.toml", "error")


def test_class_images_join_once_with_the_prior_loss_weight_and_their_own_concept(colour_dataset, tmp_path):
    class_dir = tmp_path / "class" / "1_square"
    class_dir.mkdir(parents=True)
    Image.new("RGB", (32, 32), (128, 128, 128)).save(class_dir / "grey.png")
    (class_dir / "grey.txt").write_text("a square", encoding="utf-8")
    report = scan_dataset(_config(colour_dataset, class_dataset=str(tmp_path / "class"), prior_loss_weight=0.5))
    seen = {(r.path.name, r.loss_weight, r.prior, r.concept, r.repeats) for r in report.records}
    assert seen == {("red.png", 1.0, False, "square", 2), ("blue.png", 1.0, False, "square", 2),
                    ("green.png", 1.0, False, "square", 2), ("grey.png", 0.5, True, "class: square", 1)}
    (class_dir / "grey.png").unlink()
    with pytest.raises(ValueError, match="class_dataset .* has no usable images; add class images or unset it"):
        scan_dataset(_config(colour_dataset, class_dataset=str(tmp_path / "class"), prior_loss_weight=0.5))


def test_mask_files_are_not_training_images_and_are_named_when_masked_training_is_off(colour_dataset, tmp_path):
    masked = tmp_path / "masked"
    shutil.copytree(colour_dataset, masked)
    for image in masked.glob("*/*.png"):
        Image.new("L", (32, 32), 255).save(image.with_name(f"{image.stem}-masklabel.png"))
    report = scan_dataset(_config(masked))
    assert sorted(r.path.name for r in report.records) == ["blue.png", "green.png", "red.png"]
    assert report.warnings == ["3 images have a '-masklabel' mask beside them, unused: set masked_loss: true to train "
                               "with them"]
    assert scan_dataset(_config(masked, masked_loss=True)).warnings == []
