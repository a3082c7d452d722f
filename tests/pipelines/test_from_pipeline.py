"""from_pipeline shares the loaded model and takes from_pretrained's pipeline keywords, defaulting to the other's."""

from __future__ import annotations

import pytest

from pipelines.img2img import ImageToImage
from pipelines.params import GenerationLimits
from pipelines.txt2img import TextToImage


def test_without_keywords_everything_is_shared(sd1_pipe):
    edit = ImageToImage.from_pipeline(sd1_pipe)
    assert (edit.model, edit.limits, edit.session) == (sd1_pipe.model, sd1_pipe.limits, sd1_pipe.session)


def test_limits_apply_to_the_new_pipeline_only(sd1_pipe):
    """Was: TypeError "DiffusionPipelineBase.from_pipeline() got an unexpected keyword argument 'limits'"."""
    strict = TextToImage.from_pipeline(sd1_pipe, limits=GenerationLimits(max_batch_size=1))
    assert strict.model is sd1_pipe.model and strict.session is sd1_pipe.session
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 1\], got 2"):
        strict(prompt="a", steps=1, width=64, height=64, seed=1, batch_size=2)
    assert len(sd1_pipe(prompt="a", steps=1, width=64, height=64, seed=1, batch_size=2).images) == 2


def test_a_folder_gives_a_session_of_its_own_keeping_the_other_folder(sd1_pipe, tmp_path):
    base = TextToImage.from_pipeline(sd1_pipe, embeddings_dir=tmp_path / "emb")
    loras = ImageToImage.from_pipeline(base, lora_dir=tmp_path / "lora")
    assert loras.model is sd1_pipe.model and loras.limits is sd1_pipe.limits
    assert loras.session is not base.session
    assert (loras.session.embeddings_dir, loras.session.lora_dir) == (tmp_path / "emb", tmp_path / "lora")
    assert (base.session.embeddings_dir, base.session.lora_dir) == (tmp_path / "emb", None)  # the other is unchanged


def test_bad_keywords_are_refused_naming_the_valid_ones(sd1_pipe, tmp_path):
    with pytest.raises(TypeError, match=r"ImageToImage\.from_pipeline got unexpected keyword argument\(s\) "
                                        r"\['limit'\]\. Valid keywords: limits, embeddings_dir, lora_dir, "
                                        r"hypernetwork_dir, session\."):
        ImageToImage.from_pipeline(sd1_pipe, limit=GenerationLimits())
    with pytest.raises(TypeError, match=r"\['safety_checker'\]; safety_checker: mixkit loads no safety checker"):
        ImageToImage.from_pipeline(sd1_pipe, safety_checker=None)  # diffusers' usual from_pipeline call
    with pytest.raises(ValueError, match=r"got session= and lora_dir=; the folders are the session's"):
        ImageToImage.from_pipeline(sd1_pipe, session=sd1_pipe.session, lora_dir=tmp_path)
    with pytest.raises(TypeError, match=r"ImageToImage\.from_pipeline takes a loaded mixkit pipeline .*got str; "
                                        r"to load a model use ImageToImage\.from_pretrained"):
        ImageToImage.from_pipeline("runwayml/stable-diffusion-v1-5")


def test_a_hypernetwork_folder_is_a_session_folder_too(sd1_pipe, tmp_path):
    (tmp_path / "hn").mkdir()
    with_hypernetworks = TextToImage.from_pipeline(sd1_pipe, hypernetwork_dir=tmp_path / "hn")
    assert with_hypernetworks.session is not sd1_pipe.session
    assert ImageToImage.from_pipeline(with_hypernetworks, lora_dir=tmp_path).session.hypernetwork_dir == tmp_path / "hn"
    assert sd1_pipe.session.hypernetwork_dir is None
