"""A1111's Checkpoint Merger on tiny state dicts: exact values, names, float16, VAE, discard regex, config, errors."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.io.checkpoint_merge import MergeInterrupted, merge_checkpoints
from mixkit.io.merge_inputs import MergeSource
from mixkit.io.merge_math import MergeShapeError

UNET = "model.diffusion_model.input_blocks.0.0.weight"
VAE = "first_stage_model.decoder.conv_in.bias"
SCHEDULE = "alphas_cumprod"
POSITION_IDS = "cond_stage_model.transformer.text_model.embeddings.position_ids"


def state(value: float, *, in_channels: int = 4) -> dict:
    return {UNET: torch.full((2, in_channels, 1, 1), value), VAE: torch.full((3,), value),
            SCHEDULE: torch.full((2,), value), POSITION_IDS: torch.arange(3)}


@pytest.fixture
def models(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    paths = {}
    for name, value in (("a", 1.0), ("b", 3.0), ("c", 2.0)):
        paths[name] = folder / f"{name}.safetensors"
        save_file(state(value), paths[name])
    return folder, paths


def files(folder) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_weighted_sum_values_and_a1111_name(models):
    folder, p = models
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, multiplier=0.25)
    assert result.path.name == "0.75(a) + 0.25(b).safetensors"
    merged = load_file(result.path)
    assert merged[UNET].flatten().tolist() == [1.5] * 8  # 1 * 0.75 + 3 * 0.25
    assert merged[VAE].tolist() == [1.5] * 3
    assert merged[SCHEDULE].tolist() == [1.0, 1.0]  # no "model" in the key: A's
    assert merged[POSITION_IDS].tolist() == [0, 1, 2]


def test_add_difference_values_and_name(models):
    folder, p = models
    result = merge_checkpoints(p["a"], p["b"], p["c"], output_dir=folder, method="Add difference", multiplier=0.5)
    assert result.path.name == "a + 0.5(b - c).safetensors"
    assert load_file(result.path)[UNET].flatten().tolist() == [1.5] * 8  # 1 + (3 - 2) * 0.5


def test_no_interpolation_converts_a_to_float16_and_ckpt(models):
    folder, p = models
    result = merge_checkpoints(p["a"], output_dir=folder, method="No interpolation", save_as_half=True,
                               checkpoint_format="ckpt")
    assert result.path.name == "a.ckpt"
    loaded = torch.load(result.path, weights_only=True)
    assert loaded[UNET].dtype == torch.float16 and loaded[SCHEDULE].dtype == torch.float16
    assert loaded[POSITION_IDS].dtype == torch.int64


def test_float16_rounds_the_float32_result(models):
    folder, p = models
    save_file({UNET: torch.full((2, 4, 1, 1), 0.1)}, p["a"])
    save_file({UNET: torch.full((2, 4, 1, 1), 0.2)}, p["b"])
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, multiplier=0.3, save_as_half=True)
    expected = (0.7 * torch.tensor(0.1) + 0.3 * torch.tensor(0.2)).half().item()
    assert load_file(result.path)[UNET].flatten().tolist() == [expected] * 8


def test_keys_only_in_a_kept_only_in_b_dropped(models):
    folder, p = models
    save_file({**state(1.0), "model.only_a": torch.ones(1)}, p["a"])
    save_file({**state(3.0), "model.only_b": torch.ones(1)}, p["b"])
    merged = load_file(merge_checkpoints(p["a"], p["b"], output_dir=folder).path)
    assert "model.only_a" in merged and "model.only_b" not in merged


def test_inpainting_a_keeps_its_extra_channels_and_names_the_file(models):
    folder, p = models
    inpainting = state(1.0, in_channels=9)
    inpainting[UNET][:, 4:] = 7.0
    save_file(inpainting, p["a"])
    result = merge_checkpoints(p["a"], p["b"], p["c"], output_dir=folder, method="Add difference", multiplier=1.0,
                               custom_name="mine")
    assert result.path.name == "mine.inpainting.safetensors" and result.is_inpainting
    unet = load_file(result.path)[UNET]
    assert unet[:, :4].flatten().tolist() == [2.0] * 8 and unet[:, 4:].flatten().tolist() == [7.0] * 10


def test_inpainting_b_with_normal_a_is_refused_before_writing(models):
    folder, p = models
    save_file(state(1.0, in_channels=9), p["b"])
    with pytest.raises(MergeShapeError, match=f"key {UNET!r}.*A must be the inpainting model"):
        merge_checkpoints(p["a"], p["b"], output_dir=folder)
    assert files(folder) == ["a.safetensors", "b.safetensors", "c.safetensors"]


def test_shape_mismatch_names_the_key(models):
    folder, p = models
    save_file({**state(3.0), VAE: torch.ones(4)}, p["b"])
    with pytest.raises(MergeShapeError, match=re.escape(VAE)):
        merge_checkpoints(p["a"], p["b"], output_dir=folder)
    assert len(files(folder)) == 3


def test_bake_in_vae_replaces_first_stage_weights(models, tmp_path):
    folder, p = models
    vae = tmp_path / "vae.ckpt"
    torch.save({"state_dict": {"decoder.conv_in.bias": torch.full((3,), 9.0), "loss.w": torch.ones(1)}}, vae)
    result = merge_checkpoints(p["a"], output_dir=folder, method="No interpolation", bake_in_vae=vae,
                               custom_name="baked")
    merged = load_file(result.path)
    assert merged[VAE].tolist() == [9.0] * 3 and "first_stage_model.loss.w" not in merged
    assert json.loads(load_safetensors_metadata(result.path)["sd_merge_recipe"])["bake_in_vae"] == "vae.ckpt"


def test_bake_in_vae_that_fits_nothing_is_refused(models, tmp_path):
    folder, p = models
    vae = tmp_path / "vae.safetensors"
    save_file({"decoder.up_blocks.0.weight": torch.ones(1)}, vae)  # diffusers naming
    with pytest.raises(ValueError, match="LDM-format VAE"):
        merge_checkpoints(p["a"], output_dir=folder, method="No interpolation", bake_in_vae=vae, custom_name="x")


def test_discard_weights_regex_searches_keys(models):
    folder, p = models
    merged = load_file(merge_checkpoints(p["a"], p["b"], output_dir=folder, discard_weights=r"^first_stage").path)
    assert VAE not in merged and UNET in merged


def load_safetensors_metadata(path):
    from mixkit.io.safetensors_header import read_safetensors_metadata

    return read_safetensors_metadata(path)


def test_metadata_recipe_models_and_copied_fields(models):
    from mixkit.io.hashing import legacy_a1111_hash, sha256_file

    folder, p = models
    save_file(state(1.0), p["a"], metadata={"ss_note": "from a", "shared": "a"})
    save_file(state(3.0), p["b"], metadata={"shared": "b", "sd_merge_models": json.dumps({"f" * 64: {"name": "old"}})})
    a = MergeSource(p["a"], "sub/a.safetensors")
    result = merge_checkpoints(a, p["b"], p["c"], output_dir=folder, multiplier=0.4, metadata={"author": "me", "n": 1})
    assert result.path.name == "0.6(sub_a) + 0.4(b).safetensors"  # C is not used by a weighted sum
    metadata = load_safetensors_metadata(result.path)
    assert metadata["format"] == "pt" and metadata["ss_note"] == "from a" and metadata["shared"] == "b"
    assert metadata["author"] == "me" and metadata["n"] == "1"
    assert json.loads(metadata["sd_merge_recipe"]) == {
        "type": "webui", "primary_model_hash": sha256_file(p["a"]), "secondary_model_hash": sha256_file(p["b"]),
        "tertiary_model_hash": None, "interp_method": "Weighted sum", "multiplier": 0.4, "save_as_half": False,
        "custom_name": "", "config_source": 0, "bake_in_vae": "None", "discard_weights": "", "is_inpainting": False,
        "is_instruct_pix2pix": False}
    assert json.loads(metadata["sd_merge_models"]) == {
        sha256_file(p["a"]): {"name": "sub/a.safetensors", "legacy_hash": legacy_a1111_hash(p["a"]),
                              "sd_merge_recipe": None},
        sha256_file(p["b"]): {"name": "b.safetensors", "legacy_hash": legacy_a1111_hash(p["b"]),
                              "sd_merge_recipe": None},
        "f" * 64: {"name": "old"}}


def test_no_metadata_writes_none(models):
    folder, p = models
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, save_metadata=False)
    assert load_safetensors_metadata(result.path) == {}


def test_copy_config_from_a_b_or_c(models):
    folder, p = models
    (folder / "b.yaml").write_text("model: b\n")
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, custom_name="m")
    assert result.config_path == folder / "m.yaml" and result.config_path.read_text() == "model: b\n"
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, custom_name="n", config_source="Don't")
    assert result.config_path is None and not (folder / "n.yaml").exists()


def test_existing_output_is_replaced_as_a1111(models):
    folder, p = models
    (folder / "m.safetensors").write_bytes(b"old")
    merge_checkpoints(p["a"], p["b"], output_dir=folder, custom_name="m")
    assert UNET in load_file(folder / "m.safetensors")


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "Sum"}, "use one of: No interpolation, Weighted sum, Add difference"),
    ({"multiplier": 1.5}, "from 0 to 1"),
    ({"multiplier": float("nan")}, "from 0 to 1"),
    ({"method": "Add difference"}, r"requires a tertiary model \(C\)"),
    ({"secondary": None}, r"requires a secondary model \(B\)"),
    ({"secondary": "a"}, "A and B are the same file"),
    ({"method": "Add difference", "tertiary": "b"}, "B and C are the same file"),
    ({"checkpoint_format": "pt"}, "use one of: safetensors, ckpt"),
    ({"custom_name": "../x"}, "plain file name"),
    ({"custom_name": "a"}, "would replace its input"),
    ({"discard_weights": "("}, "not a valid regular expression"),
    ({"custom_name": "x" * 250}, "give a shorter custom name"),
    ({"config_source": "A"}, "Don't"),
])
def test_mistakes_are_refused_before_anything_is_written(models, kwargs, message):
    folder, p = models
    args = {"secondary": "b", **kwargs}
    secondary, tertiary = args.pop("secondary"), args.pop("tertiary", None)
    with pytest.raises(ValueError, match=message):
        merge_checkpoints(p["a"], p[secondary] if secondary else None, p[tertiary] if tertiary else None,
                          output_dir=folder, **args)
    assert files(folder) == ["a.safetensors", "b.safetensors", "c.safetensors"]


@pytest.mark.parametrize("role", ["secondary", "tertiary"])
def test_a_b_or_c_sharing_no_weight_with_a_is_refused_not_copied(models, role):
    # e.g. a LoRA picked as B: A1111 keeps every key of A, so the "merge" was A under a merged name
    folder, p = models
    save_file({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.ones(2, 2)},
              folder / "lora.safetensors")
    chosen = {"secondary": p["b"], "tertiary": p["c"], role: folder / "lora.safetensors"}
    with pytest.raises(ValueError, match=rf"{'B' if role == 'secondary' else 'C'} \('lora.safetensors'\) has none "
                                         r"of A's model weights .*lora_unet_down.* a copy of A"):
        merge_checkpoints(p["a"], output_dir=folder, method="Add difference", **chosen)
    assert files(folder) == ["a.safetensors", "b.safetensors", "c.safetensors", "lora.safetensors"]


def test_a_folder_that_cannot_be_written_is_refused_before_reading_any_tensor(models, monkeypatch):
    import os

    from mixkit.io.merge_inputs import CheckpointTensors

    folder, p = models
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if str(path) == str(folder) and mode & os.W_OK
                        else real_access(path, mode, **kw))  # root writes anywhere; a read-only mount is simulated
    monkeypatch.setattr(CheckpointTensors, "get", lambda self, key: pytest.fail("a tensor was read"))
    with pytest.raises(PermissionError, match="is not writable"):
        merge_checkpoints(p["a"], p["b"], output_dir=folder)


def test_non_finite_result_is_refused(models):
    folder, p = models
    save_file({**state(3.0), UNET: torch.full((2, 4, 1, 1), float("inf"))}, p["b"])
    with pytest.raises(ValueError, match=re.escape(UNET) + ".*NaN or infinite"):
        merge_checkpoints(p["a"], p["b"], output_dir=folder)
    assert len(files(folder)) == 3


def test_diffusers_folder_is_refused(models, tmp_path):
    folder, p = models
    with pytest.raises(ValueError, match="Convert the folder to a single file first"):
        merge_checkpoints(p["a"], tmp_path, output_dir=folder)


def test_interrupt_writes_nothing_and_progress_counts_keys(models):
    folder, p = models
    seen = []
    with pytest.raises(MergeInterrupted):
        merge_checkpoints(p["a"], p["b"], output_dir=folder, progress=lambda *step: seen.append(step),
                          should_stop=lambda: len(seen) >= 2)
    assert seen == [(1, 4, "Merging"), (2, 4, "Merging")] and len(files(folder)) == 3


def test_lightning_ckpt_inputs_are_read_safely(models):
    folder, p = models
    torch.save({"state_dict": state(5.0), "global_step": 10}, folder / "b.ckpt")
    result = merge_checkpoints(p["a"], folder / "b.ckpt", output_dir=folder, multiplier=0.5, custom_name="m")
    assert load_file(result.path)[UNET].flatten().tolist() == [3.0] * 8


@pytest.mark.parametrize("kind", ["pickle", "torch-zip"])
def test_unsafe_pickle_is_refused_before_reading_any_tensor(models, malicious_checkpoints, sentinel, kind):
    from mixkit.errors import UnsafeCheckpointError

    folder, p = models
    with pytest.raises(UnsafeCheckpointError):
        merge_checkpoints(p["a"], malicious_checkpoints[kind], output_dir=folder)
    assert not sentinel.exists() and len(files(folder)) == 3


def test_instruct_pix2pix_a_is_named_so(models):
    folder, p = models
    save_file(state(1.0, in_channels=8), p["a"])
    result = merge_checkpoints(p["a"], p["b"], output_dir=folder, multiplier=0.5)
    assert result.path.name == "0.5(a) + 0.5(b).instruct-pix2pix.safetensors" and result.is_instruct_pix2pix
