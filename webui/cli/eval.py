"""`mixkit eval tiny`: score a text-to-image model and a captioner on the shapes world with the independent judge.

Images come from the real pipeline (the same code path as `mixkit generate`), so the figures
describe what a user gets; captions from `load_vlm(...).caption`. Defaults are the shipped
mixkit-tiny models; any SD checkpoint or captioner can be scored the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TARGETS = {"single/shape": 0.95, "single/colour": 0.95, "single/background": 0.95,
           "caption/shape": 0.95, "caption/colour": 0.95, "caption/background": 0.95, "round_trip/all": 0.90}
# Used for what neither the command line nor the model's recommended settings say.
EVAL_DEFAULTS = {"steps": 20, "cfg_scale": 5.0, "sampler": "DPM++ 2M"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate models on the shapes world (`mixkit eval tiny`)")
    p.add_argument("suite", choices=["tiny"], help="which evaluation (tiny: the shapes world of mixkit-tiny)")
    p.add_argument("--model", default="mixkit-tiny-sd", help="text-to-image model (default: mixkit-tiny-sd)")
    p.add_argument("--captioner", default="mixkit-tiny-blip2", help="captioner (default: mixkit-tiny-blip2); 'none' skips")
    p.add_argument("--prompts", type=int, default=200, help="single-shape prompts (default 200)")
    p.add_argument("--two-shape", type=int, default=50, help="two-shape prompts, reported separately (default 50)")
    p.add_argument("--held-out-only", action="store_true", help="only prompts whose combination was held out of training")
    p.add_argument("--steps", type=int, default=None,
                   help=f"default: the model's recommended steps (mixkit_generation.json), else {EVAL_DEFAULTS['steps']}")
    p.add_argument("--cfg", type=float, default=None,
                   help=f"default: the model's recommended CFG scale, else {EVAL_DEFAULTS['cfg_scale']}")
    p.add_argument("--sampler", default=None,
                   help=f"default: the model's recommended sampler, else {EVAL_DEFAULTS['sampler']}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16, help="images per pipeline call (the pipeline allows up to 16)")
    p.add_argument("--json", type=Path, default=None, help="also write the scores to this JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in ("prompts", "batch_size", "steps"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.two_shape < 0:
        raise ValueError(f"--two-shape must be >= 0, got {args.two_shape}")
    if args.json is not None and (args.json.is_dir() or not args.json.absolute().parent.is_dir()):
        raise ValueError(f"--json {str(args.json)!r} must be a file name in an existing folder")  # not after the run
    check_generation_flags(args)
    from dataclasses import replace

    from mixkit.evaluation import eval_prompts, load_shipped_judge, score_captions, score_images
    from mixkit.tiny.recipe_common import base_world
    from pipelines.txt2img import TextToImage

    world = base_world() if args.held_out_only else replace(base_world(), held_out=())
    prompts = eval_prompts(world, count=args.prompts, seed=1234, two_shape_count=args.two_shape)
    vlm = None
    if args.captioner != "none":  # loaded first: a wrong captioner fails before minutes of generation
        from mixkit.models.vlm import load_vlm

        vlm = load_vlm(args.captioner)
    pipe = TextToImage.from_pretrained(args.model)
    size = pipe.model.native_size
    settings = _generation_settings(pipe, args)
    print("generating with " + ", ".join(f"{k}={v}" for k, v in settings.items()), file=sys.stderr)
    images = []
    for start in range(0, len(prompts), args.batch_size):
        chunk = [p.prompt for p in prompts[start:start + args.batch_size]]
        result = pipe(prompt=chunk, batch_size=len(chunk), seed=args.seed + start, width=size, height=size, **settings)
        images += result.images
        print(f"generated {len(images)}/{len(prompts)}", file=sys.stderr)
    judge = load_shipped_judge()
    scores = {k: v for k, v in score_images(judge, images, [p.prompt for p in prompts]).items()}
    if vlm is not None:
        from mixkit.data.shapes_render import render_scene

        singles = [p for p in prompts if len(p.scene.objects) == 1]
        truth_images = [render_scene(p.scene, 64, jitter=0.03, jitter_seed=i) for i, p in enumerate(singles)]
        captions = _caption_all(vlm, truth_images, args.batch_size)
        scores.update({f"caption/{k}": v for k, v in score_captions(captions, [p.scene for p in singles]).items()})
        generated = [img for img, p in zip(images, prompts) if len(p.scene.objects) == 1]
        round_captions = _caption_all(vlm, generated, args.batch_size)
        scores.update({f"round_trip/{k}": v for k, v in score_captions(round_captions, [p.scene for p in singles]).items()})
    print(format_scores(scores))
    if args.json:
        args.json.write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")
    return 0


def check_generation_flags(args: argparse.Namespace) -> None:
    """--sampler / --steps / --cfg checked as the pipeline will check them, before the captioner and model loads."""
    from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
    from webui.cli.flag_names import errors_in_flag_terms

    given = {"steps": args.steps, "cfg_scale": args.cfg, "sampler": args.sampler}
    with errors_in_flag_terms():
        check_txt2img_params(Txt2ImgParams(**{k: EVAL_DEFAULTS[k] if v is None else v for k, v in given.items()}),
                             GenerationLimits())


def _generation_settings(pipe, args: argparse.Namespace) -> dict:
    """Steps, CFG and sampler: the command line's, else the model's recommended ones (as `mixkit generate`
    uses them, so a model is scored as it is meant to be run), else `EVAL_DEFAULTS`."""
    from pipelines.base import recommended_for
    from pipelines.params import Txt2ImgParams

    given = {"steps": args.steps, "cfg_scale": args.cfg, "sampler": args.sampler}
    recommended = recommended_for(pipe.model, Txt2ImgParams)
    return {k: given[k] if given[k] is not None else recommended.get(k, EVAL_DEFAULTS[k]) for k in given}


def _caption_all(vlm, images, batch_size: int) -> list[str]:
    return [c for start in range(0, len(images), batch_size) for c in vlm.caption(images[start:start + batch_size])]


def format_scores(scores: dict[str, float]) -> str:
    lines = [f"{'metric':<24} {'score':>7}  target"]
    for key, value in scores.items():
        if key.endswith("/n"):
            continue
        target = TARGETS.get(key)
        mark = "" if target is None else (f">= {target:.0%}  " + ("ok" if value >= target else "BELOW"))
        lines.append(f"{key:<24} {value:>7.1%}  {mark}")
    return "\n".join(lines)
