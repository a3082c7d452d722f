"""A refiner's config folder in web terms (webui/refiner_config_folders.py): checks answer in the name the request or
the web UI picked, and a refiner file its configs do not describe is explained in request terms, never with the
Python API's `refiner_config_dir=FOLDER` or the CLI's `--refiner-config-dir`."""

from __future__ import annotations

import pickle

import pytest

from mixkit.errors import ConfigMismatchError
from pipelines.refiner_configs import RefinerConfigMismatchError
from webui.checkpoints import CheckpointCatalog
from webui.refiner_config_folders import named_as_picked, refiner_errors_in_web_terms, web_refiner_advice


@pytest.fixture
def catalog(tmp_path):
    """A models folder with two diffusers folders (one a config-only copy) and a refiner file."""
    models = tmp_path / "models"
    for folder in ("xl-configs", "sub/full"):
        (models / folder / "unet").mkdir(parents=True)
        (models / folder / "unet" / "config.json").write_text("{}")
    (models / "refiner.safetensors").write_bytes(b"weights")
    return CheckpointCatalog(models_dir=models)


def test_a_checks_server_path_becomes_the_name_picked():
    message = "refiner_config_dir='/srv/models/sub/full' describes SD 1.x but the refiner 'r' is SDXL: give ..."
    assert named_as_picked(message, "/srv/models/sub/full", "sub_full") == (
        "refiner_config_dir='sub_full' describes SD 1.x but the refiner 'r' is SDXL: give ...")
    assert named_as_picked(message, None, "sub_full") == message  # no folder given: nothing to rename
    assert named_as_picked(message, "/srv/models/sub/full", "None") == message  # the dropdown's "no folder"


@pytest.mark.parametrize("read_with, configs", [
    ("refiner_config_dir", "the configs of the diffusers folder named in refiner_config_dir"),
    ("config_dir", "the configs folder this server's model was loaded with (its --config-dir)"),
    ("shipped", "the shipped configs of its family"),
])
def test_the_advice_names_the_requests_field_and_the_servers_folders(catalog, read_with, configs):
    assert web_refiner_advice(read_with, catalog) == (
        f"The refiner is a single file, read with {configs}. If it is complete, it has another architecture: name the "
        "diffusers folder whose configs match it in the request's refiner_config_dir (the web UI's Refiner > Config "
        "folder), a diffusers folder among this server's models (GET /mixkit/v1/refiner-config-folders; this server's "
        "are: sub/full, xl-configs), or pick that diffusers folder as the refiner itself.")


def test_a_server_without_diffusers_folders_says_so(tmp_path):
    (tmp_path / "models").mkdir()
    advice = web_refiner_advice("shipped", CheckpointCatalog(models_dir=tmp_path / "models"))
    assert ("(GET /mixkit/v1/refiner-config-folders; this server has none; the operator can add one to its models "
            "folder)") in advice
    assert "this server has none" in web_refiner_advice("shipped", None)


def test_a_long_folder_list_is_cut(tmp_path):
    models = tmp_path / "models"
    for index in range(10):
        (models / f"f{index}" / "unet").mkdir(parents=True)
        (models / f"f{index}" / "unet" / "config.json").write_text("{}")
    advice = web_refiner_advice("shipped", CheckpointCatalog(models_dir=models))
    assert "this server's are: f0, f1, f2, f3, f4, f5, f6, f7 and 2 more)" in advice


def test_a_jobs_refiner_mismatch_gets_the_web_advice_and_keeps_the_mismatch(catalog):
    def job(control, on_step):
        raise RefinerConfigMismatchError("refiner.safetensors does not match the 'sd15' configs: model.x is missing",
                                         "... as refiner_config_dir=FOLDER (mixkit generate --refiner-config-dir)",
                                         "shipped")

    with pytest.raises(ConfigMismatchError) as caught:
        refiner_errors_in_web_terms(job, catalog)(None, None)
    assert type(caught.value) is ConfigMismatchError
    assert str(caught.value) == ("refiner.safetensors does not match the 'sd15' configs: model.x is missing. "
                                 + web_refiner_advice("shipped", catalog))
    assert "FOLDER" not in str(caught.value) and "--refiner-config-dir" not in str(caught.value)


def test_other_job_outcomes_pass_through(catalog):
    assert refiner_errors_in_web_terms(lambda control, on_step: (control, on_step), catalog)(1, 2) == (1, 2)

    def base_model_mismatch(control, on_step):  # the checkpoint's own load: not the refiner's, its advice is kept
        raise ConfigMismatchError("model.safetensors does not match", "give --config-dir")

    with pytest.raises(ConfigMismatchError, match="give --config-dir"):
        refiner_errors_in_web_terms(base_model_mismatch, catalog)(None, None)


def test_the_refiner_error_survives_pickling():
    error = RefinerConfigMismatchError("mismatch", "advice", "config_dir")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, RefinerConfigMismatchError) and str(copy) == "mismatch. advice"
