"""The families a refiner_config_dir check compares (pipelines/refiner_families.py): a `.ckpt`'s from its keys as a
`.safetensors`' from its header, and each family read once per version of its file or configs folder."""

from __future__ import annotations

import os
import shutil

import pytest

from mixkit.models.diffusion import ModelFamily


@pytest.fixture(scope="module")
def refiner_files(tiny_sd1_dir, tiny_sdxl_refiner_dir, tmp_path_factory):
    """The tiny SD1 model and the tiny SDXL refiner as `.safetensors` and as A1111-style `.ckpt` files (weights under
    "state_dict", next to bookkeeping)."""
    import torch
    from safetensors.torch import load_file

    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

    root = tmp_path_factory.mktemp("refiner-families")
    files = {}
    for name, folder in (("sd1", tiny_sd1_dir), ("xl-refiner", tiny_sdxl_refiner_dir)):
        save_ldm_checkpoint(load_diffusion_model(folder), root / f"{name}.safetensors")
        torch.save({"state_dict": load_file(root / f"{name}.safetensors"), "global_step": 1}, root / f"{name}.ckpt")
        files[name] = root / f"{name}.safetensors"
        files[f"{name}.ckpt"] = root / f"{name}.ckpt"
    return files


@pytest.mark.parametrize("name, family", [("sd1", ModelFamily.SD1), ("sd1.ckpt", ModelFamily.SD1),
                                          ("xl-refiner", ModelFamily.SDXL_REFINER),
                                          ("xl-refiner.ckpt", ModelFamily.SDXL_REFINER)])
def test_the_family_of_a_safetensors_or_ckpt_file(refiner_files, name, family):
    from pipelines.refiner_families import single_file_family

    assert single_file_family(refiner_files[name]) is family


def _counting(monkeypatch, module, name):
    """`module.name` wrapped to count its calls."""
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _touch(path, seconds_later: int) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds_later * 1_000_000_000))


def test_a_configs_folder_is_read_once_per_version(tiny_sd1_dir, tmp_path, monkeypatch):
    from mixkit.models.diffusion import single_file_configs
    from pipelines.refiner_families import configs_family

    folder = shutil.copytree(tiny_sd1_dir, tmp_path / "configs")
    reads = _counting(monkeypatch, single_file_configs, "read_model_configs")
    assert [configs_family(folder) for _ in range(3)] == [ModelFamily.SD1] * 3
    assert len(reads) == 1
    _touch(folder / "unet" / "config.json", 1)  # an edited config is read again
    assert configs_family(folder) is ModelFamily.SD1 and len(reads) == 2
    _touch(folder / "tokenizer" / "tokenizer.json", 1)  # so is an edited tokenizer
    assert configs_family(folder) is ModelFamily.SD1 and len(reads) == 3
    assert configs_family(folder) is ModelFamily.SD1 and len(reads) == 3


def test_a_configs_folder_that_failed_is_read_again_once_fixed(tiny_sd1_dir, tmp_path, monkeypatch):
    from mixkit.models.diffusion import single_file_configs
    from pipelines.refiner_families import configs_family

    folder = shutil.copytree(tiny_sd1_dir, tmp_path / "configs")
    shutil.move(folder / "tokenizer", tmp_path / "tokenizer")
    reads = _counting(monkeypatch, single_file_configs, "read_model_configs")
    for _ in range(2):
        with pytest.raises(FileNotFoundError, match="found 1 text encoder and 0 tokenizer folders"):
            configs_family(folder)
    shutil.move(tmp_path / "tokenizer", folder / "tokenizer")
    assert configs_family(folder) is ModelFamily.SD1
    assert len(reads) == 3  # the failures were not remembered


def test_a_refiner_file_is_read_once_per_version(refiner_files, tmp_path, monkeypatch):
    from mixkit.io import key_shapes
    from pipelines.refiner_families import single_file_family

    file = tmp_path / "refiner.ckpt"
    shutil.copyfile(refiner_files["sd1.ckpt"], file)
    reads = _counting(monkeypatch, key_shapes, "checkpoint_shapes")
    assert [single_file_family(file) for _ in range(3)] == [ModelFamily.SD1] * 3
    assert len(reads) == 1
    shutil.copyfile(refiner_files["xl-refiner.ckpt"], file)  # replaced by a file of another family
    _touch(file, 1)
    assert single_file_family(file) is ModelFamily.SDXL_REFINER and len(reads) == 2


def test_repeated_checks_of_a_refiner_config_dir_read_nothing_again(tiny_sd1_dir, refiner_files, tmp_path,
                                                                     monkeypatch):
    """The API's conversion, the pipeline's check and each plot cell check the same refiner and folder."""
    from mixkit.io import key_shapes
    from mixkit.models.diffusion import single_file_configs
    from pipelines.refiner_configs import check_refiner_config_dir

    folder = shutil.copytree(tiny_sd1_dir, tmp_path / "configs")
    file = shutil.copyfile(refiner_files["sd1.ckpt"], tmp_path / "refiner.ckpt")
    folder_reads = _counting(monkeypatch, single_file_configs, "read_model_configs")
    file_reads = _counting(monkeypatch, key_shapes, "checkpoint_shapes")
    for _ in range(4):
        check_refiner_config_dir(str(file), str(folder))
    assert (len(folder_reads), len(file_reads)) == (1, 1)
