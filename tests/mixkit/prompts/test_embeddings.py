"""Textual inversion: file formats, use in prompts (diffusers' loader is the oracle), hashes, refusals."""

import hashlib
import pickle

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError, UnsafeCheckpointError
from mixkit.prompts import EmbeddingLibrary, PromptEncoder, build_conditioning_plan, load_textual_inversion


@pytest.fixture
def vectors():
    torch.manual_seed(11)
    return torch.randn(2, 32)


def sd1_encoder_with(pipe, folder, **kwargs):
    return PromptEncoder([pipe.tokenizer], [pipe.text_encoder], is_sdxl=False, embeddings=EmbeddingLibrary(folder), **kwargs)


def test_multi_vector_embedding_equals_diffusers_textual_inversion(tiny_sd1_dir, sd1_pipe, tmp_path, vectors):
    from diffusers import StableDiffusionPipeline

    save_file({"emb_params": vectors}, tmp_path / "zz.safetensors")
    encoded = sd1_encoder_with(sd1_pipe, tmp_path).encode("a zz b").hidden

    oracle = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir)  # own copy: loading TI resizes its vocab
    oracle.load_textual_inversion(str(tmp_path / "zz.safetensors"), token="zz")
    expected, _ = oracle.encode_prompt("a zz b", "cpu", 1, False)
    torch.testing.assert_close(encoded, expected[0], atol=1e-6, rtol=0)
    without = PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False).encode("a zz b")
    assert not torch.allclose(encoded[:6], without.hidden[:6])


def test_a1111_pt_format_loads_with_weights_only(tmp_path, vectors):
    torch.save({"string_to_token": {"*": 265}, "string_to_param": {"*": vectors}, "name": "x", "step": 10},
               tmp_path / "x.pt")
    save_file({"emb_params": vectors}, tmp_path / "y.safetensors")
    assert torch.equal(load_textual_inversion(tmp_path / "x.pt").vectors[""], vectors)
    assert load_textual_inversion(tmp_path / "x.pt").num_vectors == 2


def test_same_vectors_same_encoding_across_formats(sd1_pipe, tmp_path, vectors):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    torch.save({"string_to_param": {"*": vectors}}, tmp_path / "a" / "qq.pt")
    save_file({"emb_params": vectors}, tmp_path / "b" / "qq.safetensors")
    torch.testing.assert_close(sd1_encoder_with(sd1_pipe, tmp_path / "a").encode("(qq:1.2), cat").hidden,
                               sd1_encoder_with(sd1_pipe, tmp_path / "b").encode("(qq:1.2), cat").hidden)


def test_pickle_with_code_is_refused_and_never_run(tmp_path):
    sentinel = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            import os

            return os.system, (f"touch {sentinel}",)

    with open(tmp_path / "evil.pt", "wb") as handle:
        pickle.dump({"string_to_param": {"*": Payload()}}, handle, protocol=2)
    with pytest.raises(UnsafeCheckpointError, match="evil.pt"):
        load_textual_inversion(tmp_path / "evil.pt")
    assert not sentinel.exists()


@pytest.mark.parametrize("data, message", [
    ({"a": torch.zeros(1, 32), "b": torch.zeros(1, 32)}, "not a textual-inversion embedding"),
    ({"emb_params": torch.zeros(0, 32)}, "non-empty"),
    ({"emb_params": torch.full((1, 32), float("nan"))}, "NaN"),
])
def test_bad_files_are_clear_errors(tmp_path, data, message):
    save_file(data, tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointFormatError, match=message):
        load_textual_inversion(tmp_path / "bad.safetensors")
    (tmp_path / "trunc.safetensors").write_bytes(b"\x10\x00\x00")
    with pytest.raises(CheckpointFormatError, match="trunc.safetensors"):
        load_textual_inversion(tmp_path / "trunc.safetensors")


def test_an_sd1_embedding_on_sdxl_is_plain_text_as_in_a1111(sdxl_pipe, tmp_path, vectors):
    # A1111 lists another family's embeddings as skipped and reads their names as ordinary words.
    save_file({"emb_params": vectors}, tmp_path / "sd1emb.safetensors")
    encoder = PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                            [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True,
                            embeddings=EmbeddingLibrary(tmp_path))
    plain = PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                          [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True)
    encoded = encoder.encode("a sd1emb")
    assert torch.equal(encoded.hidden, plain.encode("a sd1emb").hidden) and encoded.embeddings_used == {}


def test_sdxl_embedding_uses_clip_l_and_clip_g(sdxl_pipe, sd1_pipe, tmp_path):
    torch.manual_seed(0)
    clip_l, clip_g = torch.randn(3, 32), torch.randn(3, 32)
    save_file({"clip_l": clip_l, "clip_g": clip_g}, tmp_path / "xl.safetensors")
    library = EmbeddingLibrary(tmp_path)
    encoder = PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                            [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True, embeddings=library)
    seen = {}  # token embeddings at positions 2..4 (BOS, "a", then the 3 vectors), seen after position embeddings

    def watch(key, embeddings):
        def hook(module, inputs, output):
            seen[key] = output[0, 2:5] - embeddings.position_embedding.weight[2:5]
        return embeddings.register_forward_hook(hook)

    hooks = [watch("l", sdxl_pipe.text_encoder.embeddings), watch("g", sdxl_pipe.text_encoder_2.text_model.embeddings)]
    try:
        encoder.encode("a xl b")
    finally:
        for hook in hooks:
            hook.remove()
    torch.testing.assert_close(seen["l"], clip_l, atol=1e-6, rtol=0)
    torch.testing.assert_close(seen["g"], clip_g, atol=1e-6, rtol=0)
    sd1 = sd1_encoder_with(sd1_pipe, tmp_path)  # on SD1 the SDXL file is skipped: "xl" is a plain word
    assert torch.equal(sd1.encode("a xl b").hidden, PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False).encode("a xl b").hidden)


