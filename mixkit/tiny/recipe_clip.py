"""Recipe for mixkit-tiny-clip: a small CLIP trained contrastively on the shapes world from scratch.

Its text tower conditions mixkit-tiny-sd and its vision tower feeds mixkit-tiny-blip2, so the
recipe has to make both towers tell every attribute apart, shape included. Shape is the hard one:
with random batches colour, background and position already separate almost every pair, and both
towers stay blind to shape (v1 of this recipe: 46% zero-shot shape among 5). Two measures fix it:
batches hold every shape variant of a few scenes (only shape separates them), and the image tower
first learns which shapes an image holds from an auxiliary head before contrastive training starts
(the head keeps training alongside, and is not saved). Images are 64 px and captions mix the plain
and rich forms. The loss is mixkit's CLIP loss; the model is transformers' `CLIPModel`, saved with
its processor so `load_vlm` and the trainers load it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from mixkit.data.shapes_captions import caption_scene
from mixkit.io.atomic import atomic_output_folder
from mixkit.runtime.capability import cpu_bf16_autocast
from mixkit.tiny.recipe_common import (
    RecipeClock,
    base_world,
    start_recipe,
    warmup_cosine,
    write_record,
)
from mixkit.tiny.recipe_state import check_resume_settings, read_recipe_state, restore_recipe_state, save_recipe_state, \
    state_folder
from mixkit.tiny.world_data import caption_style, render_shape_variants, render_world
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
    train_images: int = 12000  # scenes; with shape_variants each is drawn once per shape
    batch_size: int = 128
    steps: int = 1000
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.05
    seed: int = 0
    threads: int = 0
    bf16: bool = False  # measured: for a model this small fp32 is faster on CPU
    # Batches of whole scene groups: every shape variant of batch_size / shapes scenes
    # (`render_shape_variants`). Measured on v1 (false): 46% shape accuracy (own caption against the
    # same caption with each other shape), a linear probe on the image embedding 48%, and the text
    # tower put "a red circle ..." and "a red square ..." at 0.99 cosine, which held back tiny-sd and
    # tiny-blip2 too. One twin per scene instead of all variants: 42% after 600 steps.
    shape_variants: bool = True
    # Weight of an auxiliary loss on the image tower: which of the world's shapes are in the image
    # (multi-label, from the pooled state; the head is dropped at save). 0 = contrastive only.
    shape_head_weight: float = 1.0
    # Steps that train only the image tower, on that shape loss, before contrastive training starts.
    # Measured (same ViT, 400 steps): the shape loss alone reads shape at 73-78%; added to the
    # contrastive loss from step 0 only 34%: both towers start blind to shape, so the contrastive
    # gradient between variants is near zero, and the easy words (colours) take the capacity first.
    shape_warmup_steps: int = 800
    # From the contrastive phase on, the head can also read the position and size of a lone shape.
    # Measured: zero-shot position among 9 13% -> 57%, size 85% -> 96%, retrieval 75% -> 86%, shape
    # unchanged; but the captioner trained on that tower read colour worse (90% vs 95% in `mixkit eval
    # tiny`, 82% vs 93% on other renders) while it got position right (94% vs 12%), so it is off for the
    # shipped model. In the warm-up it held shape back (head: 29% shape after 800 steps, against 89%).
    layout_head: bool = False
    # Resume states (`mixkit.tiny.recipe_state`) in <output>-state every this many steps (0: only at --stop-at-step)
    checkpoint_every: int = 0
    resume_from: str = ""  # a <output>-state folder (or step-*.pt in it): continue that run bit for bit

    def check(self) -> None:
        check_resume_settings(self)
        for name in ("image_size", "patch_size", "hidden_size", "layers", "heads", "train_images", "batch_size", "steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.shape_warmup_steps, int) or self.shape_warmup_steps < 0:
            raise ValueError(f"shape_warmup_steps must be an integer >= 0, got {self.shape_warmup_steps!r}")
        if not self.shape_head_weight >= 0:
            raise ValueError(f"shape_head_weight must be >= 0, got {self.shape_head_weight!r}")
        if self.shape_warmup_steps and not self.shape_head_weight:
            raise ValueError("shape_warmup_steps trains on the shape loss, so it needs shape_head_weight > 0; "
                             "set shape_warmup_steps=0 for contrastive training only")
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
    image, text = _unit_features(model, tokenizer, data.images[torch.tensor(keep)], [data.captions[i] for i in keep])
    return (image @ text.T).argmax(dim=1).eq(torch.arange(len(keep))).float().mean().item()


def variant_accuracy(model, tokenizer, data, world, attribute: str = "shape", count: int = 400) -> float:
    """Single-shape validation images: how often the true caption beats the same caption with each other
    value of `attribute` (shape, position or size; the last two in the rich style, which names them)."""
    values = {"shape": world.shapes, "position": world.positions, "size": world.sizes}[attribute]
    keep = _lone_shape_rows(data, count)
    captions = []
    for i in keep:
        scene = data.scenes[i]
        style = "rich" if attribute != "shape" else caption_style(scene, data.captions[i])
        captions += [caption_scene(dataclasses.replace(scene, objects=(dataclasses.replace(scene.objects[0],
                                                                                           **{attribute: value}),)),
                                   style) for value in values]
    image, text = _unit_features(model, tokenizer, data.images[torch.tensor(keep)], captions)
    scores = torch.einsum("nd,nkd->nk", image, text.view(len(keep), len(values), -1))
    truth = torch.tensor([values.index(getattr(data.scenes[i].objects[0], attribute)) for i in keep])
    return scores.argmax(dim=1).eq(truth).float().mean().item()


def shape_head_accuracy(model, head, data, world, count: int = 400) -> float:
    """How often the auxiliary head's top shape is the shape of a single-shape validation image (the
    image tower's own reading, without the text tower)."""
    keep = _lone_shape_rows(data, count)
    with torch.no_grad():
        pooled = model.vision_model(pixel_values=normalise(data.images[torch.tensor(keep)])).pooler_output
    truth = torch.tensor([world.shapes.index(data.scenes[i].objects[0].shape) for i in keep])
    return head(pooled)[:, :len(world.shapes)].argmax(dim=1).eq(truth).float().mean().item()


