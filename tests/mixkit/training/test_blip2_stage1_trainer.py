"""BLIP-2 stage 1 trainer: the summed ITC+ITM+ITG loss falls on a fixed evaluation batch; vision stays frozen."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import QFormerBridge, QFormerBridgeConfig, QFormerConfig
from mixkit.models.vlm.modular.stage1 import Blip2Stage1Heads
from mixkit.training.blip2_stage1_trainer import Blip2Stage1Config, Stage1Model, image_batch, train_blip2_stage1

VOCAB = 40


def _parts():
    from transformers import Blip2VisionConfig, Blip2VisionModel

    torch.manual_seed(0)
    vision = Blip2VisionModel(Blip2VisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                                                num_attention_heads=4, image_size=30, patch_size=10))
    qformer = QFormerConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                            encoder_hidden_size=32, cross_attention_frequency=1, num_query_tokens=3,
                            text_vocab_size=VOCAB, max_position_embeddings=16)
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=qformer, output_size=8))
    return vision, bridge, Blip2Stage1Heads(16, VOCAB, embed_dim=8)


def _tokenize(captions):
    """Token 1 is [CLS], 0 padding, letters map to 2..27: enough vocabulary for colour names."""
    rows = [[1] + [2 + (ord(c) - ord("a")) % 26 for c in text.lower() if c.isalpha()][:10] for text in captions]
    length = max(map(len, rows))
    ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    return ids, (ids != 0).long()


def _eval_loss(model, dataset_dir):
    from mixkit.data import scan_kohya_folder

    records = scan_kohya_folder(dataset_dir).records
    ids, mask = _tokenize([r.caption for r in records])
    with torch.no_grad():
        return model(image_batch([r.path for r in records], 30), ids, mask, torch.Generator().manual_seed(9)).total.item()


def test_loss_falls_and_vision_stays_frozen(tmp_path):
    from PIL import Image

    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0)), ("white", (255, 255, 255))]:
        Image.new("RGB", (32, 32), colour).save(tmp_path / f"{name}.png")
        (tmp_path / f"{name}.txt").write_text(f"{name} square", encoding="utf-8")
    vision, bridge, heads = _parts()
    vision_before = {k: v.clone() for k, v in vision.state_dict().items()}
    before = _eval_loss(Stage1Model(vision, bridge, heads).eval(), tmp_path)
    config = Blip2Stage1Config(dataset=str(tmp_path), image_size=30, batch_size=4, max_steps=10, learning_rate=1e-2)
    result = train_blip2_stage1(config, vision_encoder=vision, bridge=bridge, heads=heads, tokenize=_tokenize)
    after = _eval_loss(Stage1Model(vision, bridge, heads).eval(), tmp_path)
    assert len(result.losses) == 10 and after < 0.8 * before, (before, after)
    assert all(torch.equal(vision_before[k], v) for k, v in vision.state_dict().items())


def test_bad_settings():
    with pytest.raises(ValueError, match="in-batch negatives"):
        Blip2Stage1Config(dataset="d", batch_size=1).check()
    with pytest.raises(ValueError, match="learning_rate"):
        Blip2Stage1Config(dataset="d", learning_rate=float("nan")).check()


def test_config_round_trips_and_checkpoints_need_a_folder(tmp_path):
    config = Blip2Stage1Config(dataset="d", output="o", qformer={"hidden_size": 16, "num_query_tokens": 3})
    (tmp_path / "run.json").write_text(config.to_json())
    assert Blip2Stage1Config.from_json_file(tmp_path / "run.json") == config
    vision, bridge, heads = _parts()
    with pytest.raises(ValueError, match="checkpoints need a folder: set checkpoint_dir"):
        train_blip2_stage1(Blip2Stage1Config(dataset=str(tmp_path), checkpoint_every=1), vision_encoder=vision,
                           bridge=bridge, heads=heads, tokenize=_tokenize)
    with pytest.raises(ValueError, match=r"qformer has unknown key\(s\) \['encoder_hidden_size'\].*come from"):
        Blip2Stage1Config(dataset="d", qformer={"encoder_hidden_size": 8}).check()
