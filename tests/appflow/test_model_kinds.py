"""Role checks at build time: shipped mixkit-tiny names are checked like the folders they stand for."""

from __future__ import annotations

import shutil

import pytest

from appflow import Appflow, ModelCache
from appflow.model_kinds import local_config
from mixkit.tiny.shipped import SHIPPED_MODELS, shipped_model_path

WRONG_ROLES = [
    # (app, shipped model given for its only role, what its config says it is)
    ("text2image_generation", "mixkit-tiny-blip2", "mixkit-vlm"),
    ("text2image_generation", "mixkit-tiny-clip", "clip"),
    ("image2text_generation", "mixkit-tiny-clip", "clip"),
    ("image2text_generation", "mixkit-tiny-sd", "StableDiffusionPipeline"),
    ("zero_shot_classification", "mixkit-tiny-blip2", "mixkit-vlm"),
]


@pytest.mark.parametrize("name", SHIPPED_MODELS.names())
def test_every_shipped_name_reads_the_config_of_its_shipped_folder(name):
    found = local_config(name)
    assert found is not None, f"{name} was treated as an uncached hub id"
    assert found == local_config(str(shipped_model_path(name)))


@pytest.mark.parametrize("app, name, identity", WRONG_ROLES)
def test_a_shipped_model_in_the_wrong_role_is_refused_when_the_flow_is_built(app, name, identity):
    cache = ModelCache()
    with pytest.raises(ValueError) as by_name:
        Appflow(app, models=[name], cache=cache)
    with pytest.raises(ValueError) as by_folder:
        Appflow(app, models=[str(shipped_model_path(name))], cache=cache)
    assert f"{name!r} is a {identity!r} model" in str(by_name.value)
    # The same message as for the folder, with the name the user typed in place of the path.
    assert str(by_name.value) == str(by_folder.value).replace(repr(str(shipped_model_path(name))), repr(name))
    assert cache.loads == 0


@pytest.mark.parametrize("app, name", [("text2image_generation", "mixkit-tiny-sd"),
                                       ("image2text_generation", "mixkit-tiny-blip2"),
                                       ("zero_shot_classification", "mixkit-tiny-clip")])
def test_a_shipped_model_in_its_own_role_is_accepted(app, name):
    assert list(Appflow(app, models=[name], cache=ModelCache()).models.values()) == [name]


def test_a_local_folder_named_like_a_shipped_model_wins(tmp_path, monkeypatch):
    """As in `resolve_model_source`: the user's own folder is what loads, so it is what is checked."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mixkit-tiny-sd").mkdir()
    shutil.copy(shipped_model_path("mixkit-tiny-clip") / "config.json", tmp_path / "mixkit-tiny-sd")
    with pytest.raises(ValueError, match="'mixkit-tiny-sd' is a 'clip' model"):
        Appflow("text2image_generation", models=["mixkit-tiny-sd"], cache=ModelCache())


# -- loaded objects are checked against what the role needs ----------------------------------------
@pytest.fixture(scope="module")
def loaded_sam(tiny_sam_dir):
    from appflow import MODEL_KINDS

    return MODEL_KINDS.get("sam").load(str(tiny_sam_dir), "cpu", None)


def test_a_loaded_sam_fits_the_segmenter_role_but_not_the_detector_role(loaded_sam, tiny_dino_dir):
    cache = ModelCache()
    with pytest.raises(TypeError, match="model role 'detector' needs a Grounding DINO detector.*got ProcessorModel of "
                                        "SamModel with SamProcessor \\(a 'sam' model\\)"):
        Appflow("openset_det_sam", models={"detector": loaded_sam, "segmenter": loaded_sam}, cache=cache)
    assert Appflow("openset_det_sam", models={"detector": tiny_dino_dir, "segmenter": loaded_sam}, cache=cache)
    assert cache.loads == 0


def test_the_llm_role_takes_a_reply_function_or_a_model_with_its_tokenizer_not_a_bare_model(tiny_lm_dir):
    from appflow import MODEL_KINDS
    from appflow.loaders import ProcessorModel

    loaded = MODEL_KINDS.get("causal-lm").load(str(tiny_lm_dir), "cpu", None)
    cache = ModelCache()
    with pytest.raises(TypeError, match="model role 'llm' needs an instruction-following causal language model.*"
                                        "needs its processor or tokenizer: pass appflow.loaders.ProcessorModel"):
        Appflow("dialog_image_editing", models={"llm": loaded.model}, cache=cache)  # a bare AutoModelForCausalLM
    assert Appflow("dialog_image_editing", models={"llm": loaded}, cache=cache)
    assert Appflow("dialog_image_editing", models={"llm": ProcessorModel(loaded.model, loaded.processor, "mine")},
                   cache=cache)
    assert Appflow("dialog_image_editing", models={"llm": lambda prompt: '{"what": "a", "into": "b"}'}, cache=cache)
    with pytest.raises(TypeError, match="needs an instruction-following"):
        Appflow("dialog_image_editing", models={"llm": ProcessorModel(loaded.model, object(), "no tokenizer")},
                cache=cache)
