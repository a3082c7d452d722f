"""load_face_restorer: tiny files in the official layouts round-trip through every container; the contract holds."""

import pytest
import torch

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.models.face_restorers import load_face_restorer, read_face_restorer_weights
from mixkit.testing.tiny_face_restorers import (
    TINY_CODEFORMER,
    TINY_GFPGAN,
    tiny_face_restorer,
    write_tiny_codeformer,
    write_tiny_gfpgan,
)

WRITERS = {"GFPGAN": (write_tiny_gfpgan, TINY_GFPGAN), "CodeFormer": (write_tiny_codeformer, TINY_CODEFORMER)}
FACES = torch.rand(2, 3, 512, 512, generator=torch.Generator().manual_seed(0)) * 2 - 1


def _restore(model, faces, weight):
    kwargs = {"randomize_noise": False} if model.arch_name == "GFPGAN" else {}
    return model(faces, weight, **kwargs)


@pytest.mark.parametrize("arch", list(WRITERS))
@pytest.mark.parametrize("name, wrapper", [("m.pth", "params_ema"), ("m.pth", "params"), ("m.pt", None),
                                           ("m.safetensors", None)])
def test_tiny_files_round_trip(tmp_path, arch, name, wrapper):
    write, config = WRITERS[arch]
    path = write(tmp_path / name, wrapper=wrapper, seed=3)
    assert read_face_restorer_weights(path)[0] == config
    found, model = load_face_restorer(path)
    assert found == arch and type(model).__name__ == arch
    assert not model.training and not any(parameter.requires_grad for parameter in model.parameters())
    original = tiny_face_restorer(config, seed=3)
    faces = FACES[:1, :, :64, :64].contiguous()
    assert torch.equal(_restore(model, faces, 0.7), _restore(original, faces, 0.7))


@pytest.mark.parametrize("arch", list(WRITERS))
def test_aligned_512_faces_keep_shape_and_range(tmp_path, arch):
    path = WRITERS[arch][0](tmp_path / "m.pth")
    found, model = load_face_restorer(path, device="cpu", dtype=torch.float32)
    out = model(FACES)
    assert found == arch and out.shape == FACES.shape and out.dtype == torch.float32
    assert out.min() >= -1 and out.max() <= 1
    assert not torch.equal(out, FACES.clamp(-1, 1))


def test_codeformer_weight_zero_and_one_differ_and_none_is_half(tmp_path):
    _, model = load_face_restorer(write_tiny_codeformer(tmp_path / "codeformer.pth"))
    faces = FACES[:1]
    assert (model(faces, 0.0) - model(faces, 1.0)).abs().max() > 1e-3
    assert torch.equal(model(faces), model(faces, weight=0.5))
    with pytest.raises(ValueError, match=r"weight.*\[0, 1\]"):
        model(faces, weight=1.01)


def test_detection_uses_the_tensors_not_the_file_name(tmp_path):
    found, _ = load_face_restorer(write_tiny_codeformer(tmp_path / "GFPGANv1.4.pth"))
    assert found == "CodeFormer"


def test_dtype_and_device_are_applied_and_checked(tmp_path):
    path = write_tiny_gfpgan(tmp_path / "g.pth")
    _, model = load_face_restorer(path, dtype=torch.float64)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float64}
    assert model(FACES[:1].double()).dtype == torch.float64
    with pytest.raises(ValueError, match="float64.*float32"):
        model(FACES[:1])
    with pytest.raises(TypeError, match="floating torch dtype"):
        load_face_restorer(path, dtype=torch.int8)
    with pytest.raises(TypeError, match="device"):
        load_face_restorer(path, device=0.5)
    with pytest.raises(ValueError, match="not a usable torch device"):
        load_face_restorer(path, device="gpu7")


def test_half_precision_files_load_as_float32_by_default(tmp_path):
    model = tiny_face_restorer(TINY_CODEFORMER, seed=5).half()
    torch.save({"params_ema": model.state_dict()}, tmp_path / "half.pth")
    _, loaded = load_face_restorer(tmp_path / "half.pth")
    assert {tensor.dtype for tensor in loaded.state_dict().values()} == {torch.float32}
    assert torch.equal(loaded.position_emb, model.position_emb.float())


def test_weights_that_do_not_fit_are_refused_and_named(tmp_path):
    model = tiny_face_restorer(TINY_GFPGAN)
    state = dict(model.state_dict())
    del state["toRGB.0.weight"]
    state["extra.weight"] = torch.zeros(1)
    torch.save({"params_ema": state}, tmp_path / "bad.pth")
    with pytest.raises(CheckpointFormatError, match=r"looks like GFPGAN.*toRGB\.0\.weight.*extra\.weight"):
        load_face_restorer(tmp_path / "bad.pth")


def test_unknown_and_non_dict_files_are_refused(tmp_path):
    torch.save({"params_ema": {"conv_first.weight": torch.zeros(4, 3, 3, 3)}}, tmp_path / "esrgan.pth")
    with pytest.raises(CheckpointFormatError, match=r"esrgan\.pth.*not a known face restorer.*GFPGANv1Clean.*"
                                                    r"CodeFormer.*conv_first\.weight"):
        load_face_restorer(tmp_path / "esrgan.pth")
    torch.save([torch.zeros(1)], tmp_path / "list.pth")
    with pytest.raises(CheckpointFormatError, match="holds a list"):
        load_face_restorer(tmp_path / "list.pth")
    with pytest.raises(TypeError, match="path"):
        load_face_restorer(None)


def test_pickles_that_import_code_are_refused(tmp_path):
    import pickle

    class Payload:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(tmp_path / "evil.pth", "wb") as handle:
        pickle.dump({"params_ema": Payload()}, handle, protocol=2)
    with pytest.raises(UnsafeCheckpointError, match="print"):
        load_face_restorer(tmp_path / "evil.pth")


def test_a_tiny_file_claiming_huge_shapes_is_refused_before_anything_is_allocated(tmp_path):
    # stride-0 views save one stored value under a [10^8, ...] shape: 3 MB on disk, 6.4 GB if the network were built
    state = dict(tiny_face_restorer(TINY_CODEFORMER).state_dict())
    for key in ("quantize.embedding.weight", "idx_pred_layer.1.weight"):
        state[key] = state[key][:1].expand(10**8, state[key].shape[1])
    torch.save({"params_ema": state}, tmp_path / "crafted.pth")
    with pytest.raises(CheckpointFormatError, match=r"crafted\.pth.*quantize\.embedding\.weight.*\(100000000, "):
        load_face_restorer(tmp_path / "crafted.pth")


@pytest.mark.parametrize("arch", list(WRITERS))
def test_nan_weights_are_refused_naming_the_tensor(tmp_path, arch):
    model = tiny_face_restorer(WRITERS[arch][1])
    state = dict(model.state_dict())
    key = next(name for name, value in state.items() if value.is_floating_point())
    state[key] = torch.full_like(state[key], float("nan"))
    torch.save({"params_ema": state}, tmp_path / "nan.pth")
    with pytest.raises(CheckpointFormatError, match=rf"nan\.pth.*{arch} weight '{key}'.*NaN or infinite"):
        load_face_restorer(tmp_path / "nan.pth")
