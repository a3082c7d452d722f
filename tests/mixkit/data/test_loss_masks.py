"""Loss masks: found beside their images or in the alpha channel, checked before training, cropped with the pixels."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.data import BucketedImageDataset, BucketSettings, scan_jsonl_manifest, scan_kohya_folder
from mixkit.data.loss_masks import LossMaskError, check_loss_masks, is_mask_file, load_loss_mask
from mixkit.training.diffusion_objective import latent_loss_mask


def _image(path, size=(32, 32), colour=(200, 30, 30), mode="RGB"):
    Image.new(mode, size, colour).save(path)
    path.with_suffix(".txt").write_text("a red square", encoding="utf-8")


def _left_half_mask(path, size=(32, 32)):
    array = np.zeros((size[1], size[0]), dtype=np.uint8)
    array[:, : size[0] // 2] = 255
    Image.fromarray(array).save(path)


def test_a_masklabel_file_is_its_images_mask_not_a_training_image(tmp_path):
    _image(tmp_path / "a.png")
    _image(tmp_path / "b.png")
    _left_half_mask(tmp_path / "a-masklabel.png")
    report = scan_kohya_folder(tmp_path)
    assert [r.path.name for r in report.records] == ["a.png", "b.png"]
    assert [r.mask.name if r.mask else None for r in report.records] == ["a-masklabel.png", None]
    assert is_mask_file(tmp_path / "a-masklabel.png") and not is_mask_file(tmp_path / "a.png")


def test_the_manifest_names_masks_or_finds_them_beside_the_image(tmp_path):
    _image(tmp_path / "a.png")
    _image(tmp_path / "b.png")
    _left_half_mask(tmp_path / "masks_a.png")
    _left_half_mask(tmp_path / "b-masklabel.png")
    manifest = tmp_path / "data.jsonl"
    manifest.write_text("\n".join(json.dumps(e) for e in [{"image": "a.png", "text": "x", "mask": "masks_a.png"},
                                                           {"image": "b.png", "text": "y"}]))
    records = scan_jsonl_manifest(manifest).records
    assert [r.mask.name for r in records] == ["masks_a.png", "b-masklabel.png"]
    manifest.write_text(json.dumps({"image": "a.png", "text": "x", "mask": "gone.png"}))
    with pytest.raises(ValueError, match="line 1: the mask .*gone.png.* does not exist"):
        scan_jsonl_manifest(manifest)
    manifest.write_text(json.dumps({"image": "a.png", "text": "x", "mask": 3}))
    with pytest.raises(ValueError, match="'mask' must be a path string"):
        scan_jsonl_manifest(manifest)


def test_masks_are_cropped_as_the_pixels_are(tmp_path):
    # A 64x32 image centre-cropped to 32x32 keeps columns 16..47: the left-half mask (columns 0..31 white)
    # becomes white on the crop's left half.
    _image(tmp_path / "wide.png", size=(64, 32))
    _left_half_mask(tmp_path / "wide-masklabel.png", size=(64, 32))
    _image(tmp_path / "plain.png")
    records = scan_kohya_folder(tmp_path).records
    batch = BucketedImageDataset(records, 32, loss_masks=True).load_batch([0, 1])
    assert batch["masks"].shape == (2, 1, 32, 32)
    expected = torch.zeros(32, 32)
    expected[:, :16] = 1.0
    assert torch.equal(batch["masks"][1, 0], expected)  # records sort as plain.png, wide.png
    assert torch.equal(batch["masks"][0], torch.ones(1, 32, 32))  # no mask: the whole image is learned
    assert "masks" not in BucketedImageDataset(records, 32).load_batch([0])


def test_the_alpha_channel_is_a_mask_and_the_pixels_stay_composited_on_white(tmp_path):
    array = np.zeros((32, 32, 4), dtype=np.uint8)
    array[..., 0] = 255
    array[:, 16:, 3] = 255  # right half opaque
    Image.fromarray(array, "RGBA").save(tmp_path / "cut.png")
    (tmp_path / "cut.txt").write_text("a red square")
    records = scan_kohya_folder(tmp_path).records
    assert check_loss_masks(records) == (0, 1)
    batch = BucketedImageDataset(records, 32, loss_masks=True).load_batch([0])
    assert torch.equal(batch["masks"][0, 0, :, 16:], torch.ones(32, 16))
    assert torch.equal(batch["masks"][0, 0, :, :16], torch.zeros(32, 16))
    assert torch.equal(batch["pixels"][0, :, 0, 0], torch.ones(3))  # transparent: white, as before


def test_a_mask_file_reads_its_red_channel_and_wins_over_alpha(tmp_path):
    _image(tmp_path / "a.png", mode="RGBA", colour=(1, 2, 3, 0))
    Image.new("RGB", (32, 32), (255, 0, 0)).save(tmp_path / "a-masklabel.png")
    mask = load_loss_mask(tmp_path / "a.png", tmp_path / "a-masklabel.png")
    assert np.asarray(mask).min() == 255  # red channel (kohya's reading), not luminance (76)
    assert load_loss_mask(tmp_path / "a.png", None).getextrema() == (0, 0)
    _image(tmp_path / "b.png")
    assert load_loss_mask(tmp_path / "b.png", None) is None


def test_a_16_bit_mask_keeps_its_grey_levels(tmp_path):
    # Columns of 0, 1000/65535, 50% grey and white in a 16-bit greyscale PNG (GIMP / Photoshop at 16 bpc). Pillow's
    # own conversion clipped everything from 255/65535 up to white, so a soft mask trained its background at full
    # weight.
    _image(tmp_path / "a.png", size=(32, 8))
    levels = np.array([0, 1000, 32768, 65535], dtype=np.uint16)
    Image.fromarray(np.repeat(np.repeat(levels[None], 8, axis=0), 8, axis=1)).save(tmp_path / "a-masklabel.png")
    assert Image.open(tmp_path / "a-masklabel.png").mode in ("I;16", "I")
    mask = np.asarray(load_loss_mask(tmp_path / "a.png", tmp_path / "a-masklabel.png"), dtype=np.float64) / 255
    assert mask[0, ::8] == pytest.approx([0.0, 1000 / 65535, 32768 / 65535, 1.0], abs=1e-6)
    assert mask[0, 8] == pytest.approx(0.01526, abs=1e-5) and mask[0, 16] == pytest.approx(0.5, abs=1e-4)
    # Through the batch (bucket 32x8, no resizing): the same weights reach the loss.
    records = scan_kohya_folder(tmp_path).records
    check_loss_masks(records)
    settings = BucketSettings(True, step=8, min_side=8, max_side=32, no_upscale=True)
    batch = BucketedImageDataset(records, 16, settings, loss_masks=True).load_batch([0])
    assert batch["masks"].shape == (1, 1, 8, 32)
    assert batch["masks"][0, 0, 0, ::8].tolist() == pytest.approx([0.0, 1000 / 65535, 32768 / 65535, 1.0], abs=1e-6)


def test_bad_masks_are_refused_before_training(tmp_path):
    _image(tmp_path / "a.png")
    with pytest.raises(LossMaskError, match="none of the 1 training images has a mask"):
        check_loss_masks(scan_kohya_folder(tmp_path).records)
    _left_half_mask(tmp_path / "a-masklabel.png", size=(16, 32))
    with pytest.raises(LossMaskError, match="is 16x32 pixels but its image .* is 32x32"):
        check_loss_masks(scan_kohya_folder(tmp_path).records)
    (tmp_path / "a-masklabel.png").write_bytes(b"not a png")
    with pytest.raises(LossMaskError, match="cannot be read"):
        check_loss_masks(scan_kohya_folder(tmp_path).records)


def test_latent_weights_average_the_cells_pixels():
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0],
                         [1.0, 0.0, 0.0, 0.0],
                         [0.0, 0.0, 1.0, 1.0],
                         [0.0, 0.0, 1.0, 1.0]]).view(1, 1, 4, 4)
    assert torch.equal(latent_loss_mask(mask, (2, 2)), torch.tensor([[[[0.75, 0.0], [0.0, 1.0]]]]))
    assert torch.equal(latent_loss_mask(mask, (2, 2), unmasked_weight=0.25),
                       torch.tensor([[[[0.75, 0.25], [0.25, 1.0]]]]))
    normalized = latent_loss_mask(mask, (2, 2), normalize=True)  # mean 0.4375
    assert torch.allclose(normalized, torch.tensor([[[[0.75, 0.0], [0.0, 1.0]]]]) / 0.4375)
    assert normalized.mean().item() == pytest.approx(1.0)
    empty = latent_loss_mask(torch.zeros(1, 1, 4, 4), (2, 2), normalize=True)
    assert torch.equal(empty, torch.zeros(1, 1, 2, 2))  # nothing to learn: zero, not NaN
