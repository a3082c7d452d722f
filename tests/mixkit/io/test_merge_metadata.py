"""A1111's merged-file names and the `sd_merge_models` history of merges of merges."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from mixkit.io.hashing import legacy_a1111_hash, sha256_file
from mixkit.io.merge_inputs import MergeSource
from mixkit.io.merge_metadata import default_merge_name, merged_models_entry


@pytest.mark.parametrize("method, multiplier, expected", [
    ("Weighted sum", 0.3, "0.7(sub_a) + 0.3(b)"),
    ("Weighted sum", 1 / 3, "0.67(sub_a) + 0.33(b)"),
    ("Weighted sum", 0.0, "1.0(sub_a) + 0.0(b)"),
    ("Add difference", 0.25, "sub_a + 0.25(b - c)"),
    ("No interpolation", 0.3, "sub_a"),
])
def test_default_names_follow_a1111(tmp_path, method, multiplier, expected):
    a, b, c = (MergeSource(tmp_path / name, name) for name in ("sub/a.safetensors", "b.ckpt", "c.safetensors"))
    assert default_merge_name(method, multiplier, a, b, c) == expected


def test_sd_merge_models_carries_the_history_of_a_merged_source(tmp_path):
    earlier = {"e" * 64: {"name": "grandparent.safetensors", "legacy_hash": "12345678", "sd_merge_recipe": None}}
    recipe = {"type": "webui", "interp_method": "Weighted sum"}
    file = tmp_path / "merged.safetensors"
    save_file({"w": torch.ones(1)}, file, metadata={"sd_merge_recipe": json.dumps(recipe),
                                                    "sd_merge_models": json.dumps(earlier)})
    plain = tmp_path / "plain.ckpt"
    torch.save({"w": torch.ones(1)}, plain)
    models = merged_models_entry([MergeSource(file, "merged.safetensors"), MergeSource(plain, "plain.ckpt")])
    assert models == {
        sha256_file(file): {"name": "merged.safetensors", "legacy_hash": legacy_a1111_hash(file),
                            "sd_merge_recipe": recipe},
        **earlier,
        sha256_file(plain): {"name": "plain.ckpt", "legacy_hash": legacy_a1111_hash(plain), "sd_merge_recipe": None},
    }
    assert list(models) == [sha256_file(file), "e" * 64, sha256_file(plain)]