def _lone_shape_rows(data, count: int) -> list[int]:
    return [i for i, scene in enumerate(data.scenes) if len(scene.objects) == 1][:count]


class AttributeHead(torch.nn.Module):
    """Auxiliary readout of the image tower's pooled state: which shapes are present (multi-label),
    and with `layout`, the position and size of a lone shape (ignored for two-shape scenes)."""

    def __init__(self, hidden_size: int, world, layout: bool) -> None:
        super().__init__()
        self.world, self.layout = world, layout
        self.sizes = (len(world.shapes), len(world.positions), len(world.sizes)) if layout else (len(world.shapes),)
        self.linear = torch.nn.Linear(hidden_size, sum(self.sizes))

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.linear(pooled)

    def targets(self, scenes) -> torch.Tensor:
        """Per scene: shape presence (0/1 per shape), then position and size indices (-100 when not one shape)."""
        rows = []
        for scene in scenes:
            row = [float(any(o.shape == shape for o in scene.objects)) for shape in self.world.shapes]
            if self.layout:
                lone = scene.objects[0] if len(scene.objects) == 1 else None
                row += [float(self.world.positions.index(lone.position)) if lone and lone.position else -100.0,
                        float(self.world.sizes.index(lone.size)) if lone and lone.size else -100.0]
            rows.append(row)
        return torch.tensor(rows)

    def loss(self, pooled: torch.Tensor, targets: torch.Tensor, layout: bool = True) -> torch.Tensor:
        """Shape-presence loss, plus the layout losses when the head has them and `layout` is set."""
        parts = self(pooled).split(self.sizes, dim=1)
        shapes = len(self.world.shapes)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(parts[0], targets[:, :shapes])
        for logits, column in zip(parts[1:] if layout else (), (shapes, shapes + 1)):
            labels = targets[:, column].long()
            if (labels != -100).any():
                loss = loss + torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100)
        return loss


