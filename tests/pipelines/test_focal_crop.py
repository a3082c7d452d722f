"""A1111's focal point crop: the pure size / box / weighting math exactly, the whole step on synthetic pictures."""

import numpy as np
import pytest
from PIL import Image

from pipelines.focal_crop import (FocalWeights, Point, cover_size, crop_box, entropy_points, face_points, focal_crop,
                                  focal_point)


@pytest.mark.parametrize("size, crop, covered", [
    ((1024, 512), (512, 512), (1024, 512)),  # landscape: by height
    ((300, 900), (512, 512), (512, 1536)),  # portrait: by width
    ((400, 400), (512, 256), (512, 512)),  # square on a landscape target: by width
    ((400, 400), (256, 512), (512, 512)),  # square on a portrait target: by height
    ((2000, 1000), (512, 768), (1536, 768)),
    ((49, 50), (512, 512), (512, 522)),  # A1111's int(49 * (512 / 49)) is 511: a pixel short of the target
    ((300, 200), (512, 128), (512, 341)),  # a target wider than the picture: A1111's 192 x 128 did not cover it
    ((200, 300), (128, 512), (341, 512)),
    ((1, 1), (512, 256), (512, 512)),
])
def test_cover_size(size, crop, covered):
    assert cover_size(*size, *crop) == covered


@pytest.mark.parametrize("size, crop", [((49, 50), (512, 512)), ((300, 200), (512, 128)), ((97, 98), (100, 100))])
def test_the_crop_is_all_picture_never_a_black_bar(size, crop):
    white = Image.new("RGB", size, "white")
    result = focal_crop(white, *crop)[0]
    assert result.size == crop
    assert result.getextrema() == ((255, 255),) * 3


@pytest.mark.parametrize("focus, box", [
    ((700, 256), (444, 0, 956, 512)),  # centred
    ((100, 256), (0, 0, 512, 512)),  # pushed right
    ((1000, 256), (512, 0, 1024, 512)),  # pushed left
])
def test_crop_box_centres_then_stays_inside(focus, box):
    assert crop_box(*focus, 1024, 512, 512, 512) == box


def test_focal_point_normalises_the_weights_of_the_kinds_that_found_something():
    edges = [Point(100, 100, 0.5), Point(300, 100, 0.5)]  # centroid (200, 100)
    entropy = [Point(600, 300)]
    # faces found nothing: 0.5 and 0.25 become 2/3 and 1/3 -> (200 * 2 + 600) / 3, (100 * 2 + 300) / 3
    assert focal_point([(edges, 0.5), (entropy, 0.25), ([], 0.9)]) == (333, 167)
    assert focal_point([([], 0.5), ([], 0.15)]) == (0, 0)  # nothing found: A1111's (0, 0)
    assert focal_point([(edges, 0.0)]) == (0, 0)


def test_face_boxes_count_a_third_down_from_the_top():
    points = face_points(Image.new("RGB", (10, 10)), lambda image: [(10, 20, 110, 320), (200, 0, 300, 90)])
    assert points == [Point(60, 119, 0.5), Point(250, 29, 0.5)]
    assert face_points(Image.new("RGB", (10, 10)), None) == []


def _textured_square(size=(1024, 512), where=(760, 160), side=160):
    rng = np.random.default_rng(0)
    image = Image.new("RGB", size)
    image.paste(Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)), where)
    return image


def test_entropy_scores_as_a1111_a_window_with_the_fewest_texture_pixels_highest():
    # A1111 sums -log2(share) over the black / white bins, so on black the best window is the first (offsets step 4)
    # to hold any of the texture (columns 760..763 of the window at 252..764), not the one holding all of it
    [point] = entropy_points(_textured_square(), 512, 512)
    assert point == Point(252 + 256, 256)
    assert entropy_points(Image.new("RGB", (512, 512)), 256, 256) == []  # a square has none


@pytest.mark.parametrize("weights", [FocalWeights(), FocalWeights(face=0, entropy=0, edges=1)])
def test_the_crop_contains_the_bright_textured_square(weights):
    [crop] = focal_crop(_textured_square(), 512, 512, weights)
    assert crop.size == (512, 512)
    # the whole square is in the crop: its pixels' sum equals the picture's
    assert np.asarray(crop, dtype=np.int64).sum() == np.asarray(_textured_square(), dtype=np.int64).sum()


def test_a_portrait_picture_is_resized_then_cropped_around_the_square():
    image = _textured_square((400, 1200), (120, 900), 100)  # resized by 512/400: the square at 153..282 x 1152..1280
    [crop, debug] = focal_crop(image, 512, 512, FocalWeights(face=0, entropy=0, edges=1), debug=True)
    assert crop.size == (512, 512) and debug.size == (512, 1536)
    assert np.asarray(crop)[700 - 512:, :].sum() > 0 and np.asarray(debug)[:, :, 1].max() == 255  # green drawn


def test_faces_from_the_finder_pull_the_crop():
    # flat black but for a red right-most quarter: no edges or entropy point there, only the face at x 1800..1900
    image = Image.new("RGB", (2048, 512))
    image.paste((255, 0, 0), (1536, 0, 2048, 512))
    [crop] = focal_crop(image, 512, 512, FocalWeights(entropy=0, edges=0),
                        face_finder=lambda picture: [(1800, 100, 1900, 200)])
    assert np.asarray(crop)[:, :, 0].min() == 255  # focus x 1850: the crop pushed against the right edge
    [crop] = focal_crop(image, 512, 512, FocalWeights(entropy=0, edges=0))  # no finder: no faces, focus (0, 0)
    assert np.asarray(crop)[:, :, 0].max() == 0


def test_the_face_restorers_retinaface_finds_the_faces(tmp_path):
    from mixkit.registry import Registry
    from mixkit.testing.tiny_face_restoration import a1111_face_folders, planted_detector_loader, stand_in_loader
    from pipelines.face_restoration import register_face_restorers
    from pipelines.focal_crop import face_finder_from_restorers

    assert face_finder_from_restorers(Registry("face restorer")) is None  # nothing configured: no faces
    folders = a1111_face_folders(tmp_path / "models")
    face = ((300.0, 40.0, 400.0, 140.0), [(330.0, 80.0), (370.0, 80.0), (350.0, 100.0), (335.0, 120.0),
                                          (365.0, 120.0)])
    registry = Registry("face restorer")
    loader = planted_detector_loader([face], 512, 256)
    register_face_restorers(codeformer_folder=folders["CodeFormer"], loader=stand_in_loader("CodeFormer", None),
                            detector_loader=loader, registry=registry)
    finder = face_finder_from_restorers(registry)
    [box] = finder(Image.new("RGB", (512, 256)))
    assert np.allclose(box, (300, 40, 400, 140), atol=1)
    assert loader.paths == [folders["CodeFormer"] / "detection_Resnet50_Final.pth"]


def test_weights_outside_0_1_are_refused():
    with pytest.raises(ValueError, match="edges weight must be in"):
        focal_crop(Image.new("RGB", (8, 8)), 4, 4, FocalWeights(edges=1.5))


def test_a_strip_far_from_the_targets_aspect_is_refused_before_resizing():
    # 1 x 70 covering 512 x 512 is 512 x 35840 (18.4 M pixels, over the 16.8 M an Extras image may have); a 1 x 4000
    # strip asked for 512 x 2048000 and the process was killed for memory
    with pytest.raises(ValueError, match=r"a 1x70 picture would be resized to 512x35840 \(18350080 pixels, over the "
                                         r"16777216 .*Crop it nearer to 512:512 first"):
        focal_crop(Image.new("RGB", (1, 70)), 512, 512)
