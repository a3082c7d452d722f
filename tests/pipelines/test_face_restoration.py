"""Restore faces end to end with a planted detector and stand-in restorer networks (the real networks are
`mixkit.models.face_restorers`'): lookup of A1111's files, the restore path, validation and offloading."""

import re

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.registry import Registry
from mixkit.testing.tiny_face_restoration import (StandInRestorer, a1111_face_folders, face_picture,
                                                  planted_detector_loader, stand_in_loader)
from pipelines.face_restoration import (check_face_restoration, face_restorer_listing, register_face_restorers,
                                        restore_faces)
from pipelines.face_restorer_files import DETECTOR_URL, RELEASES, detector_file, restorer_weights_file


@pytest.fixture
def folders(tmp_path):
    return a1111_face_folders(tmp_path / "models")


def _registry(folders, picture, faces, network=None, architecture="CodeFormer"):
    registry = Registry("face restorer")
    loader = stand_in_loader(architecture, network)
    detector_loader = planted_detector_loader(faces, *picture.size)
    register_face_restorers(codeformer_folder=folders["CodeFormer"], gfpgan_folder=folders["GFPGAN"], loader=loader,
                            detector_loader=detector_loader, registry=registry)
    return registry, loader, detector_loader


def test_identity_restorer_gives_back_the_picture(folders):
    picture, faces = face_picture()
    registry, loader, detector_loader = _registry(folders, picture, faces)
    out = restore_faces(picture, "CodeFormer", 0.7, registry=registry)
    difference = np.abs(np.asarray(out, dtype=int) - np.asarray(picture, dtype=int)).max(-1)
    assert out.size == picture.size and out.mode == "RGB"
    (left, top, right, bottom), _ = faces[0]
    rim = np.zeros_like(difference, dtype=bool)
    rim[int(top) - 2:int(bottom) + 3, int(left) - 2:int(right) + 3] = True
    rim[int(top) + 3:int(bottom) - 2, int(left) + 3:int(right) - 2] = False
    assert difference[~rim].max() <= 1  # warp there and back of a smooth picture: only rounding remains
    # facexlib's mask (even-sized erosion anchored left/top, then blur) lets a few % of the warp's black border in
    # on the right/bottom edge of a small face; kept for parity, bounded here.
    assert 0 < difference[rim].max() <= 16
    assert loader.paths == [folders["CodeFormer"] / "codeformer-v0.1.0.pth"]
    assert detector_loader.paths == [folders["CodeFormer"] / "detection_Resnet50_Final.pth"]
    assert loader.network.weights == [0.7]


def test_restored_face_is_pasted_inside_the_face_and_nowhere_else(folders):
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces, network=StandInRestorer(fill=(1.0, -1.0, 1.0)))
    out = np.asarray(restore_faces(picture, "CodeFormer", registry=registry), dtype=int)
    before = np.asarray(picture, dtype=int)
    (left, top, right, bottom), _ = faces[0]
    centre = (int((top + bottom) / 2), int((left + right) / 2))
    assert out[centre].tolist() == [255, 0, 255]
    assert np.array_equal(out[:, int(right) + 2:], before[:, int(right) + 2:])  # right of the face: untouched
    assert np.array_equal(out[:int(top) - 2], before[:int(top) - 2])


def test_gfpgan_is_found_by_its_name_and_ignores_nothing_but_weight(folders):
    picture, faces = face_picture()
    registry, loader, _ = _registry(folders, picture, faces, architecture="GFPGAN")
    restore_faces(picture, "GFPGAN", 0.2, registry=registry)
    assert loader.paths == [folders["GFPGAN"] / "GFPGANv1.4.pth"]
    assert loader.network.weights == [0.2]  # the network decides to ignore it (GFPGAN has no fidelity knob)


def test_a_file_of_the_other_architecture_is_refused_by_name(folders):
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces, architecture="GFPGAN")
    with pytest.raises(ValueError, match="holds a GFPGAN network, not CodeFormer.*--gfpgan-models-path"):
        restore_faces(picture, "CodeFormer", registry=registry)