def _features(output):
    return output if isinstance(output, torch.Tensor) else output.pooler_output


@torch.no_grad()
def _unit_features(model, tokenizer, images_uint8: torch.Tensor, captions: list[str]):
    """(image, text) embeddings scaled to unit length, as CLIP compares them."""
    tokens = tokenizer(captions, padding=True, return_tensors="pt")
    text = _features(model.get_text_features(**tokens))
    image = _features(model.get_image_features(pixel_values=normalise(images_uint8)))
    return torch.nn.functional.normalize(image, dim=-1), torch.nn.functional.normalize(text, dim=-1)


def train_tiny_clip(recipe: TinyClipRecipe, stop_at_step: int | None = None):
    from transformers import CLIPImageProcessor, CLIPProcessor

    from mixkit.training.training_result import TrainingResult

    clock = start_recipe(recipe)
    world = base_world()
    tokenizer = build_world_tokenizer()
    if recipe.shape_variants:
        variants = render_shape_variants(recipe.train_images, recipe.seed, world, recipe.image_size)
        train, scenes_per_batch = variants.tensors, max(1, recipe.batch_size // variants.variants)
    else:
        train = render_world(recipe.train_images, recipe.seed, world, recipe.image_size)
    valid = render_world(min(2048, recipe.train_images), recipe.seed + 1, world, recipe.image_size)
    model = build_tiny_clip(recipe, len(tokenizer))
    shape_head = AttributeHead(recipe.hidden_size, world, recipe.layout_head)
    targets = shape_head.targets(train.scenes)
    optimizer = torch.optim.AdamW([*model.parameters(), *shape_head.parameters()], lr=recipe.learning_rate,
                                  weight_decay=recipe.weight_decay)
    generator = torch.Generator().manual_seed(recipe.seed)
    tokens = tokenizer(train.captions, padding="max_length", max_length=32, truncation=True, return_tensors="pt")
    curve = []
    total = recipe.shape_warmup_steps + recipe.steps
    modules, first_step, last_state = {"model": model, "shape_head": shape_head}, 0, None
    if recipe.resume_from:
        resumed = read_recipe_state(recipe.resume_from, name="tiny-clip", recipe=recipe, total_steps=total)
        if stop_at_step is not None and stop_at_step <= resumed.step:
            raise ValueError(f"--stop-at-step {stop_at_step} is not after step {resumed.step}, where "
                             f"{resumed.path} resumes; stop at a later step")
        restore_recipe_state(resumed, name="tiny-clip", modules=modules, ema=None, optimizer=optimizer,
                             generator=generator)
        first_step, curve, clock, last_state = resumed.step, resumed.curve, resumed.clock, resumed.path
        logger.info("tiny-clip resumes %s at step %d", resumed.path, first_step)
    for step in range(first_step, total):
        contrastive = step >= recipe.shape_warmup_steps
        for group in optimizer.param_groups:
            group["lr"] = recipe.learning_rate * _learning_rate_factor(recipe, step)
        if recipe.shape_variants:
            scenes = torch.randint(0, recipe.train_images, (scenes_per_batch,), generator=generator)
            index = (scenes[:, None] * variants.variants + torch.arange(variants.variants))[variants.valid[scenes]]
        else:
            index = torch.randint(0, len(train), (recipe.batch_size,), generator=generator)
        loss = _step_loss(recipe, model, shape_head, train.images[index], tokens.input_ids[index],
                          tokens.attention_mask[index], targets[index], contrastive)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        stopping = stop_at_step is not None and step + 1 >= stop_at_step
        if (step + 1) % 100 == 0 or step + 1 == total or stopping:  # the record needs the last step's point
            curve.append(_curve_point(recipe, model, shape_head, tokenizer, valid, world, step + 1, loss, clock))
        if step + 1 < total and (stopping or (recipe.checkpoint_every and (step + 1) % recipe.checkpoint_every == 0)):
            last_state = save_recipe_state(state_folder(recipe.output), name="tiny-clip", recipe=recipe, step=step + 1,
                                           modules=modules, ema=None, optimizer=optimizer, generator=generator,
                                           curve=curve, metrics={}, clock=clock)
        if stopping:
            break
    model.eval()
    # Measured before the fp16 cast so the record and the curve describe the same (fp32) weights.
    metrics = {key: curve[-1][key] for key in ("retrieval_top1", "shape_top1")}
    metrics.update({f"{name}_top1": round(variant_accuracy(model, tokenizer, valid, world, name), 4)
                    for name in ("position", "size")})
    output = Path(recipe.output)
    image_processor = CLIPImageProcessor(size={"shortest_edge": recipe.image_size},
                                         crop_size={"height": recipe.image_size, "width": recipe.image_size},
                                         image_mean=list(CLIP_MEAN), image_std=list(CLIP_STD))
    with atomic_output_folder(output, replace=True) as staged:  # an earlier output stays until this one is whole
        model.half().save_pretrained(staged, safe_serialization=True)
        CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(staged)
        write_record(staged, "tiny-clip", recipe, metrics, curve, clock)
    return TrainingResult(steps=step + 1, seconds=clock.wall(), output=output, first_step=first_step,
                          last_checkpoint=last_state)


def _learning_rate_factor(recipe: TinyClipRecipe, step: int) -> float:
    """Linear warm-up through the shape warm-up phase; warm-up then cosine over the contrastive phase."""
    contrastive_step = step - recipe.shape_warmup_steps
    if contrastive_step < 0:
        return min(1.0, (step + 1) / recipe.warmup_steps)
    return warmup_cosine(contrastive_step, recipe.steps, recipe.warmup_steps)


def _step_loss(recipe: TinyClipRecipe, model, shape_head: AttributeHead, images, input_ids, attention_mask, targets,
               contrastive: bool) -> torch.Tensor:
    """One batch's loss: the head's (image tower only) during the shape warm-up, plus CLIP's after it."""
    with cpu_bf16_autocast(recipe.bf16):
        pooled = model.vision_model(pixel_values=normalise(images)).pooler_output
        if contrastive:
            image_features = model.visual_projection(pooled)
            text_features = _features(model.get_text_features(input_ids=input_ids, attention_mask=attention_mask))
    loss = torch.zeros(())
    if contrastive:
        loss = clip_contrastive_loss(image_features.float(), text_features.float(), model.logit_scale)
    if recipe.shape_head_weight:
        loss = loss + recipe.shape_head_weight * shape_head.loss(pooled.float(), targets, layout=contrastive)
    return loss


def _curve_point(recipe: TinyClipRecipe, model, shape_head: AttributeHead, tokenizer, valid, world, step: int,
                 loss: torch.Tensor, clock: RecipeClock) -> dict:
    model.eval()
    accuracy = retrieval_accuracy(model, tokenizer, valid)
    shape = variant_accuracy(model, tokenizer, valid, world, "shape")
    # An untrained head (shape_head_weight=0) would report noise, so its reading is left out then.
    head = shape_head_accuracy(model, shape_head, valid, world) if recipe.shape_head_weight else None
    model.train()
    logger.info("tiny-clip step %d loss %.4f top1 %.3f shape %.3f head %s (%.0f s)", step, loss.item(),
                accuracy, shape, "-" if head is None else f"{head:.3f}", clock.wall())
    return {"step": step, "loss": round(loss.item(), 4), "retrieval_top1": round(accuracy, 4),
            "shape_top1": round(shape, 4), "wall_seconds": clock.wall(),
            **({"shape_head": round(head, 4)} if head is not None else {})}
