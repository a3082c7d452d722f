"""A1111's face-parsing paste mask (facexlib use_parse=True): class map → blurred, framed mask, and the paste under
it, against exact values and OpenCV running facexlib's steps as oracle."""

import math

import numpy as np
import pytest
import torch

from mixkit.models.face.parse_mask import FACE_CLASS_VALUES, face_classes, parse_mask, paste_face_parsed
from mixkit.testing.tiny_face_parsing import PlantedParser, centre_square_classes


def _planted_segmentation(size=512):
    """A face-like map: background, hair (13) on top, skin (1) ellipse, nose (2), neck (17) and cloth (18) below."""
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    labels = torch.zeros(size, size, dtype=torch.long)
    labels[(ys < size * 0.45) & ((xs - size / 2) ** 2 + (ys - size * 0.4) ** 2 < (size * 0.38) ** 2)] = 13
    labels[((xs - size / 2) / (size * 0.3)) ** 2 + ((ys - size * 0.5) / (size * 0.38)) ** 2 < 1] = 1
    labels[(abs(xs - size / 2) < 20) & (abs(ys - size * 0.55) < 30)] = 2
    labels[(abs(xs - size / 2) < size * 0.15) & (ys > size * 0.85)] = 17
    labels[ys > size * 0.95] = 18
    return labels


@pytest.mark.parametrize("face_class", range(19))
def test_each_class_alone_gives_one_or_zero_inside_the_frame(face_class):
    mask = parse_mask(torch.full((128, 128), face_class))  # any size: the 101-tap blur still fits inside
    inside = 1.0 if face_class not in (0, 14, 16, 17, 18) else 0.0
    assert FACE_CLASS_VALUES[face_class] == 255 * inside
    assert torch.allclose(mask[10:-10, 10:-10], torch.tensor(inside), atol=5e-6, rtol=0)  # float32 sums
    frame = torch.ones(128, 128, dtype=torch.bool)
    frame[10:-10, 10:-10] = False
    assert torch.equal(mask[frame], torch.zeros(int(frame.sum())))


def test_half_plane_blur_is_the_double_gaussian_of_the_step():
    labels = torch.zeros(512, 512, dtype=torch.long)
    labels[:, 256:] = 1
    row = parse_mask(labels)[100]
    # Oracle: one-dimensional convolution twice with OpenCV's sigma-11 kernel and reflect-101 border, by index.
    taps = np.arange(101) - 50
    weights = np.exp(-taps ** 2 / (2 * 11.0 ** 2))
    weights /= weights.sum()
    signal = np.where(np.arange(512) >= 256, 255.0, 0.0)
    for _ in range(2):
        index = np.arange(512)[:, None] + taps[None]
        index = np.abs(index)
        index = np.where(index > 511, 2 * 511 - index, index)
        signal = (signal[index] * weights).sum(1)
    signal[:10], signal[-10:] = 0, 0
    assert np.allclose(row.numpy(), signal / 255, atol=5e-6, rtol=0)
    assert 0.45 < float(row[255]) < 0.5 < float(row[256]) < 0.55


def test_parse_mask_matches_facexlibs_steps_in_opencv():
    cv2 = pytest.importorskip("cv2")
    labels = _planted_segmentation()
    oracle = np.zeros(labels.shape)
    for index, value in enumerate(FACE_CLASS_VALUES):
        oracle[labels.numpy() == index] = value
    oracle = cv2.GaussianBlur(cv2.GaussianBlur(oracle, (101, 101), 11), (101, 101), 11)
    oracle[:10, :], oracle[-10:, :], oracle[:, :10], oracle[:, -10:] = 0, 0, 0, 0
    assert np.allclose(parse_mask(labels).numpy(), oracle / 255.0, atol=5e-6, rtol=0)


def test_classes_outside_nineteen_are_refused():
    with pytest.raises(ValueError, match="0..18, got 0..19"):
        parse_mask(torch.tensor([[0, 19]]))


def test_face_classes_are_the_parsers_argmax_on_truncated_pixels():
    planted = PlantedParser(centre_square_classes(0.5))
    seen = []
    planted.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    face = torch.full((3, 8, 8), 254.9)
    classes = face_classes(planted, face)
    assert torch.equal(classes, centre_square_classes(0.5)(8))
    assert torch.allclose(seen[0], torch.full((1, 3, 8, 8), 254 / 127.5 - 1))  # uint8 as A1111 passes it


def _similarity(angle, scale, tx, ty):
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    return torch.tensor([[c, -s, tx], [s, c, ty]], dtype=torch.float64)


def test_paste_keeps_every_pixel_the_mask_does_not_reach_and_fills_the_face_centre():
    generator = torch.Generator().manual_seed(0)
    image = torch.rand(3, 140, 160, generator=generator) * 255
    face = torch.tensor([10.0, 200.0, 90.0]).view(3, 1, 1).expand(3, 512, 512)
    matrix = _similarity(0.2, 512 / 90, -40 * 512 / 90, -20 * 512 / 90)  # image → face: a ~90 px face near (40, 20)
    mask = parse_mask(centre_square_classes(0.6)(512))
    out = paste_face_parsed(image, face, matrix, mask)
    from mixkit.models.face.alignment import invert_affine, warp_affine

    reach = warp_affine(mask[None].float(), invert_affine(matrix), (160, 140))[0] > 0
    assert reach.any() and (~reach).sum() > 10000
    assert torch.equal(out[:, ~reach], image[:, ~reach])  # exact: weight 0 outside the parsed face
    centre = (invert_affine(matrix) @ torch.tensor([256.0, 256.0, 1.0], dtype=torch.float64)).round().long()
    assert torch.allclose(out[:, centre[1], centre[0]], torch.tensor([10.0, 200.0, 90.0]), atol=1e-3)


def test_paste_matches_facexlibs_blend_in_opencv():
    cv2 = pytest.importorskip("cv2")
    generator = torch.Generator().manual_seed(1)
    image = torch.rand(3, 120, 130, generator=generator) * 255
    face = torch.rand(3, 512, 512, generator=generator) * 255
    matrix = _similarity(-0.3, 512 / 70, -30 * 512 / 70, -25 * 512 / 70)
    mask = parse_mask(_planted_segmentation())
    ours = paste_face_parsed(image, face, matrix, mask).permute(1, 2, 0).numpy()
    inverse = cv2.invertAffineTransform(matrix.numpy())
    restored = cv2.warpAffine(face.permute(1, 2, 0).numpy(), inverse, (130, 120))
    weight = cv2.warpAffine(mask.numpy(), inverse, (130, 120), flags=3)[:, :, None]
    oracle = weight * restored + (1 - weight) * image.permute(1, 2, 0).numpy()
    # OpenCV's warp rounds source coordinates to 1/32 px; on a random face that moves a pixel by a few levels.
    assert np.abs(ours - oracle).mean() < 1.0 and np.percentile(np.abs(ours - oracle), 99) < 8
