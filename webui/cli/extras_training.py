"""`mixkit extras`' training-data flags: A1111's Extras "Split oversized images", "Auto focal point crop", "Create
flipped copies" and "Caption" (`pipelines.extras_training`), read into `TrainingSteps`.

The target size of split and focal crop is A1111's (its upscale step's): `--focal-crop WxH` names it and, without
`--scale` / `--scale-to`, makes the upscale A1111's "Scale to WxH" with "Crop to fit" off (the picture resized to
cover WxH, then cropped around its subject), which is A1111's preprocessing recipe; `--scale-to WxH` names it too.
"""

from __future__ import annotations

import argparse

from pipelines.extras_training import CAPTION_CHOICES, EXISTING_CAPTION_ACTIONS, FLIP_CHOICES

DEFAULT_CAPTION_MODEL = "mixkit-tiny-blip2"  # the web UI's Interrogate CLIP caption model by default


def add_training_flags(parser) -> None:
    from pipelines.focal_crop import FocalWeights
    from pipelines.split_oversized import DEFAULT_OVERLAP_RATIO, DEFAULT_SPLIT_THRESHOLD
    from webui.cli.extras import finite_float, size_argument

    weights = FocalWeights()
    g = parser.add_argument_group(
        "training data", "A1111's Extras training-data steps (its old Preprocess images), after the upscale and face "
                         "restoration, in A1111's order: focal crop, caption, flips, split; one source may give "
                         "several files (cat.png, cat-1.png, ...)")
    g.add_argument("--split-oversized", action="store_true",
                   help="cut pictures much taller / wider than the target size into overlapping crops (needs "
                        "--scale-to or --focal-crop)")
    g.add_argument("--split-threshold", type=finite_float, default=DEFAULT_SPLIT_THRESHOLD, metavar="X",
                   help=f"split when the aspect ratio against the target's is at most X, 0-1 (default "
                        f"{DEFAULT_SPLIT_THRESHOLD})")
    g.add_argument("--overlap-ratio", type=finite_float, default=DEFAULT_OVERLAP_RATIO, metavar="X",
                   help=f"how much the split crops overlap, 0-0.9 (default {DEFAULT_OVERLAP_RATIO})")
    g.add_argument("--focal-crop", type=size_argument, default=None, metavar="WxH",
                   help="A1111's Auto focal point crop to WxH: resize to cover WxH, crop around faces, entropy and "
                        "edges")
    g.add_argument("--focal-face-weight", type=finite_float, default=weights.face, metavar="X",
                   help=f"0-1 (default {weights.face}); faces are found by the RetinaFace of --gfpgan-models-path / "
                        "--codeformer-models-path when one holds it, else not at all")
    g.add_argument("--focal-entropy-weight", type=finite_float, default=weights.entropy, metavar="X",
                   help=f"0-1 (default {weights.entropy})")
    g.add_argument("--focal-edges-weight", type=finite_float, default=weights.edges, metavar="X",
                   help=f"0-1 (default {weights.edges})")
    g.add_argument("--focal-debug", action="store_true",
                   help="also save the resized picture with the focal points and the crop drawn (NAME-focal-crop-debug"
                        ".png)")
    g.add_argument("--flip", action="append", default=[], metavar="WHICH", type=str.lower,
                   choices=[choice.lower() for choice in FLIP_CHOICES],
                   help="add a flipped copy: horizontal, vertical or both (repeatable)")
    g.add_argument("--caption", action="append", default=[], metavar="WHICH", type=str.lower,
                   choices=[choice.lower() for choice in CAPTION_CHOICES],
                   help="write a caption to NAME.txt beside each file: deepbooru (the tags of "
                        "--deepdanbooru-models-path's tagger, A1111's default DeepBooru settings) and / or blip; "
                        "both: the tags, then the caption, joined with ', ' as A1111's (repeatable)")
    g.add_argument("--caption-model", default=DEFAULT_CAPTION_MODEL, metavar="MODEL",
                   help=f"the BLIP captioner (a mixkit VLM name or folder; default {DEFAULT_CAPTION_MODEL})")
    g.add_argument("--deepdanbooru-models-path", default=None, metavar="FOLDER",
                   help="with --caption deepbooru: the folder holding DeepDanbooru's model-resnet_custom_v3.pt "
                        "(A1111's models/torch_deepdanbooru)")
    g.add_argument("--existing-caption", default="ignore", type=str.lower,
                   choices=[action.lower() for action in EXISTING_CAPTION_ACTIONS],
                   help="a NAME.txt already there: ignore (replace it), keep, prepend or append (A1111's 'Action for "
                        "existing captions'; default ignore)")