def test_no_face_returns_the_picture_unchanged(folders):
    picture, _ = face_picture()
    registry, loader, _ = _registry(folders, picture, [])
    out = restore_faces(picture, "CodeFormer", registry=registry)
    assert np.array_equal(np.asarray(out), np.asarray(picture)) and out is not picture
    assert loader.network.weights == []


def test_two_faces_are_each_restored(folders):
    picture, _ = face_picture(160, 80)
    from mixkit.testing.tiny_face_restoration import template_landmarks

    faces = [((x, 10.0, x + 60, 70.0), template_landmarks(x, 10.0, 60)) for x in (10.0, 90.0)]
    registry, loader, _ = _registry(folders, picture, faces, network=StandInRestorer(fill=(-1.0, -1.0, -1.0)))
    out = np.asarray(restore_faces(picture, "CodeFormer", registry=registry))
    assert out[40, 40].tolist() == [0, 0, 0] and out[40, 120].tolist() == [0, 0, 0]
    assert len(loader.network.weights) == 2


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), "0.5", True, None])
def test_codeformer_weight_outside_zero_one_is_refused(folders, weight):
    picture, faces = face_picture()
    registry, loader, _ = _registry(folders, picture, faces)
    with pytest.raises(ValueError, match="codeformer_weight must be a number in \\[0, 1\\]"):
        restore_faces(picture, "CodeFormer", weight, registry=registry)
    assert loader.paths == []  # refused before anything loads


def test_unknown_or_unconfigured_model_names_the_flag(tmp_path):
    registry = Registry("face restorer")
    register_face_restorers(gfpgan_folder=a1111_face_folders(tmp_path)["GFPGAN"], registry=registry)
    with pytest.raises(ValueError, match="'CodeFormer' is not available \\(available: 'GFPGAN'\\); start with "
                                         "--codeformer-models-path"):
        check_face_restoration("CodeFormer", registry=registry)
    with pytest.raises(ValueError, match="'RestoreFormer' is not available"):
        check_face_restoration("RestoreFormer", registry=registry)
    assert check_face_restoration("gfpgan", registry=registry).name == "GFPGAN"  # names fold case, as A1111's lookup


@pytest.mark.parametrize("model", [["CodeFormer"], {"name": "GFPGAN"}, None, 5])
def test_a_model_that_is_no_name_is_refused_naming_the_value(tmp_path, model):
    registry = Registry("face restorer")
    register_face_restorers(gfpgan_folder=a1111_face_folders(tmp_path)["GFPGAN"], registry=registry)
    with pytest.raises(ValueError, match=rf"Face restoration model {re.escape(repr(model))} is not available "
                                         r"\(available: 'GFPGAN'\)\. Known restorers: CodeFormer, GFPGAN"):
        check_face_restoration(model, registry=registry)


def test_restore_faces_takes_a_pil_image(folders):
    with pytest.raises(TypeError, match="PIL image"):
        restore_faces(np.zeros((8, 8, 3), np.uint8))


def test_missing_folder_is_refused_at_registration(tmp_path):
    with pytest.raises(ValueError, match="--codeformer-models-path .* is not a folder"):
        register_face_restorers(codeformer_folder=tmp_path / "nope", registry=Registry("face restorer"))


def test_missing_weights_name_file_folder_and_url(tmp_path):
    (tmp_path / "Codeformer").mkdir()
    with pytest.raises(FileNotFoundError) as error:
        restorer_weights_file("CodeFormer", tmp_path / "Codeformer")
    assert "codeformer-v0.1.0.pth" in str(error.value) and RELEASES["CodeFormer"].url in str(error.value)
    assert str(tmp_path / "Codeformer") in str(error.value)
    with pytest.raises(FileNotFoundError) as error:
        detector_file([tmp_path / "Codeformer"])
    assert "detection_Resnet50_Final.pth" in str(error.value) and DETECTOR_URL in str(error.value)


