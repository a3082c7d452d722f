"""OpenVINO text encoders against the torch encoders they were converted from (SDXL: CLIP-L and bigG)."""

import pytest
import torch

pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")

from mixkit.prompts import PromptEncoder  # noqa: E402
from mixkit.runtime.backends import export_identity  # noqa: E402
from mixkit.runtime.openvino_text import OpenVinoTextEncoder  # noqa: E402

PROMPT = "a (red:1.3) cube, BREAK blue sky"


@pytest.fixture(scope="module")
def ov_encoders(sdxl_model, ov_cache):
    return [OpenVinoTextEncoder(e, cache_dir=ov_cache, identity=export_identity(sdxl_model), part=f"text-encoder-{i + 1}")
            for i, e in enumerate(sdxl_model.text_encoders)]


def test_sdxl_prompt_encoding_matches_torch(sdxl_model, ov_encoders):
    """Two 77-token chunks (BREAK), emphasis, penultimate layers of both encoders and bigG's pooled projection."""
    torch_encoded = PromptEncoder(sdxl_model.tokenizers, sdxl_model.text_encoders, is_sdxl=True).encode(PROMPT)
    ov_encoded = PromptEncoder(sdxl_model.tokenizers, ov_encoders, is_sdxl=True).encode(PROMPT)
    assert ov_encoded.hidden.shape == torch_encoded.hidden.shape and ov_encoded.hidden.shape[0] == 154
    torch.testing.assert_close(ov_encoded.hidden, torch_encoded.hidden, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ov_encoded.pooled, torch_encoded.pooled, rtol=1e-4, atol=1e-4)
    assert [e.cache_hits for e in ov_encoders] == [{77: False}, {77: False}]


def test_clip_skip_through_the_final_layer_norm_matches_torch(sdxl_model, ov_encoders):
    """SD 1.x's clip skip 2 path: hidden_states[-2] through the kept torch final layer norm.

    No emphasis here: after the tiny model's layer norm a chunk's mean is ~0, and "Original"
    emphasis divides by it, which would magnify 1e-6 rounding differences into large ones.
    """
    tokenizer, encoder = sdxl_model.tokenizers[0], sdxl_model.text_encoders[0]
    plain = "a red cube, BREAK blue sky"
    expected = PromptEncoder([tokenizer], [encoder], is_sdxl=False, clip_skip=2).encode(plain).hidden
    got = PromptEncoder([tokenizer], [ov_encoders[0]], is_sdxl=False, clip_skip=2).encode(plain).hidden
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_embedding_hooks_still_apply(sdxl_model, ov_encoders):
    """Textual inversion inserts vectors with a hook on the token embedding, which stays in torch."""
    encoder = sdxl_model.text_encoders[0]
    ids = sdxl_model.tokenizers[0](["a cube"], padding="max_length", max_length=77, return_tensors="pt").input_ids

    vector = torch.randn(encoder.config.hidden_size, generator=torch.Generator().manual_seed(3))

    def shift_second_token(module, inputs, output):
        output = output.clone()
        output[:, 1] += vector  # not a constant: layer norms would remove a constant shift
        return output

    hook = encoder.get_input_embeddings().register_forward_hook(shift_second_token)
    try:
        with torch.no_grad():
            expected = encoder(input_ids=ids, output_hidden_states=True)
        got = ov_encoders[0](input_ids=ids, output_hidden_states=True)
    finally:
        hook.remove()
    with torch.no_grad():
        unhooked = encoder(input_ids=ids).last_hidden_state
    assert not torch.allclose(unhooked, expected.last_hidden_state, atol=1e-3)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=1e-4, atol=1e-4)


def test_features_the_graph_lacks_are_refused(sdxl_model, ov_encoders):
    ids = torch.zeros(1, 77, dtype=torch.long)
    with pytest.raises(ValueError, match=r"cannot honour \['attention_mask'\].*backend='torch'"):
        ov_encoders[0](input_ids=ids, attention_mask=torch.ones(1, 77))
    with pytest.raises(ValueError, match=r"cannot honour \['output_attentions'\]"):
        ov_encoders[0](input_ids=ids, output_attentions=True)
    with pytest.raises(ValueError, match=r"int64 tensor, got \(77,\)"):
        ov_encoders[0](input_ids=ids[0])
    with pytest.raises(AttributeError, match="'text_model'.*LoRA.*backend='torch'"):
        ov_encoders[1].text_model