def training_steps_of(args: argparse.Namespace):
    """The flags as `TrainingSteps`, checked (errors naming the flags)."""
    from pipelines.extras_training import TrainingSteps, check_training_steps
    from pipelines.focal_crop import FocalWeights

    by_lower = {choice.lower(): choice for choice in (*FLIP_CHOICES, *CAPTION_CHOICES)}
    steps = TrainingSteps(split=args.split_oversized, split_threshold=args.split_threshold,
                          overlap_ratio=args.overlap_ratio, focal_crop=args.focal_crop is not None,
                          focal_weights=FocalWeights(args.focal_face_weight, args.focal_entropy_weight,
                                                     args.focal_edges_weight),
                          focal_debug=args.focal_debug, flips=tuple(by_lower[flip] for flip in args.flip),
                          captions=tuple(by_lower[caption] for caption in args.caption))
    try:
        steps = check_training_steps(steps)
    except ValueError as error:
        message = str(error)
        for field, flag in (("split_threshold", "--split-threshold"), ("overlap_ratio", "--overlap-ratio"),
                            ("focal point face weight", "--focal-face-weight"),
                            ("focal point entropy weight", "--focal-entropy-weight"),
                            ("focal point edges weight", "--focal-edges-weight"), ("Caption:", "--caption:")):
            message = message.replace(field, flag)
        raise ValueError(message) from None
    if args.focal_debug and args.focal_crop is None:
        raise ValueError("--focal-debug goes with --focal-crop WxH")
    return steps


def resolve_target_flags(args: argparse.Namespace) -> None:
    """`--focal-crop WxH` as A1111's target: it becomes `--scale-to WxH --no-crop` when no size flag is given; a
    different `--scale-to` or a `--scale` is refused. `--split-oversized` needs a target size of its own."""
    if args.focal_crop is not None:
        if args.scale is not None:
            raise ValueError("--focal-crop WxH sets the target size; --scale would set another (A1111's 'Scale by' "
                             "target); leave out --scale, or give --scale-to WxH with the same size")
        if args.scale_to is None:
            args.scale_to, args.no_crop = args.focal_crop, True
        elif args.scale_to != args.focal_crop:
            raise ValueError(f"--focal-crop {args.focal_crop[0]}x{args.focal_crop[1]} and --scale-to "
                             f"{args.scale_to[0]}x{args.scale_to[1]} name two target sizes; give one, or the same")
    if args.split_oversized and args.scale_to is None:
        raise ValueError("--split-oversized needs a target size: --scale-to WxH or --focal-crop WxH (with --scale "
                         "the target has the picture's own aspect, so nothing would be split)")


# what a caption model that cannot load spares: the models load after every check, before the first picture
NOTHING_DONE = "no image was processed"


def captioner_of(args: argparse.Namespace, steps):
    """The BLIP captioner when --caption blip is given, else None; loaded now, so a model that cannot load is one
    error naming --caption-model (`webui.cli.model_loads.ModelLoadError`) before any file is written."""
    if "BLIP" not in steps.captions:
        return None
    from pipelines.extras_training import vlm_captioner
    from webui.cli.model_loads import loaded_now

    return loaded_now("--caption-model", args.caption_model, lambda: vlm_captioner(args.caption_model), NOTHING_DONE)


def deepbooru_of(args: argparse.Namespace, steps):
    """`image -> tags` for --caption deepbooru (A1111's default DeepBooru settings), else None; refused, naming the
    flag, without --deepdanbooru-models-path or with it alone; a wrong folder, or a tagger file that cannot load, is
    one error naming the flag before any file is written (the network is loaded now, not at the first picture)."""
    if "Deepbooru" not in steps.captions:
        if args.deepdanbooru_models_path is not None:
            raise ValueError("--deepdanbooru-models-path only matters with --caption deepbooru")
        return None
    if args.deepdanbooru_models_path is None:
        raise ValueError("--caption deepbooru needs the DeepDanbooru tagger: add --deepdanbooru-models-path FOLDER, "
                         "the folder holding model-resnet_custom_v3.pt (A1111's models/torch_deepdanbooru)")
    from webui.cli.deepbooru_tagger import deepbooru_tagger

    tagger = deepbooru_tagger(args.deepdanbooru_models_path, getattr(args, "device", None))
    tagger.load(NOTHING_DONE)
    return tagger


def existing_caption_action(args: argparse.Namespace) -> str:
    return {action.lower(): action for action in EXISTING_CAPTION_ACTIONS}[args.existing_caption]
