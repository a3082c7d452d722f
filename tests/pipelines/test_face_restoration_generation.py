"""Restore faces in txt2img, hires fix and img2img on the tiny SD 1.x model, with stand-in restorer networks and a
planted face: where it runs, its infotext, the image kept from before it, and the checks made before sampling."""

import numpy as np
import pytest

from mixkit.testing.tiny_face_restoration import template_landmarks
from tests.pipelines.face_stand_ins import registered_stand_ins
from pipelines.infotext import parse_infotext

SMALL = dict(prompt="a face", width=64, height=64, steps=2, seed=7)
FACE = ((8.0, 8.0, 56.0, 56.0), template_landmarks(8.0, 8.0, 48.0))


@pytest.fixture
def restorers(tmp_path):
    with registered_stand_ins(tmp_path / "models", [FACE], 64, 64) as registered:
        yield registered


def test_restore_faces_paints_the_face_and_writes_the_infotext(sd1_pipe, restorers):
    plain = sd1_pipe(**SMALL)
    restored = sd1_pipe(**SMALL, restore_faces=True, code_former_weight=0.25)
    face, before = np.asarray(restored.images[0]), np.asarray(plain.images[0])
    assert face[32, 32].tolist() == [255, 0, 255]  # the stand-in CodeFormer fills the face with magenta
    assert np.array_equal(face[:, 60:], before[:, 60:])  # outside the face: the sampled image
    assert restorers.loaders["CodeFormer"].network.weights == [0.25]
    infotext = restored.infotexts[0]
    assert "Seed: 7, Face restoration: CodeFormer, Size: 64x64" in infotext  # A1111's place for the key
    assert "Face restoration" not in plain.infotexts[0]
    assert restored.before_face_restoration == {}


def test_gfpgan_and_the_image_kept_from_before(sd1_pipe, restorers, tmp_path):
    result = sd1_pipe(**SMALL, batch_size=2, restore_faces=True, face_restoration_model="GFPGAN",
                      save_images_before_face_restoration=True)
    plain = sd1_pipe(**SMALL, batch_size=2)
    assert parse_infotext(result.infotexts[1])["Face restoration"] == "GFPGAN"
    assert sorted(result.before_face_restoration) == [0, 1]
    for index in (0, 1):
        assert np.array_equal(np.asarray(result.before_face_restoration[index]), np.asarray(plain.images[index]))
    paths = result.save(tmp_path / "out")
    names = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert [path.name for path in paths] == ["00000-7.png", "00001-8.png"]
    assert names == ["00000-7-before-face-restoration.png", "00000-7.png", "00001-8-before-face-restoration.png",
                     "00001-8.png"]


def test_missing_restorer_is_refused_before_sampling(sd1_pipe, tmp_path):
    with pytest.raises(ValueError, match="restore_faces: Face restoration model 'CodeFormer' is not available"):
        sd1_pipe(**SMALL, restore_faces=True)


@pytest.mark.parametrize("field, value, fragment", [
    ("code_former_weight", 1.5, "code_former_weight must be a number in \\[0, 1\\]"),
    ("restore_faces", "yes", "restore_faces must be True or False"),
    ("face_restoration_model", "RestoreFormer", "'RestoreFormer' is not available"),
])
def test_bad_face_settings_name_the_field(sd1_pipe, restorers, field, value, fragment):
    with pytest.raises((ValueError, TypeError), match=fragment):
        sd1_pipe(**{**SMALL, "restore_faces": True, field: value})
    assert restorers.loaders["CodeFormer"].network.weights == []


def test_hires_fix_restores_the_final_image_only(sd1_pipe, restorers):
    from pipelines.hires import HiresFix

    result = HiresFix(sd1_pipe)(**{**SMALL, "width": 32, "height": 32}, hr_scale=2.0, hr_upscaler="Latent",
                                denoising_strength=0.5, restore_faces=True)
    assert restorers.loaders["CodeFormer"].network.weights == [0.5]  # once: on the 64x64 hires result
    assert np.asarray(result.images[0])[32, 32].tolist() == [255, 0, 255]
    assert "Face restoration: CodeFormer" in result.infotexts[0]


def test_img2img_restores_before_the_inpaint_paste_back(sd1_pipe, restorers, picture):
    from pipelines.img2img import ImageToImage
    from tests.pipelines.tiny_images import box_mask

    pipe = ImageToImage.from_pipeline(sd1_pipe)
    mask = box_mask((40, 0, 64, 64))  # repaint only the right strip: the face (restored) lies mostly outside it
    result = pipe(prompt="a face", init_images=[picture], mask=mask, steps=2, seed=3, denoising_strength=0.5,
                  width=64, height=64, restore_faces=True)
    out, source = np.asarray(result.images[0]), np.asarray(picture)
    # A1111 restores faces on the sampled image and then pastes the unmasked original back over it
    assert np.array_equal(out[:, :30], source[:, :30])
    assert "Face restoration: CodeFormer" in result.infotexts[0]
