"""A1111's Settings > Infotext switches (pipelines/infotext_options.py): each leaves out exactly its keys, the image
stays the same, defaults are A1111's, and the checks name the bad value."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import torch

from pipelines.infotext import parse_infotext
from pipelines.infotext_options import InfotextOptions

SMALL = dict(width=32, height=32, steps=2, seed=4, prompt="a red circle")
VAE = {"vae_name": "kl-f8.safetensors", "vae_hash": "0123abcd"}


def test_defaults_are_a1111s():
    """modules/shared_options.py (infotext section), the Lora extension's and Textual Inversion's options."""
    assert asdict(InfotextOptions()) == {
        "add_model_name_to_info": True, "add_model_hash_to_info": True, "add_vae_name_to_info": True,
        "add_vae_hash_to_info": True, "add_user_name_to_info": False, "add_version_to_infotext": True,
        "lora_add_hashes_to_infotext": True, "textual_inversion_add_hashes_to_infotext": True,
        "lora_bundled_ti_to_infotext": True}


@pytest.fixture
def with_vae(sd1_pipe, monkeypatch):
    """The tiny model as if an external VAE were loaded (its name and hash are what the loader records)."""
    for key, value in VAE.items():
        monkeypatch.setitem(sd1_pipe.model.extras, key, value)
    return sd1_pipe


@pytest.mark.parametrize("option, key", [
    ("add_model_name_to_info", "Model"), ("add_model_hash_to_info", "Model hash"),
    ("add_vae_name_to_info", "VAE"), ("add_vae_hash_to_info", "VAE hash"),
    ("add_version_to_infotext", "Version"),
])
def test_each_switch_leaves_out_its_key_only(with_vae, option, key):
    full = with_vae(**SMALL)
    written = parse_infotext(full.infotexts[0])
    assert (written["Model"], written["VAE"], written["VAE hash"]) == (with_vae.model.name, *VAE.values())
    private = with_vae(**SMALL, infotext_options={option: False})
    left = parse_infotext(private.infotexts[0])
    assert key not in left
    assert {k: v for k, v in written.items() if k != key} == left
    assert np.array_equal(np.asarray(private.images[0]), np.asarray(full.images[0]))  # the image is the same


def test_user_is_written_last_only_when_asked_for(sd1_pipe):
    assert "User" not in parse_infotext(sd1_pipe(**SMALL, user="alice").infotexts[0])  # off by default
    written = sd1_pipe(**SMALL, user="alice", infotext_options=InfotextOptions(add_user_name_to_info=True)).infotexts[0]
    assert written.endswith(", Version: mixkit 0.1.0, User: alice")  # A1111's order: Version, then User
    nobody = sd1_pipe(**SMALL, infotext_options=InfotextOptions(add_user_name_to_info=True)).infotexts[0]
    assert "User" not in parse_infotext(nobody)  # no authenticated user: nothing to write


@pytest.mark.parametrize("keywords, error, message", [
    ({"infotext_options": {"add_model_name_to_info": "no"}}, TypeError, "add_model_name_to_info must be True or False"),
    ({"infotext_options": {"add_model_nam_to_info": False}}, TypeError,
     r"unknown option\(s\) \['add_model_nam_to_info'\]"),
    ({"infotext_options": ["add_model_name_to_info"]}, TypeError, "must be an InfotextOptions or a dict"),
    ({"user": "eve\nSteps: 99"}, ValueError, "printable characters"),
    ({"user": 7}, TypeError, "user must be a string"),
])
def test_bad_settings_are_refused_before_any_work(sd1_pipe, keywords, error, message):
    with pytest.raises(error, match=message):
        sd1_pipe(**SMALL, **keywords)


@pytest.fixture
def bundling_lora(tmp_path):
    """A LoRA file bundling the vectors of the word "shinystyle", and an embeddings folder with "glowword"."""
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(3)
    save_file({"bundle_emb.shinystyle.string_to_param.*": torch.randn(2, 32, generator=generator)},
              str(tmp_path / "bundle.safetensors"))
    (tmp_path / "embeddings").mkdir()
    save_file({"emb_params": torch.randn(1, 32, generator=generator)},
              str(tmp_path / "embeddings" / "glowword.safetensors"))
    return tmp_path


def test_lora_and_ti_hash_switches(sd1_pipe, bundling_lora):
    """A1111: `lora_add_hashes_to_infotext` drops "Lora hashes"; `textual_inversion_add_hashes_to_infotext` drops "TI
    hashes"; `lora_bundled_ti_to_infotext` off drops the bundled word's "word: lora" entry (A1111 writes "word: "
    with an empty hash there) and keeps the folder embedding's."""
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, embeddings_dir=bundling_lora / "embeddings")
    call = dict(SMALL, prompt="a cat, shinystyle, glowword", loras=[str(bundling_lora / "bundle.safetensors")])

    def written(**options):
        return parse_infotext(pipe(**call, infotext_options=InfotextOptions(**options)).infotexts[0])

    full = written()
    assert full["Lora hashes"].startswith("bundle: ")
    assert full["TI hashes"].startswith("shinystyle: bundle, glowword: ")
    assert "Lora hashes" not in written(lora_add_hashes_to_infotext=False)
    assert written(lora_add_hashes_to_infotext=False)["TI hashes"] == full["TI hashes"]
    without_bundled = written(lora_bundled_ti_to_infotext=False)
    assert without_bundled["TI hashes"] == full["TI hashes"].removeprefix("shinystyle: bundle, ")
    assert without_bundled["Lora hashes"] == full["Lora hashes"]
    assert "TI hashes" not in written(textual_inversion_add_hashes_to_infotext=False)
    only_bundled = dict(call, prompt="a cat, shinystyle")
    assert "TI hashes" not in parse_infotext(pipe(**only_bundled, infotext_options={
        "lora_bundled_ti_to_infotext": False}).infotexts[0])  # no entry left: no key


