"""The shared entry checks: faces tensors, the fidelity weight, resizing to the network's size."""

import pytest
import torch

from mixkit.models.face_restorers.faces import check_faces, check_fidelity, restore_at_size


def test_fidelity_default_and_bounds():
    assert check_fidelity(None) == 0.5
    assert check_fidelity(0) == 0.0 and check_fidelity(1) == 1.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        check_fidelity(float("nan"))


@pytest.mark.parametrize("faces", [torch.zeros(3, 8, 8), torch.zeros(1, 4, 8, 8), torch.zeros(1, 3, 8, 6),
                                   torch.zeros(0, 3, 8, 8)])
def test_face_batches_must_be_square_rgb(faces):
    with pytest.raises(ValueError, match=r"\[N, 3, S, S\]"):
        check_faces(faces, torch.nn.Linear(1, 1))


def test_faces_must_match_the_module_dtype():
    with pytest.raises(ValueError, match="float64"):
        check_faces(torch.zeros(1, 3, 8, 8, dtype=torch.float64), torch.nn.Linear(1, 1))
    with pytest.raises(TypeError, match="tensor"):
        check_faces([[0.0]], torch.nn.Linear(1, 1))


def test_resizing_round_trip_and_clamp():
    faces = torch.linspace(-2, 2, 3 * 16 * 16).view(1, 3, 16, 16)
    seen = []
    out = restore_at_size(faces, 8, lambda x: seen.append(x.shape) or x)
    assert seen == [(1, 3, 8, 8)] and out.shape == (1, 3, 16, 16)
    assert out.min() == -1 and out.max() == 1
    same = restore_at_size(faces, 16, lambda x: x)
    assert torch.equal(same, faces.clamp(-1, 1))
