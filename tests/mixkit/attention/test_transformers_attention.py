"""transformers models routed through mixkit attention give the same outputs as their eager path."""

from __future__ import annotations

import pytest
import torch

from mixkit.attention import (
    MIXKIT_ATTN_IMPLEMENTATION,
    apply_to_transformers,
    attention_backend,
    set_attention_backend,
    transformers_attn_implementation,
)
from mixkit.testing.tiny_models import tiny_text_encoder

transformers = pytest.importorskip("transformers")
BACKENDS = ["math", "sdpa", "sdpa_math"]


def _clip_inputs():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 512, (2, 9), generator=gen)
    padding = torch.ones(2, 9, dtype=torch.long)
    padding[1, 5:] = 0
    return ids, padding


@pytest.fixture(scope="module")
def clip_and_reference():
    model = tiny_text_encoder(seed=3)
    model.set_attn_implementation("eager")
    ids, padding = _clip_inputs()
    with torch.no_grad():
        plain = model(ids).last_hidden_state
        padded = model(ids, attention_mask=padding).last_hidden_state
    assert not torch.allclose(plain, padded)  # the padding mask really changes the output
    apply_to_transformers(model)
    return model, plain, padded


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_text_model_matches_eager(clip_and_reference, backend):
    model, plain, padded = clip_and_reference
    assert model.config._attn_implementation == MIXKIT_ATTN_IMPLEMENTATION
    ids, padding = _clip_inputs()
    with torch.no_grad(), attention_backend(backend):
        torch.testing.assert_close(model(ids).last_hidden_state, plain, rtol=0, atol=1e-5)
        torch.testing.assert_close(model(ids, attention_mask=padding).last_hidden_state, padded, rtol=0, atol=1e-5)


def test_every_layer_asks_the_dispatcher(clip_and_reference, spy_backend):
    model, _, _ = clip_and_reference
    ids, padding = _clip_inputs()
    with torch.no_grad(), attention_backend("spy"):
        model(ids)
        model(ids, attention_mask=padding)
    layers = model.config.num_hidden_layers
    assert len(spy_backend.calls) == 2 * layers
    # causal-only calls need no mask (is_causal), padded calls carry transformers' bool mask
    assert [mask for _, mask in spy_backend.calls] == [None] * layers + ["torch.bool"] * layers


def test_from_pretrained_with_the_helper_string(tmp_path):
    model = tiny_text_encoder(seed=4)
    model.save_pretrained(tmp_path)
    ids, padding = _clip_inputs()
    with torch.no_grad():
        expected = model(ids, attention_mask=padding).last_hidden_state
    name = transformers_attn_implementation()  # "auto" -> the dispatching "mixkit" implementation
    assert name == MIXKIT_ATTN_IMPLEMENTATION
    loaded = transformers.CLIPTextModel.from_pretrained(tmp_path, attn_implementation=name).eval()
    assert loaded.config._attn_implementation == name
    with torch.no_grad(), attention_backend("math"):
        torch.testing.assert_close(loaded(ids, attention_mask=padding).last_hidden_state, expected, rtol=0, atol=1e-5)


def test_native_implementation_names():
    assert transformers_attn_implementation("math") == "eager"
    assert transformers_attn_implementation("sdpa") == "sdpa"
    assert transformers_attn_implementation("sdpa_flash") == "sdpa"
    set_attention_backend("math")
    assert transformers_attn_implementation() == "eager"
    with attention_backend("auto"):
        assert transformers_attn_implementation() == "mixkit"


def test_grouped_query_causal_llama_matches_eager():
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    model.set_attn_implementation("eager")
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    padding = torch.ones(2, 7, dtype=torch.long)
    padding[1, :2] = 0  # left padding, as in batched generation
    with torch.no_grad():
        expected = model(ids, attention_mask=padding).last_hidden_state
        apply_to_transformers(model)
        with attention_backend("math"):
            out = model(ids, attention_mask=padding).last_hidden_state
    # Left-padded query positions see no unpadded key at all: eager's finite-min mask averages
    # everything there, SDPA-style kernels return zeros. Those outputs are unused; compare real tokens.
    real = padding.bool()
    torch.testing.assert_close(out[real], expected[real], rtol=0, atol=1e-5)


def test_non_transformers_models_are_rejected():
    with pytest.raises(TypeError, match="expects a transformers PreTrainedModel, got Linear"):
        apply_to_transformers(torch.nn.Linear(2, 2))
