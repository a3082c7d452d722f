"""Checkpoint names, titles and aliases as A1111's sd_models.CheckpointInfo makes them.

Reference (A1111 modules/sd_models.py): `name` is the path relative to the checkpoints dir with extension;
`model_name = splitext(name.replace("/", "_"))[0]`; `title = f"{name} [{shorthash}]"` once the sha256 is
known; `ids = [hash (legacy), model_name, title, name, name_for_extra, f"{name} [{hash}]"]` plus
`[shorthash, sha256, f"{name} [{shorthash}]", f"{name_for_extra} [{shorthash}]"]`; list_models skips
`.vae.ckpt`/`.vae.safetensors`; get_closet_checkpoint_match retries without a trailing " [checksum]".
"""

from __future__ import annotations

import hashlib

import pytest

from mixkit.io.hashing import a1111_model_hash
from webui.checkpoints import CheckpointCatalog


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


@pytest.fixture
def models(tmp_path):
    folder = tmp_path / "md"
    for name in ("aaa", "bbb"):
        (folder / name / "unet").mkdir(parents=True)
        (folder / name / "unet" / "config.json").write_text("{}")
        (folder / name / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"weights")
    (folder / "ccc.safetensors").write_bytes(b"weights c" * 300_000)  # > 1 MiB: a real legacy hash window
    (folder / "ccc.vae.safetensors").write_bytes(b"a VAE next to it")
    (folder / "sub").mkdir()
    (folder / "sub" / "beta.safetensors").write_bytes(b"weights beta")
    return folder


def test_titles_are_names_with_extension_and_subfolders_are_listed(models):
    catalog = CheckpointCatalog(models_dir=models)
    assert catalog.titles() == ["aaa", "bbb", "ccc.safetensors", "sub/beta.safetensors"]  # no .vae. file
    beta = catalog.find("sub/beta.safetensors")
    assert (beta.model_name, beta.name_for_extra) == ("sub_beta", "beta")


def test_title_carries_the_short_hash_once_known_and_every_a1111_alias_finds_it(models):
    catalog = CheckpointCatalog(models_dir=models)
    short = a1111_model_hash(models / "ccc.safetensors")  # what loading the model does
    sha256 = hashlib.sha256((models / "ccc.safetensors").read_bytes()).hexdigest()
    assert short == sha256[:10]
    assert catalog.titles()[2] == f"ccc.safetensors [{short}]"
    entry = catalog.entries()[2]
    for alias in (f"ccc.safetensors [{short}]", "ccc.safetensors", "ccc", short, sha256, f"ccc [{short}]",
                  "ccc.safetensors [0123456789]"):  # a stale remembered hash: looked up again without it
        assert catalog.find(alias) == entry, alias
    assert entry.as_a1111()["title"] == f"ccc.safetensors [{short}]"


def test_legacy_8_digit_hash_finds_the_file(models):
    catalog = CheckpointCatalog(models_dir=models)
    data = (models / "ccc.safetensors").read_bytes()
    legacy = hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]  # A1111's model_hash()
    assert catalog.find(legacy).name == "ccc.safetensors"
    assert catalog.find(f"ccc.safetensors [{legacy}]").name == "ccc.safetensors"


def test_same_stem_in_two_formats_has_distinct_stable_titles(tmp_path):
    folder = tmp_path / "md2"
    folder.mkdir()
    (folder / "model.ckpt").write_bytes(b"ckpt")
    (folder / "model.safetensors").write_bytes(b"safetensors")
    catalog = CheckpointCatalog(models_dir=folder)
    before = {entry.title: entry.source for entry in catalog.entries()}
    assert before == {"model.ckpt": str(folder / "model.ckpt"), "model.safetensors": str(folder / "model.safetensors")}
    (folder / "model" / "unet").mkdir(parents=True)  # adding a diffusers folder named like them
    (folder / "model" / "unet" / "config.json").write_text("{}")
    (folder / "model" / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"weights")
    catalog.refresh()
    after = {entry.title: entry.source for entry in catalog.entries()}
    assert {title: after[title] for title in before} == before  # no title moved to another file
    assert after["model"] == str(folder / "model")
    assert catalog.find("model").source == str(folder / "model")  # the folder's own title wins over the stems


