"""Restore faces with the real GFPGAN / CodeFormer networks (tiny files in their official key layouts, loaded by the
default loader from A1111's folders), the face detector planted: the two halves meet through their contract."""

import numpy as np
import pytest

from mixkit.registry import Registry
from mixkit.testing.tiny_face_restoration import a1111_face_folders, face_picture, planted_detector_loader
from mixkit.testing.tiny_face_restorers import write_tiny_codeformer, write_tiny_gfpgan
from pipelines.face_restoration import register_face_restorers, restore_faces


@pytest.fixture
def restorers(tmp_path):
    """A registry whose CodeFormer and GFPGAN folders hold tiny real networks, and the picture its detector sees."""
    folders = a1111_face_folders(tmp_path / "models")
    write_tiny_codeformer(folders["CodeFormer"] / "codeformer-v0.1.0.pth")
    write_tiny_gfpgan(folders["GFPGAN"] / "GFPGANv1.4.pth")
    picture, faces = face_picture()
    registry = Registry("face restorer")
    register_face_restorers(codeformer_folder=folders["CodeFormer"], gfpgan_folder=folders["GFPGAN"],
                            detector_loader=planted_detector_loader(faces, *picture.size), registry=registry)
    return registry, picture, faces


def _changed_inside_the_face_only(out, picture, faces) -> None:
    after, before = np.asarray(out, dtype=int), np.asarray(picture, dtype=int)
    (left, top, right, bottom), _ = faces[0]
    centre = (slice(int(top) + 8, int(bottom) - 8), slice(int(left) + 8, int(right) - 8))
    assert np.abs(after[centre] - before[centre]).mean() > 1  # the network's face is pasted in
    assert np.array_equal(after[:, int(right) + 2:], before[:, int(right) + 2:])  # beside the face: untouched


def test_codeformer_restores_the_face_and_its_weight_matters(restorers):
    registry, picture, faces = restorers
    strong = restore_faces(picture, "CodeFormer", 0.0, registry=registry)
    _changed_inside_the_face_only(strong, picture, faces)
    again = restore_faces(picture, "CodeFormer", 0.0, registry=registry)
    assert np.array_equal(np.asarray(strong), np.asarray(again))  # CodeFormer is deterministic
    faithful = restore_faces(picture, "CodeFormer", 1.0, registry=registry)
    assert not np.array_equal(np.asarray(strong), np.asarray(faithful))


def test_gfpgan_restores_the_face(restorers):
    registry, picture, faces = restorers
    _changed_inside_the_face_only(restore_faces(picture, "GFPGAN", registry=registry), picture, faces)


def test_a_restorer_file_of_the_other_network_is_refused_naming_both(restorers, tmp_path):
    registry, picture, _ = restorers
    folders = a1111_face_folders(tmp_path / "swapped")
    write_tiny_gfpgan(folders["CodeFormer"] / "codeformer-v0.1.0.pth")  # a GFPGAN file under CodeFormer's name
    swapped = Registry("face restorer")
    register_face_restorers(codeformer_folder=folders["CodeFormer"], registry=swapped,
                            detector_loader=planted_detector_loader(face_picture()[1], *picture.size))
    with pytest.raises(ValueError, match="GFPGAN.*CodeFormer|CodeFormer.*GFPGAN"):
        restore_faces(picture, "CodeFormer", registry=swapped)
