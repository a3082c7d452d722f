"""Score images against shapes-world prompts with the attribute judge.

`score_images` is what `mixkit eval tiny` reports: for each prompt, the judge reads the image and
every attribute the prompt names is checked (a plain prompt names shape, colour and background; a
rich one also size and position, or the relation of two shapes). Single- and two-shape prompts are
reported separately because the targets differ (issue 7: single-shape attributes ≥ 95% each,
two-shape prompts measured and reported).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from torch.nn import functional as F

from mixkit.data.shapes_captions import parse_caption
from mixkit.data.shapes_vocab import Scene
from mixkit.evaluation.judge_model import AttributeJudge

# Slot order of a two-shape prompt: "A left of B" puts A in slot 1 (left); "A below B" puts B in slot 1 (top).
_RELATION_LAYOUT = {"left of": ("horizontal", False), "right of": ("horizontal", True),
                    "above": ("vertical", False), "below": ("vertical", True)}


def images_to_tensor(images: Sequence[Image.Image] | torch.Tensor, size: int) -> torch.Tensor:
    """PIL images or an (N, 3, H, W) tensor in [0, 1] as an (N, 3, size, size) float tensor."""
    if isinstance(images, torch.Tensor):
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"image tensor must be (N, 3, H, W), got shape {tuple(images.shape)}")
        pixels = images.float()
    else:
        if not all(isinstance(image, Image.Image) for image in images):
            raise TypeError("images must be PIL images or one (N, 3, H, W) tensor in [0, 1]")
        arrays = [np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0 for image in images]
        if len({a.shape for a in arrays}) > 1:
            arrays = [np.asarray(image.convert("RGB").resize((size, size), Image.Resampling.BOX),
                                 dtype=np.float32) / 255.0 for image in images]
        pixels = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
    if pixels.shape[-2:] != (size, size):
        # antialias=True box-like filtering when shrinking, matching how the world renders its images.
        pixels = F.interpolate(pixels, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return pixels.clamp(0, 1)


def judge_predict(judge: AttributeJudge, images: Sequence[Image.Image] | torch.Tensor,
                  batch_size: int = 128) -> list[dict[str, str]]:
    """The judge's reading of each image: layout, background, and per-slot shape/colour/size (+ position)."""
    if not isinstance(judge, AttributeJudge):
        raise TypeError(f"judge must be an AttributeJudge (see load_judge), got {type(judge).__name__}")
    config = judge.config
    pixels = images_to_tensor(images, config.image_size)
    vocab = {"layout": config.layouts, "background": config.colours, "position": config.positions,
             "shape1": config.shapes, "colour1": config.colours, "size1": config.sizes,
             "shape2": config.shapes, "colour2": config.colours, "size2": config.sizes}
    readings: list[dict[str, str]] = []
    judge.eval()
    with torch.no_grad():
        for start in range(0, len(pixels), batch_size):
            logits = judge(pixels[start:start + batch_size])
            indices = {name: value.argmax(1).tolist() for name, value in logits.items()}
            for row in range(len(indices["layout"])):
                readings.append({name: vocab[name][indices[name][row]] for name in indices})
    return readings


def score_images(judge: AttributeJudge, images: Sequence[Image.Image] | torch.Tensor,
                 prompts: Sequence[str]) -> dict[str, float]:
    """Accuracy of each attribute the prompts name, e.g. {"single/shape": 0.97, "two/relation": 0.8, ...}.

    Keys: `single/<attr>` for shape, colour, background, size, position (the last two only over
    prompts that name them) and `single/all` (every named attribute right); `two/count`,
    `two/shapes`, `two/colours`, `two/background`, `two/relation`, `two/all`; `single/n`, `two/n`
    are the prompt counts.
    """
    prompts = list(prompts)
    count = len(images)
    if count != len(prompts):
        raise ValueError(f"got {count} images but {len(prompts)} prompts; pass one prompt per image")
    if count == 0:
        raise ValueError("no images to score")
    scenes = []
    for number, prompt in enumerate(prompts):
        try:
            scenes.append(parse_caption(prompt))
        except (ValueError, TypeError) as error:
            raise ValueError(f"prompt {number} cannot be scored: {error}") from None
    readings = judge_predict(judge, images)
    hits: dict[str, list[bool]] = defaultdict(list)
    for scene, reading in zip(scenes, readings):
        checks = _single_checks(scene, reading) if len(scene.objects) == 1 else _pair_checks(scene, reading)
        group = "single" if len(scene.objects) == 1 else "two"
        for name, ok in checks.items():
            hits[f"{group}/{name}"].append(ok)
        hits[f"{group}/all"].append(all(checks.values()))
    scores: dict[str, float] = {key: sum(values) / len(values) for key, values in sorted(hits.items())}
    for group in ("single", "two"):
        if f"{group}/all" in hits:
            scores[f"{group}/n"] = float(len(hits[f"{group}/all"]))
    return scores


def _single_checks(scene: Scene, reading: dict[str, str]) -> dict[str, bool]:
    obj = scene.objects[0]
    checks = {"count": reading["layout"] == "single", "shape": reading["shape1"] == obj.shape,
              "colour": reading["colour1"] == obj.colour, "background": reading["background"] == scene.background}
    if obj.size is not None:
        checks["size"] = reading["size1"] == obj.size
    if obj.position is not None:
        checks["position"] = reading["position"] == obj.position
    return checks


def _pair_checks(scene: Scene, reading: dict[str, str]) -> dict[str, bool]:
    seen = [(reading["shape1"], reading["colour1"]), (reading["shape2"], reading["colour2"])]
    wanted = [(o.shape, o.colour) for o in scene.objects]
    if scene.relation is None:
        # "A and B" fixes no order: accept either slot assignment, judged by the best one.
        orders = [wanted, wanted[::-1]]
    else:
        orders = [wanted[::-1] if _RELATION_LAYOUT[scene.relation][1] else wanted]
    shapes = any([s for s, _ in seen] == [s for s, _ in order] for order in orders)
    colours = any([c for _, c in seen] == [c for _, c in order] for order in orders)
    checks = {"count": reading["layout"] != "single", "shapes": shapes, "colours": colours,
              "objects": any(seen == order for order in orders),
              "background": reading["background"] == scene.background}
    if scene.relation is not None:
        checks["relation"] = reading["layout"] == _RELATION_LAYOUT[scene.relation][0] and checks["objects"]
    return checks