def test_a_hires_fix_honours_the_switches_in_both_passes(sd1_pipe, bundling_lora):
    """The second pass takes the call's switches: a LoRA only in the hires prompt stays out of `Lora hashes` when
    they are off, and `User` stays the last key after the passes' keys are merged."""
    from pipelines.hires import HiresFix
    from pipelines.txt2img import TextToImage

    hires = HiresFix(TextToImage(sd1_pipe.model, lora_dir=bundling_lora))
    call = dict(SMALL, width=32, height=32, hr_scale=1.5, denoising_strength=0.6, sampler="Euler", user="alice",
                prompt="a cat", hr_prompt="a cat <lora:bundle:1>")
    full = hires(**call, infotext_options={"add_user_name_to_info": True}).infotexts[0]
    assert parse_infotext(full)["Lora hashes"].startswith("bundle: ") and full.endswith(", User: alice")
    private = hires(**call, infotext_options={"add_user_name_to_info": True, "lora_add_hashes_to_infotext": False,
                                              "add_version_to_infotext": False}).infotexts[0]
    assert not {"Lora hashes", "Version"} & set(parse_infotext(private)) and private.endswith(", User: alice")


def test_hires_keeps_version_and_user_last():
    """The hires fix merges its second pass's hashes into the first pass's infotext; A1111's last keys stay last."""
    from pipelines.hires import with_second_pass_extras

    first = "a cat\nSteps: 2, Seed: 4, Lora hashes: \"a: 1\", Version: mixkit 0.1.0, User: alice"
    second = "a cat\nSteps: 2, Seed: 4, Lora hashes: \"b: 2\", TI hashes: \"w: 3\", Version: mixkit 0.1.0, User: alice"
    assert with_second_pass_extras(first, second) == ('a cat\nSteps: 2, Seed: 4, Lora hashes: "a: 1, b: 2", '
                                                      'TI hashes: "w: 3", Version: mixkit 0.1.0, User: alice')