def test_weights_lookup_skips_facexlib_files_and_needs_gfpgan_in_the_name(tmp_path):
    folder = tmp_path / "GFPGAN"
    folder.mkdir()
    for name in ("detection_Resnet50_Final.pth", "other.pth", "GFPGANv1.3.pth", "GFPGANCleanv1-NoCE-C2.pth"):
        (folder / name).write_bytes(b"x")
    assert restorer_weights_file("GFPGAN", folder).name == "GFPGANCleanv1-NoCE-C2.pth"  # first in name order
    (folder / "GFPGANv1.4.pth").write_bytes(b"x")
    assert restorer_weights_file("GFPGAN", folder).name == "GFPGANv1.4.pth"  # A1111's download wins
    codeformer = tmp_path / "Codeformer"
    codeformer.mkdir()
    (codeformer / "detection_Resnet50_Final.pth").write_bytes(b"x")
    (codeformer / "parsing_parsenet.pth").write_bytes(b"x")
    with pytest.raises(FileNotFoundError, match="No CodeFormer weights"):
        restorer_weights_file("CodeFormer", codeformer)
    (codeformer / "codeformer.pth").write_bytes(b"x")
    assert restorer_weights_file("CodeFormer", codeformer).name == "codeformer.pth"


def test_detector_is_shared_from_the_other_restorer_folder(folders):
    (folders["GFPGAN"] / "detection_Resnet50_Final.pth").unlink()
    picture, faces = face_picture()
    registry, _, detector_loader = _registry(folders, picture, faces, architecture="GFPGAN")
    restore_faces(picture, "GFPGAN", registry=registry)
    assert detector_loader.paths == [folders["CodeFormer"] / "detection_Resnet50_Final.pth"]


def test_networks_load_once_and_unload_moves_them_to_the_cpu(folders):
    picture, faces = face_picture()
    registry, loader, detector_loader = _registry(folders, picture, faces)
    restore_faces(picture, "CodeFormer", registry=registry)
    restore_faces(picture, "CodeFormer", unload=True, registry=registry)
    assert len(loader.paths) == 1 and len(detector_loader.paths) == 1
    restorer = registry.get("CodeFormer")
    assert restorer.offloaded and next(restorer.network.parameters()).device == torch.device("cpu")
    restore_faces(picture, "CodeFormer", registry=registry)
    assert not restorer.offloaded and len(loader.paths) == 1


def test_listing_is_a1111s_face_restorers_route(folders):
    registry = Registry("face restorer")
    register_face_restorers(gfpgan_folder=folders["GFPGAN"], codeformer_folder=folders["CodeFormer"], registry=registry)
    assert face_restorer_listing(registry) == [{"name": "CodeFormer", "cmd_dir": str(folders["CodeFormer"])},
                                               {"name": "GFPGAN", "cmd_dir": str(folders["GFPGAN"])}]


def test_grey_and_palette_pictures_come_back_rgb(folders):
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces)
    out = restore_faces(picture.convert("L"), "CodeFormer", registry=registry)
    assert out.mode == "RGB" and isinstance(out, Image.Image)


def test_missing_weight_files_are_refused_by_the_check_naming_the_download(folders):
    (folders["CodeFormer"] / "codeformer-v0.1.0.pth").unlink()
    picture, faces = face_picture()
    registry, loader, _ = _registry(folders, picture, faces)
    with pytest.raises(ValueError, match="No CodeFormer weights in .*codeformer.pth as codeformer-v0.1.0.pth"):
        restore_faces(picture, "CodeFormer", registry=registry)
    assert loader.paths == []