def test_an_embedding_of_another_width_is_plain_text(sd1_pipe, tmp_path):
    save_file({"emb_params": torch.zeros(1, 768)}, tmp_path / "big.safetensors")  # an SD2 (768-wide) file on SD1
    encoded = sd1_encoder_with(sd1_pipe, tmp_path).encode("big")
    assert encoded.embeddings_used == {}
    assert torch.equal(encoded.hidden, PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False).encode("big").hidden)


def test_embedding_never_straddles_chunks(sd1_pipe, tmp_path, vectors):
    save_file({"emb_params": vectors}, tmp_path / "zz.safetensors")
    encoder = sd1_encoder_with(sd1_pipe, tmp_path)
    chunks = encoder.chunks_for("b" * 74 + " zz")
    assert [len(chunk.tokens) for chunk in chunks] == [74, 2] and chunks[1].fixes == [(0, "zz")]


def test_an_embedding_longer_than_a_chunk_is_listed_but_refused_in_a_prompt_naming_the_fix(sd1_pipe, tmp_path):
    # A1111 lists such a file as loaded and fails inside CLIP when a prompt uses it; 75 vectors still fit
    save_file({"emb_params": torch.randn(76, 32)}, tmp_path / "long.safetensors")
    save_file({"emb_params": torch.randn(75, 32)}, tmp_path / "full.safetensors")
    library = EmbeddingLibrary(tmp_path)
    assert {"long", "full"} <= set(library.names()) and not library.skipped()
    encoder = sd1_encoder_with(sd1_pipe, tmp_path)
    assert [len(chunk.tokens) for chunk in encoder.chunks_for("a full")] == [1, 75]
    with pytest.raises(ValueError) as info:
        encoder.encode("a long b")
    message = str(info.value)
    assert "embedding 'long'" in message and str(tmp_path / "long.safetensors") in message
    assert "76 vectors" in message and "Remove 'long' from the prompt" in message and "at most 75" in message
    assert encoder.encode("a b").hidden.shape == (77, 32)  # other prompts still encode


def test_ti_hashes_for_infotext(sd1_pipe, tmp_path, vectors):
    save_file({"emb_params": vectors}, tmp_path / "zz.safetensors")
    save_file({"emb_params": vectors[:1]}, tmp_path / "unused.safetensors")
    digest = hashlib.sha256((tmp_path / "zz.safetensors").read_bytes()).hexdigest()
    plan = build_conditioning_plan(sd1_encoder_with(sd1_pipe, tmp_path), ["a zz"], ["b"], 4)
    assert plan.ti_hashes == f"zz: {digest[:12]}"
    assert load_textual_inversion(tmp_path / "zz.safetensors").shorthash == digest[:12]


def test_library_lists_names_and_prefers_safetensors(tmp_path, vectors):
    torch.save({"string_to_param": {"*": vectors * 2}}, tmp_path / "same.pt")
    save_file({"emb_params": vectors}, tmp_path / "same.safetensors")
    (tmp_path / "sub").mkdir()
    save_file({"emb_params": vectors}, tmp_path / "sub" / "nested.safetensors")
    (tmp_path / "notes.txt").write_text("x")
    library = EmbeddingLibrary(tmp_path)
    assert library.names() == ["nested", "same"]
    assert torch.equal(library.get("same").vectors[""], vectors)


def test_a_refreshed_library_sees_new_files_and_rereads_only_changed_ones(tmp_path):
    import os

    save_file({"emb_params": torch.randn(2, 8)}, str(tmp_path / "kept.safetensors"))
    save_file({"emb_params": torch.randn(1, 8)}, str(tmp_path / "changed.safetensors"))
    library = EmbeddingLibrary(tmp_path)
    kept, changed = library.get("kept"), library.get("changed")
    save_file({"emb_params": torch.randn(3, 8)}, str(tmp_path / "changed.safetensors"))
    os.utime(tmp_path / "changed.safetensors", ns=(1, 1))  # a different stamp even within the clock's resolution
    save_file({"emb_params": torch.randn(4, 8)}, str(tmp_path / "added.safetensors"))
    fresh = library.refreshed()
    assert fresh.names() == ["added", "changed", "kept"]
    assert fresh.get("kept") is kept  # unchanged file: not read again
    assert fresh.get("changed") is not changed and fresh.get("changed").num_vectors == 3
    (tmp_path / "kept.safetensors").unlink()
    assert library.refreshed().names() == ["added", "changed"]


def test_ti_hashes_leaves_out_lora_bundled_words_when_asked():
    """A1111's `lora_bundled_ti_to_infotext`: a bundled word's entry names its LoRA (on, the default) or is left out;
    a folder embedding's hash stays either way."""
    from mixkit.prompts.embeddings import BundledInLora, ti_hashes_infotext

    used = {"shiny:style": BundledInLora("my,lora"), "glow": "0123456789ab", "preview": ""}
    assert ti_hashes_infotext(used) == "shinystyle: mylora, glow: 0123456789ab"  # as its Lora hashes name
    assert ti_hashes_infotext(used, bundled=False) == "glow: 0123456789ab"
