"""LoRAs through the text-to-image pipeline: from parameters, from prompt tags, always removed."""

import numpy as np
import pytest
import torch

SMALL = dict(width=64, height=64, steps=3, seed=4, prompt="a red circle")


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory, sd1_pipe):
    """A kohya-format LoRA on every attention projection of the tiny UNet, written by hand."""
    from mixkit.testing.tiny_lora import write_attention_lora

    folder = tmp_path_factory.mktemp("loras")
    write_attention_lora(sd1_pipe.model.unet, folder / "shiny.safetensors")
    return folder


def pixels(result):
    return np.asarray(result.images[0]).astype(np.int16)


def test_lora_from_parameters_and_from_prompt_tag_agree_and_are_removed(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    plain = pipe(**SMALL)
    by_param = pipe(loras=[str(lora_dir / "shiny.safetensors") + ":0.8"], **SMALL)
    by_tag = pipe(**{**SMALL, "prompt": "a red circle <lora:shiny:0.8>"})
    assert np.abs(pixels(plain) - pixels(by_param)).max() > 0
    assert np.array_equal(pixels(by_param), pixels(by_tag))
    assert "Lora hashes: \"shiny: " in by_tag.infotexts[0] or "Lora hashes: shiny: " in by_tag.infotexts[0]
    assert by_tag.infotexts[0].startswith("a red circle <lora:shiny:0.8>\n")  # tags stay in the recorded prompt
    # A LoRA passed outside the prompt is recorded in it as a tag, so pasting the infotext redoes it.
    assert by_param.infotexts[0].startswith("a red circle <lora:shiny:0.8>\n")
    assert "RNG: CPU" in by_param.infotexts[0]  # A1111 reads a missing RNG key as GPU noise
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert np.array_equal(pixels(plain), pixels(pipe(**SMALL)))


def test_strength_zero_is_a_no_op(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    assert np.array_equal(pixels(pipe(**SMALL)), pixels(pipe(**{**SMALL, "prompt": "a red circle <lora:shiny:0>"})))


def test_unknown_lora_tag_is_a_clear_error_and_the_model_is_untouched(sd1_pipe, lora_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    before = {k: v.clone() for k, v in pipe.model.unet.state_dict().items()}
    with pytest.raises((ValueError, FileNotFoundError, KeyError), match="nothere"):
        pipe(**{**SMALL, "prompt": "x <lora:nothere:1>"})
    after = pipe.model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_vectors_bundled_in_a_lora_act_as_an_embedding_only_while_it_is_applied(sd1_pipe, tmp_path):
    """A bundled word reads exactly what an embeddings-folder file with the same vectors gives, and is plain
    text again once the LoRA is off. A1111 writes the word in `TI hashes` with the LoRA's name for its hash
    (`BundledTIHash(name)`, printed as the name under its default `lora_bundled_ti_to_infotext`): "word: lora"."""
    from safetensors.torch import save_file

    from pipelines.txt2img import TextToImage

    vectors = torch.randn(2, 32, generator=torch.Generator().manual_seed(3))
    save_file({"bundle_emb.shinystyle.string_to_param.*": vectors}, str(tmp_path / "bundle.safetensors"))
    (tmp_path / "embeddings").mkdir()
    save_file({"emb_params": vectors}, str(tmp_path / "embeddings" / "shinystyle.safetensors"))
    prompt = {**SMALL, "prompt": "a cat, shinystyle"}
    bundled = sd1_pipe(loras=[str(tmp_path / "bundle.safetensors")], **prompt)
    from_folder = TextToImage(sd1_pipe.model, embeddings_dir=tmp_path / "embeddings")(**prompt)
    literal = sd1_pipe(**prompt)
    assert np.array_equal(pixels(bundled), pixels(from_folder))
    assert not np.array_equal(pixels(bundled), pixels(literal))
    assert np.array_equal(pixels(literal), pixels(sd1_pipe(**prompt)))  # the word is plain text again
    assert "Lora hashes: \"bundle: " in bundled.infotexts[0]
    assert 'TI hashes: "shinystyle: bundle"' in bundled.infotexts[0]


def test_an_embeddings_folder_file_wins_over_a_bundled_word_as_in_a1111(sd1_pipe, tmp_path):
    """A1111's `load_networks` skips a bundle whose word the embeddings folder already loaded ("Skip bundle
    embedding"), so the folder's vectors are read and its `TI hashes` written; a folder file of another model
    family is no embedding, so the bundle serves that word."""
    from safetensors.torch import save_file

    from pipelines.txt2img import TextToImage

    generator = torch.Generator().manual_seed(5)
    save_file({"bundle_emb.shinystyle.string_to_param.*": torch.randn(2, 32, generator=generator),
               "bundle_emb.otherstyle.string_to_param.*": torch.randn(2, 32, generator=generator)},
              str(tmp_path / "bundle.safetensors"))
    folder = tmp_path / "embeddings"
    folder.mkdir()
    save_file({"emb_params": torch.randn(2, 32, generator=generator)}, str(folder / "shinystyle.safetensors"))
    save_file({"emb_params": torch.randn(2, 768, generator=generator)}, str(folder / "otherstyle.safetensors"))  # SD 1.5's
    pipe = TextToImage(sd1_pipe.model, embeddings_dir=folder)
    lora = [str(tmp_path / "bundle.safetensors")]
    with pytest.warns(UserWarning, match=r"bundled for 'shinystyle' .* not used: .*shinystyle.safetensors has that name"):
        with_lora = pipe(loras=lora, **{**SMALL, "prompt": "a cat, shinystyle"})
    assert np.array_equal(pixels(with_lora), pixels(pipe(**{**SMALL, "prompt": "a cat, shinystyle"})))
    assert 'TI hashes: "shinystyle: ' in with_lora.infotexts[0]
    with pytest.warns(UserWarning, match="bundled for 'shinystyle'"):  # the file bundles both words
        bundled = pipe(loras=lora, **{**SMALL, "prompt": "a cat, otherstyle"})
    assert not np.array_equal(pixels(bundled), pixels(pipe(**{**SMALL, "prompt": "a cat, otherstyle"})))


def test_an_infotext_with_explicit_loras_regenerates_the_image(sd1_pipe, lora_dir):
    from mixkit.lora import LoraRequest
    from pipelines.infotext import parse_infotext
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    first = pipe(loras=[LoraRequest(str(lora_dir / "shiny.safetensors"), 0.6, 1.2)], **SMALL)
    recorded = parse_infotext(first.infotexts[0])
    assert recorded["Prompt"] == "a red circle <lora:shiny:0.6:1.2>"
    again = pipe(**{**SMALL, "prompt": recorded["Prompt"]})
    assert np.array_equal(pixels(first), pixels(again))


def test_a_batch_applies_the_prompt_tags_once_as_a1111_does(sd1_pipe, lora_dir):
    """A1111 takes extra networks from the first prompt of a batch only: batch 3 at 0.8 is 0.8, not 2.4."""
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    settings = {**SMALL, "prompt": "a red circle <lora:shiny:0.8>", "batch_size": 3}
    batch = pipe(**settings)
    # Exact: the same batch with the LoRA passed once as a parameter (which never depended on the batch size).
    by_param = pipe(**{**settings, "prompt": "a red circle", "loras": [str(lora_dir / "shiny.safetensors") + ":0.8"]})
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(batch.images, by_param.images))
    # Against one image per call with the same seeds: batched kernels round differently by at most one level
    # (also without a LoRA); the old summed strength (2.4) moved pixels by 150 levels and more.
    for image, seed in zip(batch.images, batch.seeds):
        single = pixels(pipe(**{**settings, "batch_size": 1, "seed": seed}))
        assert np.abs(np.asarray(image).astype(np.int16) - single).max() <= 1
    assert all(text.startswith("a red circle <lora:shiny:0.8>\n") for text in batch.infotexts)
    assert all("Lora hashes: " in text for text in batch.infotexts)


def test_per_image_prompts_apply_only_the_first_prompts_tags(sd1_pipe, lora_dir):
    """A list of prompts: every prompt loses its tags, the first prompt's LoRAs serve the whole batch (A1111)."""
    from pipelines.txt2img import TextToImage

    pipe = TextToImage(sd1_pipe.model, lora_dir=lora_dir)
    mixed = pipe(**{**SMALL, "batch_size": 2, "prompt": ["a red circle", "a red circle <lora:shiny:1>"]})
    plain = pipe(**{**SMALL, "batch_size": 2, "prompt": ["a red circle", "a red circle"]})
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(mixed.images, plain.images))
    first = pipe(**{**SMALL, "batch_size": 2, "prompt": ["a red circle <lora:shiny:0.5>", "a red circle"]})
    tagged = pipe(**{**SMALL, "batch_size": 2, "prompt": "a red circle <lora:shiny:0.5>"})
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first.images, tagged.images))
    assert not np.array_equal(np.asarray(first.images[1]), np.asarray(plain.images[1]))
