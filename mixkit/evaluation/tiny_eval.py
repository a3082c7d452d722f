"""The model-independent parts of `mixkit eval tiny`: the prompt set, generator and captioner scoring.

Generators and captioners are passed in as plain callables (prompt -> image, image -> caption), so
this module needs no model of its own and the harness works unchanged for mixkit-tiny-sd, a real
SD checkpoint, or (as in the tests) the world's own renderer, which must score ~100%.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PIL import Image

from mixkit.data.shapes import WorldConfig, generate_samples
from mixkit.data.shapes_captions import caption_scene, parse_caption
from mixkit.data.shapes_vocab import Scene
from mixkit.evaluation.judge_model import AttributeJudge
from mixkit.evaluation.scoring import score_images


@dataclass(frozen=True)
class EvalPrompt:
    """A prompt of the evaluation set and the scene it describes."""

    prompt: str
    scene: Scene
    split: str


def eval_prompts(world: WorldConfig, count: int = 200, seed: int = 1234, two_shape_count: int = 0,
                 style: str = "plain") -> list[EvalPrompt]:
    """A fixed prompt set: single-shape prompts from the held-out combinations (or any, if none are held
    out), plus `two_shape_count` two-shape prompts; the same arguments always give the same prompts."""
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    if not isinstance(two_shape_count, int) or two_shape_count < 0:
        raise ValueError(f"two_shape_count must be a non-negative integer, got {two_shape_count!r}")
    split = "held_out" if world.held_out else "train"
    single_world = WorldConfig(**{**world.__dict__, "two_shape_fraction": 0.0})
    prompts = [EvalPrompt(caption_scene(s.scene, style), s.scene, split)  # type: ignore[arg-type]
               for s in generate_samples(count, seed, single_world, split=split)]
    if two_shape_count:
        pair_world = WorldConfig(**{**world.__dict__, "two_shape_fraction": 1.0})
        prompts += [EvalPrompt(caption_scene(s.scene, style), s.scene, "train")  # type: ignore[arg-type]
                    for s in generate_samples(two_shape_count, seed, pair_world, split="train")]
    return prompts


def evaluate_generator(generate: Callable[[str], Image.Image], judge: AttributeJudge,
                       prompts: Sequence[str]) -> dict[str, float]:
    """Generate one image per prompt and score it with the judge (see `score_images` for the keys)."""
    if not callable(generate):
        raise TypeError(f"generate must be a callable prompt -> PIL image, got {type(generate).__name__}")
    images = []
    for prompt in prompts:
        image = generate(prompt)
        if not isinstance(image, Image.Image):
            raise TypeError(f"generate({prompt!r}) returned {type(image).__name__}, expected a PIL image")
        images.append(image)
    return score_images(judge, images, prompts)


def score_captions(captions: Sequence[str], truths: Sequence[Scene]) -> dict[str, float]:
    """Attribute accuracy of predicted captions against the true scenes.

    A caption that does not parse counts as wrong on every attribute (a captioner must speak the
    world's language). Only attributes the caption is expected to name are checked: shape, colour
    and background always; size and position when the true scene has them and the caption names
    them (`*_named` reports how often it did).
    """
    if len(captions) != len(truths):
        raise ValueError(f"got {len(captions)} captions but {len(truths)} true scenes; pass one per image")
    if not captions:
        raise ValueError("no captions to score")
    hits: dict[str, list[bool]] = defaultdict(list)
    for caption, truth in zip(captions, truths):
        try:
            parsed = parse_caption(caption)
        except (ValueError, TypeError):
            parsed = None
        hits["parsed"].append(parsed is not None)
        ok_count = parsed is not None and len(parsed.objects) == len(truth.objects)
        hits["count"].append(ok_count)
        hits["background"].append(parsed is not None and parsed.background == truth.background)
        if len(truth.objects) == 1:
            got = parsed.objects[0] if ok_count else None
            hits["shape"].append(got is not None and got.shape == truth.objects[0].shape)
            hits["colour"].append(got is not None and got.colour == truth.objects[0].colour)
            for name in ("size", "position"):
                value = getattr(got, name) if got is not None else None
                if getattr(truth.objects[0], name) is not None:
                    hits[f"{name}_named"].append(value is not None)
                    if value is not None:
                        hits[name].append(value == getattr(truth.objects[0], name))
        else:
            got_pairs = sorted((o.shape, o.colour) for o in parsed.objects) if ok_count else None
            hits["two/objects"].append(got_pairs == sorted((o.shape, o.colour) for o in truth.objects))
        checked = [hits[k][-1] for k in ("count", "background")]
        checked += [hits[k][-1] for k in ("shape", "colour")] if len(truth.objects) == 1 else [hits["two/objects"][-1]]
        hits["all"].append(all(checked))
    return {key: sum(values) / len(values) for key, values in sorted(hits.items()) if values}


def round_trip(generate: Callable[[str], Image.Image], caption: Callable[[Image.Image], str],
               prompts: Sequence[EvalPrompt]) -> dict[str, float]:
    """Text -> image -> caption: how often the caption of a generated image names the prompt's attributes."""
    captions = [caption(generate(p.prompt)) for p in prompts]
    return score_captions(captions, [p.scene for p in prompts])
