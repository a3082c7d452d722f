"""A tiny image-to-text world for the BLIP-2 / MiniGPT-4 trainers: coloured squares, captions, VQA, models.

Everything is built offline from configs with fixed seeds and saved the way users' inputs are
(modular folder with tokenizer/, transformers LM folder, kohya folder, JSONL manifest), so tests
and demos run the trainers through the same loaders a real run uses.
"""

from __future__ import annotations

import json
from pathlib import Path

COLOURS = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 200, 0), "white": (255, 255, 255)}


def write_colour_captions(folder: str | Path, size: int = 32) -> Path:
    """A kohya folder: one solid square per colour, captioned 'a <colour> square'."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, colour in COLOURS.items():
        Image.new("RGB", (size, size), colour).save(folder / f"{name}.png")
        (folder / f"{name}.txt").write_text(f"a {name} square", encoding="utf-8")
    return folder


def write_colour_vqa(folder: str | Path, size: int = 32) -> Path:
    """A JSONL manifest asking each square's colour ('what colour is it?' -> '<colour>'); returns the manifest."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, colour in COLOURS.items():
        Image.new("RGB", (size, size), colour).save(folder / f"{name}.png")
        lines.append(json.dumps({"image": f"{name}.png", "question": "what colour is it?", "answer": name}))
    manifest = folder / "vqa.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def build_tiny_modular_blip2(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny modular BLIP-2 (EVA-style ViT, 2-layer Q-Former with 4 queries, 2-layer OPT) with `save_modular_vlm`."""
    import torch
    from transformers import Blip2ForConditionalGeneration

    from mixkit.models.vlm.modular import from_hf_blip2, save_modular_vlm
    from mixkit.testing.tiny_vlm import IMAGE_TOKEN, tiny_blip2_config, tiny_byte_bpe_tokenizer

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer()
    config = tiny_blip2_config("opt", vocab_size=len(tokenizer),
                               image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))
    torch.manual_seed(seed)
    return save_modular_vlm(from_hf_blip2(Blip2ForConditionalGeneration(config)), folder, tokenizer=tokenizer)


def build_tiny_chat_lm(folder: str | Path, seed: int = 3, init_std: float = 0.3) -> Path:
    """Save a tiny OPT causal LM with its tokenizer in one transformers folder (the 'chat LM' of MiniGPT-4).

    The weights are random but larger than OPT's usual 0.02, so the frozen LM's predictions depend
    on its input embeddings and a trained projection into it can lower the loss measurably.
    """
    import torch
    from transformers import OPTConfig, OPTForCausalLM

    from mixkit.testing.tiny_vlm import tiny_byte_bpe_tokenizer

    folder = Path(folder)
    tokenizer = tiny_byte_bpe_tokenizer()
    torch.manual_seed(seed)
    model = OPTForCausalLM(OPTConfig(vocab_size=len(tokenizer), hidden_size=24, num_hidden_layers=1,
                                     num_attention_heads=4, ffn_dim=32, max_position_embeddings=128,
                                     word_embed_proj_dim=24, bos_token_id=2, eos_token_id=2, pad_token_id=1,
                                     init_std=init_std))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_vision_tower(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny transformers `Blip2VisionModel` (30 px, 25 patches) as stage 1's frozen image encoder."""
    import torch
    from transformers import Blip2VisionConfig, Blip2VisionModel

    torch.manual_seed(seed)
    Blip2VisionModel(Blip2VisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=4,
                                       image_size=30, patch_size=6)).save_pretrained(folder)
    return Path(folder)
