"""RetinaFace decoding math exactly, and `detect_faces` on a stand-in network whose head outputs we choose."""

import math

import pytest
import torch
from torch import nn

from mixkit.models.face.detection import (decode_boxes, decode_landmarks, detect_faces, load_retinaface, nms,
                                          prior_boxes)
from mixkit.models.face.retinaface import RetinaFace, RetinaFaceConfig

CONFIG = RetinaFaceConfig.mobilenet()


def test_prior_boxes_follow_rows_columns_then_sizes():
    priors = prior_boxes(CONFIG, 16, 32)
    assert priors.shape == (2 * 4 * 2 + 1 * 2 * 2 + 1 * 1 * 2, 4)
    assert priors[0].tolist() == [0.125, 0.25, 0.5, 1.0]
    assert priors[1].tolist() == [0.125, 0.25, 1.0, 2.0]
    assert priors[2].tolist() == [0.375, 0.25, 0.5, 1.0]
    assert priors[8].tolist() == [0.125, 0.75, 0.5, 1.0]  # second row of the stride-8 level
    assert priors[16].tolist() == [0.25, 0.5, 2.0, 4.0]  # first stride-16 anchor: 64 px
    assert priors[-1].tolist() == [0.5, 1.0, 16.0, 32.0]  # stride 32 on a 16×32 image: one cell, 512 px


def test_decode_boxes_inverts_the_ssd_encoding():
    priors = torch.tensor([[0.5, 0.5, 0.2, 0.2], [0.25, 0.75, 0.1, 0.4]])
    offsets = torch.tensor([[1.0, 0.0, math.log(2) / 0.2, 0.0], [0.0, 0.0, 0.0, 0.0]])
    boxes = decode_boxes(offsets, priors, (0.1, 0.2))
    assert torch.allclose(boxes, torch.tensor([[0.32, 0.4, 0.72, 0.6], [0.2, 0.55, 0.3, 0.95]]), atol=1e-6)


def test_decode_landmarks_offsets_each_point_from_the_prior_centre():
    priors = torch.tensor([[0.5, 0.4, 0.2, 0.1]])
    offsets = torch.tensor([[1.0, 1.0, -1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 5.0, -5.0]])
    points = decode_landmarks(offsets, priors, (0.1, 0.2))
    assert torch.allclose(points, torch.tensor([[0.52, 0.41, 0.48, 0.4, 0.5, 0.42, 0.5, 0.4, 0.6, 0.35]]))


def test_nms_counts_pixels_inclusively_and_keeps_the_best():
    boxes = torch.tensor([[0.0, 0, 9, 9], [1.0, 1, 10, 10], [20.0, 20, 29, 29], [0.0, 0, 9, 5]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.95])
    # [0,0,9,5] is 60 px, [0,0,9,9] 100 px, overlap 60: IoU 0.6 > 0.4 so the lower-scored 100 px box goes.
    assert nms(boxes, scores, 0.4) == [3, 1, 2]
    assert nms(boxes, scores, 0.6) == [3, 0, 2]  # IoU exactly at the threshold is kept, as facexlib's `<=`


class _PlantedHeads(nn.Module):
    """Outputs one confident anchor with chosen offsets; records the input it saw."""

    def __init__(self, anchor: int, box=(0.0, 0.0, 0.0, 0.0), landmarks=None, score_logit=5.0):
        super().__init__()
        self.config, self.anchor, self.box, self.score_logit = CONFIG, anchor, box, score_logit
        self.landmarks = landmarks if landmarks is not None else [-3.0, -1.0, 3.0, -1.0, 0.0, 0.0, -2.0, 2.0, 2.0, 2.0]
        self.dummy = nn.Parameter(torch.zeros(1))
        self.seen = None

    def forward(self, x):
        self.seen = x.clone()
        count = prior_boxes(self.config, *x.shape[-2:]).shape[0]
        offsets, landmarks = torch.zeros(1, count, 4), torch.zeros(1, count, 10)
        logits = torch.tensor([5.0, 0.0]).repeat(1, count, 1)
        offsets[0, self.anchor] = torch.tensor(self.box)
        landmarks[0, self.anchor] = torch.tensor(self.landmarks)
        logits[0, self.anchor] = torch.tensor([0.0, self.score_logit])
        return offsets, logits, landmarks