def _parsing_registry(folders, picture, faces, parser, fill=(1.0, -1.0, 1.0)):
    from mixkit.testing.tiny_face_parsing import planted_parser_loader

    registry = Registry("face restorer")
    parser_loader = planted_parser_loader(parser)
    register_face_restorers(codeformer_folder=folders["CodeFormer"], gfpgan_folder=folders["GFPGAN"],
                            loader=stand_in_loader("CodeFormer", StandInRestorer(fill=fill)),
                            detector_loader=planted_detector_loader(faces, *picture.size),
                            parser_loader=parser_loader, registry=registry)
    return registry, parser_loader


def test_parsenet_file_in_the_folder_pastes_only_the_parsed_face(folders):
    from mixkit.testing.tiny_face_parsing import PlantedParser, centre_square_classes

    (folders["CodeFormer"] / "parsing_parsenet.pth").write_bytes(b"stand-in")
    picture, faces = face_picture(160, 140)
    parser = PlantedParser(centre_square_classes(0.3))  # skin in the middle 30% of the aligned face only
    registry, parser_loader = _parsing_registry(folders, picture, faces, parser)
    out = np.asarray(restore_faces(picture, "CodeFormer", registry=registry), dtype=int)
    before = np.asarray(picture, dtype=int)
    assert parser_loader.paths == [folders["CodeFormer"] / "parsing_parsenet.pth"] and parser.calls == 1
    (left, top, right, bottom), _ = faces[0]
    centre = (round((top + bottom) / 2), round((left + right) / 2))
    assert out[centre].tolist() == [255, 0, 255]
    # The face square's corners are background to the parser: the picture stays there, where the square mask
    # (use_parse=False) would have pasted the restored colour.
    corner = (round(top + 0.08 * (bottom - top)), round(left + 0.08 * (right - left)))
    assert out[corner].tolist() == before[corner].tolist()
    assert np.array_equal(out[:, round(right):], before[:, round(right):])


def test_a_parse_with_no_face_class_leaves_the_picture_exactly(folders):
    from mixkit.testing.tiny_face_parsing import PlantedParser, centre_square_classes

    (folders["GFPGAN"] / "parsing_parsenet.pth").write_bytes(b"stand-in")  # found via the shared folder list
    picture, faces = face_picture()
    registry, parser_loader = _parsing_registry(folders, picture, faces,
                                                PlantedParser(centre_square_classes(0.8, face_class=17)))  # neck
    out = restore_faces(picture, "CodeFormer", registry=registry)
    assert np.array_equal(np.asarray(out), np.asarray(picture))
    assert parser_loader.paths == [folders["GFPGAN"] / "parsing_parsenet.pth"]


def test_without_parsenet_the_square_mask_is_used_and_logged_once(folders, caplog):
    from mixkit.testing.tiny_face_parsing import PlantedParser, centre_square_classes

    picture, faces = face_picture()
    registry, parser_loader = _parsing_registry(folders, picture, faces, PlantedParser(centre_square_classes()))
    with caplog.at_level("INFO", logger="pipelines.face_restoration"):
        first = restore_faces(picture, "CodeFormer", registry=registry)
        restore_faces(picture, "CodeFormer", registry=registry)
    told = [record.getMessage() for record in caplog.records if "parsing_parsenet.pth" in record.getMessage()]
    assert len(told) == 1 and "square mask" in told[0] and "releases/download/v0.2.2" in told[0]
    assert parser_loader.paths == []
    (left, top, right, bottom), _ = faces[0]
    corner = (round(top + 0.1 * (bottom - top)), round(left + 0.1 * (right - left)))
    changed = np.abs(np.asarray(first, dtype=int)[corner] - np.asarray(picture, dtype=int)[corner])
    assert changed.max() > 100  # the square mask pastes the restored colour into the face's corners


def test_a_parser_with_other_classes_is_refused_naming_the_file(folders):
    from mixkit.testing.tiny_face_parsing import PlantedParser, centre_square_classes

    (folders["CodeFormer"] / "parsing_parsenet.pth").write_bytes(b"stand-in")
    picture, faces = face_picture()
    registry, _ = _parsing_registry(folders, picture, faces, PlantedParser(centre_square_classes(), 5))
    with pytest.raises(ValueError, match="parsing_parsenet.pth' is a face parser with 5 classes"):
        restore_faces(picture, "CodeFormer", registry=registry)


