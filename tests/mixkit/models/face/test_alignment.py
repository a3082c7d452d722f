"""The similarity fit, the torch warp, the paste mask and align∘paste, against exact values and OpenCV as oracle."""

import math

import numpy as np
import pytest
import torch

from mixkit.models.face.alignment import (FFHQ_TEMPLATE_512, _erode, _gaussian_blur, align_face, fit_similarity,
                                          invert_affine, paste_face, paste_mask, warp_affine)


def _similarity(angle, scale, tx, ty):
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    return torch.tensor([[c, -s, tx], [s, c, ty]], dtype=torch.float64)


def test_fit_similarity_recovers_a_known_transform():
    truth = _similarity(0.3, 1.7, 10.0, -5.0)
    points = FFHQ_TEMPLATE_512
    moved = points @ truth[:, :2].T + truth[:, 2]
    assert torch.allclose(fit_similarity(points, moved), truth, atol=1e-9)


def test_fit_similarity_is_least_squares_on_noisy_points():
    cv2 = pytest.importorskip("cv2")
    source = FFHQ_TEMPLATE_512 / 4 + torch.tensor([40.0, 30.0])
    noisy = source + torch.tensor([[1.0, -0.5], [0.0, 0.7], [-1.2, 0.3], [0.4, 0.0], [0.0, -0.9]], dtype=torch.float64)
    fitted = fit_similarity(noisy, FFHQ_TEMPLATE_512)
    oracle, _ = cv2.estimateAffinePartial2D(noisy.numpy(), FFHQ_TEMPLATE_512.numpy(), method=cv2.LMEDS)
    assert np.allclose(fitted.numpy(), oracle, atol=0.05)  # LMEDS picks inliers; on near-clean points they agree


def test_fit_similarity_refuses_mismatched_points():
    with pytest.raises(ValueError, match="K >= 2"):
        fit_similarity(torch.zeros(5, 2), torch.zeros(4, 2))


def test_invert_affine_composes_to_identity():
    matrix = _similarity(-0.7, 0.4, 3.0, 8.0)
    inverse = invert_affine(matrix)
    full = torch.cat([matrix, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)])
    back = torch.cat([inverse, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)])
    assert torch.allclose(back @ full, torch.eye(3, dtype=torch.float64), atol=1e-12)


def test_warp_affine_integer_shift_moves_pixels_and_fills_the_border():
    image = torch.arange(2 * 4 * 5, dtype=torch.float32).reshape(2, 4, 5)
    shifted = warp_affine(image, torch.tensor([[1.0, 0, 2], [0, 1.0, 1]]), (5, 4), border=(-1.0, -2.0))
    assert torch.allclose(shifted[:, 1:, 2:], image[:, :3, :3])
    assert torch.allclose(shifted[0, 0], torch.tensor(-1.0)) and torch.allclose(shifted[1, :, 1], torch.tensor(-2.0))


def test_warp_affine_matches_opencv_bilinear_constant_border():
    cv2 = pytest.importorskip("cv2")
    generator = torch.Generator().manual_seed(0)
    image = torch.rand(3, 40, 50, generator=generator, dtype=torch.float64) * 255
    matrix = _similarity(0.4, 1.3, -6.0, 4.0)
    ours = warp_affine(image, matrix, (60, 45), border=(132.0, 133.0, 135.0))
    oracle = cv2.warpAffine(image.permute(1, 2, 0).numpy().astype(np.float32), matrix.numpy(), (60, 45),
                            flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=(132, 133, 135))
    # OpenCV quantises interpolation weights to 1/32; the difference is that rounding, not geometry.
    assert np.abs(ours.permute(1, 2, 0).numpy() - oracle).max() < 255 / 32


def test_erode_and_blur_match_opencv():
    cv2 = pytest.importorskip("cv2")
    mask = torch.zeros(30, 34)
    mask[5:24, 7:30] = 1.0
    mask[12, 15] = 0.0
    for kernel in (2, 3, 6):
        oracle = cv2.erode(mask.numpy(), np.ones((kernel, kernel), np.uint8))
        assert np.array_equal(_erode(mask, kernel).numpy(), oracle)
    for kernel in (3, 5, 7):  # OpenCV's fixed tables
        oracle = cv2.GaussianBlur(mask.numpy(), (kernel, kernel), 0)
        assert np.allclose(_gaussian_blur(mask, kernel).numpy(), oracle, atol=1e-5)
    for kernel in (9, 13):  # the sigma formula; OpenCV 5 rounds these taps to 1/256, OpenCV 4 keeps floats
        oracle = cv2.GaussianBlur(mask.numpy(), (kernel, kernel), 0)
        assert np.allclose(_gaussian_blur(mask, kernel).numpy(), oracle, atol=5e-3)


def test_paste_mask_is_one_inside_zero_outside_and_soft_between():
    # image → face: the face square is image [20, 148) × [30, 158)
    matrix = _similarity(0.0, 4.0, -4.0 * 20, -4.0 * 30)
    seam_free, soft = paste_mask(invert_affine(matrix), 512, (200, 190))
    assert soft[94, 84] == pytest.approx(1.0) and seam_free[94, 84] == 1.0
    assert soft[5, 5] == 0.0 and soft[180, 190] == 0.0
    assert 0.0 < float(soft[94, 22]) < 1.0  # the blurred rim: edge = √(127²)//20 = 6 px of erosion, then blur
    assert float(soft.min()) >= 0.0 and float(soft.max()) <= 1.0 + 1e-6


def test_align_then_paste_of_an_identity_restorer_gives_back_the_image():
    ys, xs = torch.meshgrid(torch.arange(160.0), torch.arange(180.0), indexing="ij")
    image = torch.stack([0.5 * xs + 0.3 * ys, 0.2 * xs + 40, 200 - 0.4 * ys])  # linear: bilinear sampling is exact
    landmarks = FFHQ_TEMPLATE_512 / 5 @ _similarity(0.2, 1.0, 0, 0)[:, :2].T + torch.tensor([60.0, 40.0])
    face, matrix = align_face(image, landmarks)
    assert face.shape == (3, 512, 512)
    pasted = paste_face(image, face, matrix)
    seam_free, soft = paste_mask(invert_affine(matrix), 512, (180, 160))
    inside, outside = soft > 0.999, soft == 0
    assert inside.sum() > 1000 and outside.sum() > 1000
    assert torch.allclose(pasted[:, inside], image[:, inside], atol=1e-2)
    assert torch.equal(pasted[:, outside], image[:, outside])


def test_paste_puts_the_restored_face_where_the_mask_is_one():
    image = torch.zeros(3, 120, 120)
    landmarks = FFHQ_TEMPLATE_512 / 5 + torch.tensor([10.0, 10.0])
    face, matrix = align_face(image, landmarks)
    pasted = paste_face(image, torch.full_like(face, 100.0), matrix)
    seam_free, soft = paste_mask(invert_affine(matrix), 512, (120, 120))
    assert torch.allclose(pasted[:, soft > 0.999], torch.tensor(100.0), atol=1e-3)
    assert torch.allclose(pasted, (100.0 * soft * seam_free).expand(3, -1, -1), atol=1e-3)
