"""Tiny Grounding DINO, SAM and causal-LM checkpoints built offline from configs, for AppFlow tests.

Real weights cannot be downloaded in CI, so tests save these folders with `save_pretrained` and
load them back through AppFlow's loaders, the same path a user's downloaded checkpoint takes.
Weights are random (detections and masks are arbitrary but deterministic for a seed). Sizes follow
transformers' own unit tests for these models; the Grounding DINO backbone is transformers' Swin
(`use_timm_backbone=False`), because timm is not a mixkit dependency.
"""

from __future__ import annotations

from pathlib import Path

TINY_DINO_IMAGE_SIZE = 96  # the extra feature level is ~1/64 of the image: GroupNorm needs > 1 pixel there
TINY_SAM_IMAGE_SIZE = 32

# Words the tiny BERT tokenizer knows; anything else becomes [UNK], which Grounding DINO accepts.
_WORDS = ["a", "an", "the", "dog", "cat", "person", "car", "tree", "sky", "red", "blue", "photo", "of",
          "on", "in", "with", "sitting", "running", "picture", "ball", "grass"]


def write_tiny_bert_tokenizer(folder: str | Path) -> Path:
    """A WordPiece BERT tokenizer from a hand-written vocab.txt (Grounding DINO's text side)."""
    from transformers import BertTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # "." separates phrases in Grounding DINO prompts, so it must be its own token.
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", *_WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    return folder


def build_tiny_grounding_dino(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `GroundingDinoForObjectDetection` with its processor (32 px images, 4 queries)."""
    import tempfile

    import torch
    from transformers import (
        BertTokenizer, GroundingDinoConfig, GroundingDinoForObjectDetection, GroundingDinoImageProcessorPil,
        GroundingDinoProcessor, SwinConfig,
    )

    folder = Path(folder)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = BertTokenizer.from_pretrained(write_tiny_bert_tokenizer(scratch))
    backbone = SwinConfig(window_size=7, embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                          image_size=TINY_DINO_IMAGE_SIZE, out_features=["stage2", "stage3", "stage4"],
                          out_indices=[2, 3, 4])
    text = dict(model_type="bert", hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=8,
                max_position_embeddings=64, vocab_size=len(tokenizer))
    config = GroundingDinoConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=8, decoder_ffn_dim=8, num_queries=4, num_feature_levels=4, encoder_n_points=2,
        decoder_n_points=6, use_timm_backbone=False, backbone_config=backbone, max_text_len=32, text_config=text,
    )
    torch.manual_seed(seed)
    model = GroundingDinoForObjectDetection(config).eval()
    model.save_pretrained(folder)
    image_processor = GroundingDinoImageProcessorPil(
        size={"height": TINY_DINO_IMAGE_SIZE, "width": TINY_DINO_IMAGE_SIZE})
    GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def build_tiny_sam(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny `SamModel` with a `SamProcessor` whose resize/pad size matches the tiny encoder."""
    import torch
    from transformers import SamConfig, SamImageProcessorPil, SamModel, SamProcessor

    folder = Path(folder)
    size, patch = TINY_SAM_IMAGE_SIZE, 4
    config = SamConfig(
        vision_config=dict(hidden_size=36, output_channels=32, num_hidden_layers=2, num_attention_heads=4,
                           image_size=size, patch_size=patch, window_size=4, global_attn_indexes=[1],
                           num_pos_feats=16, mlp_dim=72),
        prompt_encoder_config=dict(hidden_size=32, image_size=size, patch_size=patch, mask_input_channels=4),
        mask_decoder_config=dict(hidden_size=32, mlp_dim=64, num_attention_heads=4, iou_head_hidden_dim=32),
    )
    torch.manual_seed(seed)
    model = SamModel(config).eval()
    model.save_pretrained(folder)
    # SAM predicts masks at 4x the embedding grid; the processor must pad images to the encoder size.
    mask = size // patch * 4
    image_processor = SamImageProcessorPil(size={"longest_edge": size}, pad_size={"height": size, "width": size},
                                        mask_size={"longest_edge": mask}, mask_pad_size={"height": mask, "width": mask})
    SamProcessor(image_processor=image_processor).save_pretrained(folder)
    return folder


def build_tiny_causal_lm(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny GPT-2 causal LM with a byte-level BPE tokenizer (replies are random text).

    The tokenizer knows few merges, so prompts are long in tokens: 1024 positions fit the edit prompt.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from mixkit.testing.tiny_vlm import tiny_byte_bpe_tokenizer

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer()
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=16, n_layer=2, n_head=2,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
