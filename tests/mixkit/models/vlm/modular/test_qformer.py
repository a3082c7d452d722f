"""mixkit's Q-Former: attention backends agree; the multimodal causal mask isolates queries from text."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import QFormer, QFormerConfig
from mixkit.training.losses import multimodal_causal_mask


def tiny_config(**overrides) -> QFormerConfig:
    values = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                  encoder_hidden_size=8, cross_attention_frequency=2, num_query_tokens=3, text_vocab_size=50,
                  max_position_embeddings=16)
    values.update(overrides)
    return QFormerConfig(**values)


@pytest.mark.parametrize("implementation", ["eager", "mixkit"])
def test_attention_implementations_equal_sdpa(implementation):
    torch.manual_seed(0)
    sdpa = QFormer(tiny_config()).eval()
    other = QFormer(tiny_config(attn_implementation=implementation)).eval()
    other.load_state_dict(sdpa.state_dict())
    queries, image = torch.randn(2, 3, 16), torch.randn(2, 5, 8)
    text = torch.randint(0, 50, (2, 4))
    mask = multimodal_causal_mask(3, torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]))
    torch.testing.assert_close(other(queries, image, text, mask), sdpa(queries, image, text, mask), atol=1e-5, rtol=1e-5)


def test_cross_attention_every_n_layers():
    model = QFormer(tiny_config(num_hidden_layers=4, cross_attention_frequency=2))
    assert [layer.cross_attention is not None for layer in model.layers] == [True, False, True, False]


def test_queries_cannot_see_text_and_text_is_causal_under_the_itg_mask():
    torch.manual_seed(0)
    model = QFormer(tiny_config()).eval()
    queries, image = torch.randn(1, 3, 16), torch.randn(1, 5, 8)
    mask = multimodal_causal_mask(3, torch.ones(1, 4, dtype=torch.long))
    a = model(queries, image, torch.tensor([[1, 2, 3, 4]]), mask)
    b = model(queries, image, torch.tensor([[1, 2, 9, 9]]), mask)
    torch.testing.assert_close(a[:, :5], b[:, :5])  # queries and the first two text tokens
    assert not torch.allclose(a[:, 5:], b[:, 5:])
    full = model(queries, image, torch.tensor([[1, 2, 9, 9]]))  # no mask: queries see the text
    assert not torch.allclose(full[:, :3], b[:, :3])


def test_config_errors_name_values():
    with pytest.raises(ValueError, match="15.*4"):
        tiny_config(hidden_size=15)
    with pytest.raises(ValueError, match="flash"):
        tiny_config(attn_implementation="flash")
    with pytest.raises(ValueError, match="text_vocab_size"):
        QFormer(tiny_config(text_vocab_size=0))(torch.randn(1, 3, 16), torch.randn(1, 5, 8), torch.tensor([[1]]))


def test_blip2_qformer_ignores_token_order_but_image_positions_do_not():
    """Attention pooling forgets where a token was; learned image positions (Qwen-VL style) keep it."""
    torch.manual_seed(0)
    queries, image = torch.randn(1, 3, 16), torch.randn(1, 5, 8)
    order = torch.tensor([0, 3, 1, 4, 2])
    plain = QFormer(tiny_config(text_vocab_size=0)).eval()
    torch.testing.assert_close(plain(queries, image[:, order]), plain(queries, image), atol=1e-5, rtol=1e-5)
    placed = QFormer(tiny_config(text_vocab_size=0, image_positions=5)).eval()
    assert placed.image_position_embeddings.shape == (1, 5, 8)
    assert not torch.allclose(placed(queries, image[:, order]), placed(queries, image), atol=1e-3)
    with pytest.raises(ValueError, match="built for 5 image tokens.*got 4"):
        placed(queries, image[:, :4])


def test_grid_position_encoding_starts_every_patch_apart_and_cls_at_zero():
    from mixkit.models.vlm.modular.qformer import grid_position_encoding

    with_cls = grid_position_encoding(65, 96)
    assert with_cls.shape == (65, 96) and torch.equal(with_cls[0], torch.zeros(96))
    patches = grid_position_encoding(64, 96)
    torch.testing.assert_close(with_cls[1:], patches)
    distances = torch.cdist(patches, patches) + torch.eye(64) * 1e3
    assert distances.min() > 0.1  # no two patches share a code
    # Row-major 8x8 grid: the first quarter of the channels codes the row (sin), patch 0 and 7 share row 0.
    torch.testing.assert_close(patches[0, :24], patches[7, :24])
    assert not torch.allclose(patches[0, :24], patches[8, :24])
    with pytest.raises(ValueError, match="neither a square number of patches nor one more"):
        grid_position_encoding(11, 8)


def test_image_positions_setting_is_checked_and_saved():
    from mixkit.models.vlm.modular.bridges import QFormerBridge, QFormerBridgeConfig, build_bridge

    with pytest.raises(ValueError, match="image_positions must be an integer >= 0"):
        tiny_config(image_positions=-1)
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=tiny_config(text_vocab_size=0, image_positions=5), output_size=6))
    rebuilt = build_bridge(bridge.config_dict())
    assert rebuilt.config.qformer.image_positions == 5
    rebuilt.load_state_dict(bridge.state_dict())  # strict: the position table is part of the saved weights
