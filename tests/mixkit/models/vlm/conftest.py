"""Tiny vision-language checkpoints saved once per session, loaded back through `load_vlm`."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip"), seed=0)


@pytest.fixture(scope="session")
def tiny_blip2_opt_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    return build_tiny_blip2(tmp_path_factory.mktemp("tiny-blip2-opt"), seed=0, language_model="opt")


@pytest.fixture(scope="session")
def tiny_blip2_t5_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_blip2

    return build_tiny_blip2(tmp_path_factory.mktemp("tiny-blip2-t5"), seed=0, language_model="t5")


@pytest.fixture(scope="session")
def photos():
    """Four random RGB images of different sizes, as a user would pass them."""
    rng = np.random.default_rng(0)
    sizes = [(40, 50), (30, 30), (64, 20), (33, 47)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]


# --- mixkit's modular BLIP-2 ("mixkit-tiny-blip2" shape): CLIP tower + Q-Former + tiny LM ------------------

MODULAR_WORDS = ("a the red blue green yellow circle square triangle on in white black background what which "
                 "colour color shape is it ? question : short answer photo of picture").split()


def word_level_tokenizer(seq2seq: bool = False):
    """Lower-cased word-level tokenizer: [PAD]=0, [UNK]=1, [BOS]=2, [EOS]=3; adds [BOS] (causal) or [EOS] (T5)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[BOS]": 2, "[EOS]": 3}
    vocab.update({word: i + 4 for i, word in enumerate(sorted(set(MODULAR_WORDS)))})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    template = ("$A [EOS]", [("[EOS]", 3)]) if seq2seq else ("[BOS] $A", [("[BOS]", 2)])
    tokenizer.post_processor = processors.TemplateProcessing(single=template[0], special_tokens=template[1])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="[BOS]", eos_token="[EOS]",
                                   pad_token="[PAD]", unk_token="[UNK]")


def tiny_language_model(kind: str, vocab_size: int):
    from transformers import GPT2Config, GPT2LMHeadModel, OPTConfig, OPTForCausalLM, T5Config, T5ForConditionalGeneration

    ids = dict(bos_token_id=2, eos_token_id=3, pad_token_id=0)
    if kind == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_embd=16, n_layer=2, n_head=4, n_positions=64, **ids))
    if kind == "opt":
        return OPTForCausalLM(OPTConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                        ffn_dim=32, max_position_embeddings=64, word_embed_proj_dim=16, **ids))
    if kind == "t5":
        return T5ForConditionalGeneration(T5Config(
            vocab_size=vocab_size, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=4,
            relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=3, decoder_start_token_id=0))
    raise ValueError(f"tiny language model kind must be 'gpt2', 'opt' or 't5', got {kind!r}")


def tiny_modular_blip2(kind: str = "gpt2", seed: int = 0):
    """(model, tokenizer): CLIPVisionModel (30 px, 6 px patches) + 4-query Q-Former bridge + tiny LM."""
    import torch
    from transformers import CLIPVisionConfig, CLIPVisionModel

    from mixkit.models.vlm.modular import QFormerBridge, QFormerBridgeConfig, QFormerConfig, VisionLanguageModel

    tokenizer = word_level_tokenizer(seq2seq=kind == "t5")
    torch.manual_seed(seed)
    vision = CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                              num_attention_heads=4, image_size=30, patch_size=6))
    qformer = QFormerConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                            encoder_hidden_size=32, cross_attention_frequency=1, num_query_tokens=4)
    bridge = QFormerBridge(QFormerBridgeConfig(qformer=qformer, output_size=16))
    model = VisionLanguageModel(vision, bridge, tiny_language_model(kind, len(tokenizer)))
    return model.eval(), tokenizer


@pytest.fixture(scope="session")
def tiny_modular_blip2_dir(tmp_path_factory):
    """A GPT-2 flavoured tiny modular BLIP-2 saved with save_modular_vlm (CLIP mean/std, BLIP-2 VQA template)."""
    from mixkit.models.vlm import save_modular_vlm

    model, tokenizer = tiny_modular_blip2("gpt2")
    return save_modular_vlm(model, tmp_path_factory.mktemp("tiny-modular") / "mixkit-tiny-blip2", tokenizer=tokenizer)


@pytest.fixture(scope="module")
def blip2_opt(tiny_blip2_opt_dir):
    """The tiny BLIP-2 (OPT) loaded through mixkit, once per test module."""
    from mixkit.models.vlm import load_vlm

    return load_vlm(tiny_blip2_opt_dir)


@pytest.fixture(scope="module")
def blip2_t5(tiny_blip2_t5_dir):
    """The tiny BLIP-2 (Flan-T5) loaded through mixkit, once per test module."""
    from mixkit.models.vlm import load_vlm

    return load_vlm(tiny_blip2_t5_dir)