def test_tiny_parsenet_file_is_loaded_by_default_and_offloaded_with_the_restorer(folders):
    from mixkit.models.face.parsenet import ParseNet
    from mixkit.testing.tiny_face_parsing import write_tiny_parsenet

    write_tiny_parsenet(folders["CodeFormer"] / "parsing_parsenet.pth", seed=5)
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces, network=StandInRestorer(fill=(1.0, -1.0, 1.0)))
    out = np.asarray(restore_faces(picture, "CodeFormer", unload=True, registry=registry), dtype=int)
    restorer = registry.get("CodeFormer")
    assert isinstance(restorer.parser, ParseNet) and restorer.offloaded
    assert next(restorer.parser.parameters()).device == torch.device("cpu")
    (left, top, right, bottom), _ = faces[0]
    before = np.asarray(picture, dtype=int)
    assert np.array_equal(out[:, round(right) + 2:], before[:, round(right) + 2:])  # outside the face: untouched


def test_an_unreadable_parsenet_file_is_refused_saying_how_to_fix_it(folders):
    (folders["CodeFormer"] / "parsing_parsenet.pth").write_bytes(b"not a checkpoint")
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces)
    with pytest.raises(ValueError, match=r"parsing_parsenet\.pth.*remove it to paste faces under the square mask"):
        restore_faces(picture, "CodeFormer", registry=registry)
    assert registry.get("CodeFormer").loaded_from is None and registry.get("CodeFormer").network is None


def test_the_restored_face_is_pasted_as_a1111s_truncated_8_bit(folders):
    """A1111 casts the network's [-1, 1] output to uint8 (truncating) before the paste: 0.0 is 127.5, pasted as 127."""
    picture, faces = face_picture()
    registry, _, _ = _registry(folders, picture, faces, network=StandInRestorer(fill=(0.0, 0.999, -1.0)))
    out = np.asarray(restore_faces(picture, "CodeFormer", registry=registry), dtype=int)
    (left, top, right, bottom), _ = faces[0]
    assert out[int((top + bottom) / 2), int((left + right) / 2)].tolist() == [127, 254, 0]


class FailsOnSecondFace(StandInRestorer):
    """Fills the first face black, raises on the second, as a restorer hitting a bad crop."""

    def forward(self, x, weight=None):
        if self.weights:
            self.weights.append(weight)
            raise RuntimeError("CUDA error: an illegal memory access")
        return super().forward(x, weight)


def test_a_face_the_restorer_fails_on_is_logged_and_kept_and_the_others_restored(folders, caplog):
    picture, _ = face_picture(160, 80)
    from mixkit.testing.tiny_face_restoration import template_landmarks

    faces = [((x, 10.0, x + 60, 70.0), template_landmarks(x, 10.0, 60)) for x in (10.0, 90.0)]
    registry, loader, _ = _registry(folders, picture, faces, network=FailsOnSecondFace(fill=(-1.0, -1.0, -1.0)))
    with caplog.at_level("ERROR", logger="pipelines.face_restoration"):
        out = np.asarray(restore_faces(picture, "CodeFormer", registry=registry), dtype=int)
    before = np.asarray(picture, dtype=int)
    assert out[40, 40].tolist() == [0, 0, 0]  # the first face: restored
    assert np.abs(out[25:55, 105:135] - before[25:55, 105:135]).max() <= 1  # the second: its own pixels, warped back
    assert len(loader.network.weights) == 2
    failures = [record for record in caplog.records if "Failed face-restoration inference" in record.getMessage()]
    assert len(failures) == 1 and "face 2 of 2" in failures[0].getMessage() and failures[0].exc_info is not None
