"""Recipe for mixkit-tiny-clip: a small CLIP trained contrastively on the shapes world from scratch.

Its text tower conditions mixkit-tiny-sd and its vision tower feeds mixkit-tiny-blip2, so the
recipe favours text features that separate every attribute word. Images are 64 px (the world's
detail fits) and captions mix the plain and rich forms. The loss is mixkit's CLIP loss; the
model is transformers' `CLIPModel`, saved with its processor so `load_vlm` and the trainers load it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.tiny.recipe_common import RecipeClock, base_world, warmup_cosine, write_record
from mixkit.tiny.world_data import render_world
from mixkit.tiny.world_tokenizer import build_world_tokenizer
from mixkit.training.config_json import JsonConfig
from mixkit.training.losses import clip_contrastive_loss

logger = logging.getLogger(__name__)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass
class TinyClipRecipe(JsonConfig):
    output: str = "mixkit-tiny-clip"
    image_size: int = 64
    patch_size: int = 8
    hidden_size: int = 96
    layers: int = 3
    heads: int = 4
    train_images: int = 24000
    batch_size: int = 128
    steps: int = 1000
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.05
    seed: int = 0
    threads: int = 0
    bf16: bool = False  # measured: for a model this small fp32 is faster on CPU

    def check(self) -> None:
        for name in ("image_size", "patch_size", "hidden_size", "layers", "heads", "train_images", "batch_size", "steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} must be a multiple of patch_size {self.patch_size}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")


def build_tiny_clip(recipe: TinyClipRecipe, vocab_size: int):
    from transformers import CLIPConfig, CLIPModel

    text = dict(vocab_size=vocab_size, hidden_size=recipe.hidden_size, intermediate_size=4 * recipe.hidden_size,
                num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads, max_position_embeddings=77,
                bos_token_id=vocab_size - 2, eos_token_id=vocab_size - 1, pad_token_id=vocab_size - 1)
    vision = dict(image_size=recipe.image_size, patch_size=recipe.patch_size, hidden_size=recipe.hidden_size,
                  intermediate_size=4 * recipe.hidden_size, num_hidden_layers=recipe.layers,
                  num_attention_heads=recipe.heads)
    torch.manual_seed(recipe.seed)
    return CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=recipe.hidden_size))


def normalise(images_uint8: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return (images_uint8.float() / 255.0 - mean) / std


def retrieval_accuracy(model, tokenizer, data, count: int = 512) -> float:
    """Image->text top-1 among `count` validation pairs whose captions are all different."""
    seen, keep = set(), []
    for i, caption in enumerate(data.captions):
        if caption not in seen:
            seen.add(caption)
            keep.append(i)
        if len(keep) == count:
            break
    index = torch.tensor(keep)
    with torch.no_grad():
        tokens = tokenizer([data.captions[i] for i in keep], padding=True, return_tensors="pt")
        text = torch.nn.functional.normalize(_features(model.get_text_features(**tokens)), dim=-1)
        image = torch.nn.functional.normalize(
            _features(model.get_image_features(pixel_values=normalise(data.images[index]))), dim=-1)
    return (image @ text.T).argmax(dim=1).eq(torch.arange(len(keep))).float().mean().item()


def _features(output):
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def train_tiny_clip(recipe: TinyClipRecipe, stop_at_step: int | None = None):
    from transformers import CLIPImageProcessor, CLIPProcessor

    from mixkit.training.sd_lora_trainer import TrainingResult

    recipe.check()
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    clock = RecipeClock()
    world = base_world()
    tokenizer = build_world_tokenizer()
    train = render_world(recipe.train_images, recipe.seed, world, recipe.image_size)
    valid = render_world(min(2048, recipe.train_images), recipe.seed + 1, world, recipe.image_size)
    model = build_tiny_clip(recipe, len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    generator = torch.Generator().manual_seed(recipe.seed)
    tokens = tokenizer(train.captions, padding="max_length", max_length=32, truncation=True, return_tensors="pt")
    curve = []
    for step in range(recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = recipe.learning_rate * warmup_cosine(step, recipe.steps, recipe.warmup_steps)
        index = torch.randint(0, len(train), (recipe.batch_size,), generator=generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=recipe.bf16):
            image_features = _features(model.get_image_features(pixel_values=normalise(train.images[index])))
            text_features = _features(model.get_text_features(input_ids=tokens.input_ids[index],
                                                              attention_mask=tokens.attention_mask[index]))
        loss = clip_contrastive_loss(image_features.float(), text_features.float(), model.logit_scale)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if (step + 1) % 100 == 0 or step + 1 == recipe.steps:
            model.eval()
            accuracy = retrieval_accuracy(model, tokenizer, valid)
            model.train()
            curve.append({"step": step + 1, "loss": round(loss.item(), 4), "retrieval_top1": round(accuracy, 4),
                          "wall_seconds": clock.wall()})
            logger.info("tiny-clip step %d loss %.4f top1 %.3f (%.0f s)", step + 1, loss.item(), accuracy, clock.wall())
        if stop_at_step is not None and step + 1 >= stop_at_step:
            break
    output = Path(recipe.output)
    output.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.half().save_pretrained(output, safe_serialization=True)
    image_processor = CLIPImageProcessor(size={"shortest_edge": recipe.image_size},
                                         crop_size={"height": recipe.image_size, "width": recipe.image_size},
                                         image_mean=list(CLIP_MEAN), image_std=list(CLIP_STD))
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(output)
    write_record(output, "tiny-clip", recipe, {"retrieval_top1": curve[-1]["retrieval_top1"]}, curve, clock)
    return TrainingResult(steps=step + 1, seconds=clock.wall(), output=output, last_checkpoint=None)