def test_detect_faces_decodes_the_planted_anchor_in_image_pixels():
    model = _PlantedHeads(anchor=20)
    image = torch.zeros(3, 64, 64)
    faces = detect_faces(model, image, short_side=None)
    prior = prior_boxes(CONFIG, 64, 64)[20] * 64
    assert len(faces) == 1
    face = faces[0]
    cx, cy, w, h = prior.tolist()
    assert face.box == pytest.approx((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    assert face.score == pytest.approx(1 / (1 + math.exp(-5.0)))
    assert face.landmarks[0] == pytest.approx((cx - 3 * 0.1 * w, cy - 0.1 * h))
    assert face.landmarks[4] == pytest.approx((cx + 2 * 0.1 * w, cy + 2 * 0.1 * h))


def test_detect_faces_feeds_bgr_minus_caffe_means_and_scales_small_images_up():
    model = _PlantedHeads(anchor=3)
    image = torch.stack([torch.full((32, 48), 200.0), torch.full((32, 48), 100.0), torch.full((32, 48), 50.0)])
    faces = detect_faces(model, image, short_side=64)
    assert model.seen.shape == (1, 3, 64, 96)
    assert model.seen[0, :, 10, 10].tolist() == [50 - 104, 100 - 117, 200 - 123]
    cx, cy, w, h = (prior_boxes(CONFIG, 64, 96)[3] * torch.tensor([48.0, 32, 48, 32])).tolist()
    assert faces[0].box == pytest.approx((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    detect_faces(model, torch.zeros(3, 700, 900), short_side=640)
    assert model.seen.shape == (1, 3, 700, 900)  # never scaled down


def test_a_thin_strip_is_not_scaled_up_past_the_pixel_bound():
    from mixkit.models.face.detection import MAX_UPSCALED_PIXELS

    model = _PlantedHeads(anchor=3)
    detect_faces(model, torch.zeros(3, 2, 2000), short_side=640)  # facexlib's scale 320 would be 640 x 640000
    height, width = model.seen.shape[-2:]
    scale = (MAX_UPSCALED_PIXELS / (2 * 2000)) ** 0.5  # 40.47...: as far as the bound allows
    assert (height, width) == (int(2 * scale), int(2000 * scale)) == (80, 80954)
    assert height * width <= MAX_UPSCALED_PIXELS


def test_detect_faces_drops_low_scores_and_close_eyes():
    assert detect_faces(_PlantedHeads(anchor=5, score_logit=1.0), torch.zeros(3, 64, 64), short_side=None) == []
    close_eyes = [0.0] * 10  # all five points on the anchor centre: eye distance 0 px
    assert detect_faces(_PlantedHeads(anchor=5, landmarks=close_eyes), torch.zeros(3, 64, 64), short_side=None) == []
    faces = detect_faces(_PlantedHeads(anchor=5, landmarks=close_eyes), torch.zeros(3, 64, 64), short_side=None,
                         min_eye_distance=0.0)
    assert len(faces) == 1


def test_detect_faces_refuses_a_batch():
    with pytest.raises(ValueError, match=r"\[3, H, W\]"):
        detect_faces(_PlantedHeads(anchor=0), torch.zeros(1, 3, 8, 8))


def test_resnet50_has_facexlib_checkpoint_names_and_shapes():
    shapes = {key: tuple(value.shape) for key, value in RetinaFace(RetinaFaceConfig.resnet50()).state_dict().items()}
    assert shapes["body.conv1.weight"] == (64, 3, 7, 7)
    assert shapes["body.layer2.0.downsample.0.weight"] == (512, 256, 1, 1)
    assert shapes["body.layer4.2.bn3.running_var"] == (2048,)
    assert shapes["fpn.output1.0.weight"] == (256, 512, 1, 1)
    assert shapes["fpn.merge2.1.num_batches_tracked"] == ()
    assert shapes["ssh3.conv7x7_3.0.weight"] == (64, 64, 3, 3)
    assert shapes["ssh1.conv3X3.0.weight"] == (128, 256, 3, 3)
    assert shapes["ClassHead.0.conv1x1.weight"] == (4, 256, 1, 1)
    assert shapes["BboxHead.2.conv1x1.bias"] == (8,)
    assert shapes["LandmarkHead.1.conv1x1.weight"] == (20, 256, 1, 1)
    assert not any(key.startswith("body.fc") or key.startswith("body.layer4.3") for key in shapes)


def test_mobilenet_heads_cover_every_prior():
    torch.manual_seed(0)
    model = RetinaFace(RetinaFaceConfig.mobilenet()).eval()
    offsets, logits, landmarks = model(torch.zeros(1, 3, 40, 56))
    count = prior_boxes(model.config, 40, 56).shape[0]
    assert offsets.shape == (1, count, 4) and logits.shape == (1, count, 2) and landmarks.shape == (1, count, 10)


def test_load_retinaface_strips_dataparallel_prefix_and_matches(tmp_path):
    from mixkit.errors import CheckpointFormatError

    torch.manual_seed(1)
    model = RetinaFace(RetinaFaceConfig.mobilenet()).eval()
    state = {f"module.{key}": value for key, value in model.state_dict().items()
             if not key.endswith("num_batches_tracked")}
    torch.save(state, tmp_path / "detection_mobilenet0.25_Final.pth")
    loaded = load_retinaface(tmp_path / "detection_mobilenet0.25_Final.pth")
    x = torch.rand(1, 3, 32, 32)
    assert all(torch.equal(a, b) for a, b in zip(loaded(x), model(x)))
    torch.save({"not": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(CheckpointFormatError, match="not a RetinaFace detector"):
        load_retinaface(tmp_path / "other.pth")
    del state["module.fpn.merge1.0.weight"]
    torch.save(state, tmp_path / "cut.pth")
    with pytest.raises(CheckpointFormatError, match="fpn.merge1.0.weight"):
        load_retinaface(tmp_path / "cut.pth")


def test_load_retinaface_refuses_nan_weights(tmp_path):
    from mixkit.errors import CheckpointFormatError

    state = dict(RetinaFace(RetinaFaceConfig.mobilenet()).state_dict())
    state["fpn.merge1.0.weight"] = torch.full_like(state["fpn.merge1.0.weight"], float("inf"))
    torch.save(state, tmp_path / "detection_mobilenet0.25_Final.pth")
    with pytest.raises(CheckpointFormatError, match=r"RetinaFace weight 'fpn\.merge1\.0\.weight'.*NaN or infinite"):
        load_retinaface(tmp_path / "detection_mobilenet0.25_Final.pth")