def test_a_stem_shared_by_two_files_is_refused_as_ambiguous(tmp_path):
    # A1111 takes whichever file it registered last; naming both keeps a remembered setting from drifting
    (tmp_path / "model.ckpt").write_bytes(b"ckpt")
    (tmp_path / "model.safetensors").write_bytes(b"safetensors")
    with pytest.raises(ValueError, match="ambiguous.*model.ckpt, model.safetensors"):
        CheckpointCatalog(models_dir=tmp_path).find("model")


def test_unknown_and_path_like_names_are_refused(models):
    catalog = CheckpointCatalog(models_dir=models)
    for title in ("../../etc/passwd", str(models / "ccc.safetensors"), "nope", ""):
        with pytest.raises(ValueError, match="Unknown checkpoint"):
            catalog.find(title)


def test_sd_models_filename_is_absolute_as_a1111s(tmp_path, monkeypatch):
    from webui.checkpoints import CheckpointEntry

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.safetensors").write_bytes(b"")
    monkeypatch.chdir(tmp_path)  # a server started with a relative --models-dir
    entry = CheckpointEntry(name="tiny.safetensors", model_name="tiny", source="models/tiny.safetensors")
    assert entry.as_a1111()["filename"] == str(tmp_path / "models" / "tiny.safetensors")
    hub = CheckpointEntry(name="org/model", model_name="org_model", source="org/model")
    assert hub.as_a1111()["filename"] == "org/model"  # a hub id is no file: given as it is


def _configs_only(folder):
    """A diffusers folder's configs and tokenizer files, no weights (a refiner's config folder)."""
    for part in ("unet", "vae", "text_encoder_2", "tokenizer_2", "scheduler"):
        (folder / part).mkdir(parents=True)
    (folder / "model_index.json").write_text("{}")
    (folder / "unet" / "config.json").write_text("{}")
    (folder / "tokenizer_2" / "vocab.json").write_text("{}")
    return folder


def test_a_config_only_folder_is_no_checkpoint_but_a_config_folder(models):
    """Left out of every checkpoint list and refused as a checkpoint saying what it is; still found as a config
    folder, as are the diffusers folders with weights. Weights in any component (or a variant, or .bin) make it a
    checkpoint again once the list is refreshed."""
    _configs_only(models / "xl-configs")
    catalog = CheckpointCatalog(models_dir=models)
    assert catalog.titles() == ["aaa", "bbb", "ccc.safetensors", "sub/beta.safetensors"]
    assert [entry.as_a1111()["title"] for entry in catalog.entries()] == catalog.titles()  # /sdapi/v1/sd-models
    assert [entry.title for entry in catalog.config_folders()] == ["aaa", "bbb", "xl-configs"]
    assert catalog.find_config_folder("xl-configs").source == str(models / "xl-configs")
    assert catalog.find_config_folder("xl-configs").config_only and not catalog.find_config_folder("aaa").config_only
    assert catalog.find_config_folder("ccc.safetensors") is None  # a file holds no configs
    with pytest.raises(ValueError) as caught:
        catalog.find("xl-configs")
    assert str(caught.value) == (
        "'xl-configs' is the folder 'xl-configs', which holds configs only (no weights): it is no checkpoint, only a "
        "refiner's config folder (refiner_config_dir, the Refiner's Config folder). Pick a checkpoint; available: "
        "aaa, bbb, ccc.safetensors, sub/beta.safetensors.")
    (models / "xl-configs" / "vae" / "diffusion_pytorch_model.fp16.bin").write_bytes(b"weights")
    assert "xl-configs" not in catalog.titles()  # until refreshed
    catalog.refresh()
    assert "xl-configs" in catalog.titles() and catalog.find("xl-configs").source == str(models / "xl-configs")


def test_an_operators_config_only_source_is_no_checkpoint_either(tmp_path):
    configs = _configs_only(tmp_path / "configs")
    catalog = CheckpointCatalog(sources=[str(configs), "org/hub-model"])
    assert catalog.titles() == ["hub-model"]  # a hub id is no folder on disk: listed as before
    assert [entry.name for entry in catalog.config_folders()] == ["configs"]
