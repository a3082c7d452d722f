"""AppFlow's overhead on `text_guided_inpainting` against the same models called by hand.

Run from the repository root:  python -m benchmarks.appflow_overhead  [--runs 5 --steps 4 ...]

"By hand" is what a user writes without AppFlow: transformers' Grounding DINO and SAM with their
processors, the union of the masks, then mixkit's `ImageToImage` with `mask=` on the same SD
model (the same denoising code, so the difference is the chain: validation, binding, cache
lookups, type checks). Two numbers per side:

* time to first result: loading every model + one call, in a fresh process per measurement (the
  modules both sides use are imported before the clock starts), so neither side inherits the
  other's warm-up (lazy imports, allocator, kernels);
* steady-state latency: the median of `--runs` further calls in one process, timed in
  alternation (A B A B ...) so drift in machine load does not bias one side.

Without model arguments it builds the tiny test models (fast, CPU); pass real ones with
--detector IDEA-Research/grounding-dino-tiny --segmenter facebook/sam-vit-base --sd <SD 1.5 folder>.
The issue's target is an overhead under 5%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def by_hand(detector_dir, segmenter_dir, sd_dir, image, what: str, into: str, steps: int, box_threshold: float):
    """The chain written out with transformers + mixkit pipelines; returns a callable and its load time."""
    import torch
    from transformers import AutoProcessor, GroundingDinoForObjectDetection, SamModel

    from appflow.tasks.masks import union_mask_image
    from pipelines.img2img import ImageToImage

    start = time.perf_counter()
    dino_processor = AutoProcessor.from_pretrained(detector_dir)
    dino = GroundingDinoForObjectDetection.from_pretrained(detector_dir).eval()
    sam_processor = AutoProcessor.from_pretrained(segmenter_dir)
    sam = SamModel.from_pretrained(segmenter_dir).eval()
    inpaint = ImageToImage.from_pretrained(sd_dir)
    loaded = time.perf_counter() - start

    def run():
        with torch.no_grad():
            inputs = dino_processor(images=image, text=what.lower().rstrip(".") + ".", return_tensors="pt")
            found = dino_processor.post_process_grounded_object_detection(
                dino(**inputs), inputs["input_ids"], threshold=box_threshold, text_threshold=0.25,
                target_sizes=[(image.height, image.width)])[0]
            boxes = found["boxes"]
            sam_inputs = sam_processor(images=image, input_boxes=[boxes.tolist()], return_tensors="pt")
            predicted = sam(pixel_values=sam_inputs["pixel_values"], input_boxes=sam_inputs["input_boxes"],
                            multimask_output=False).pred_masks
            masks = sam_processor.post_process_masks(predicted, sam_inputs["original_sizes"],
                                                     sam_inputs["reshaped_input_sizes"])[0][:, 0]
        mask = union_mask_image(masks, 4)
        multiple = inpaint.model.vae_scale_factor
        return inpaint(prompt=into, init_images=[image], mask=mask, width=image.width - image.width % multiple,
                       height=image.height - image.height % multiple, denoising_strength=1.0, steps=steps,
                       seed=1).images[0]

    return run, loaded


def make_image(size: int):
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), (30, 60, 200))
    ImageDraw.Draw(image).ellipse((size // 4, size // 4, size * 3 // 4, size * 3 // 4), fill="red")
    return image


def build_runners(side: str, models: list[str], image, steps: int, threshold: float):
    """(load and return a callable) for one side; 'chain' is AppFlow, 'hand' the same calls by hand."""
    if side == "hand":
        return by_hand(*models, image, "ball", "an orange", steps, threshold)[0]
    from appflow import Appflow, ModelCache

    flow = Appflow("text_guided_inpainting", models=models, cache=ModelCache(), steps=steps, seed=1,
                   box_threshold=threshold)
    return lambda: flow(image=image, prompt="ball", inpaint_prompt="an orange")["result"]


def import_everything() -> None:
    """Both sides import the same modules before timing: import time is part of neither measurement."""
    from transformers import AutoProcessor, GroundingDinoForObjectDetection, SamModel  # noqa: F401

    import appflow.loaders  # noqa: F401
    import pipelines.img2img  # noqa: F401
    from appflow.tasks.masks import union_mask_image  # noqa: F401


def first_result_seconds(side: str, models: list[str], size: int, steps: int, threshold: float, threads: int) -> float:
    """Time to first result in a fresh process (models not loaded, nothing warmed up)."""
    import subprocess
    import sys

    code = ("import sys, time, torch; from benchmarks.appflow_overhead import *; "
            f"torch.set_num_threads({threads}) if {threads} else None; import_everything(); image = make_image({size}); "
            f"start = time.perf_counter(); build_runners({side!r}, {models!r}, image, {steps}, {threshold})(); "
            "print(time.perf_counter() - start)")
    env = {**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detector"), parser.add_argument("--segmenter"), parser.add_argument("--sd")
    parser.add_argument("--runs", type=int, default=5, help="steady-state calls per side")
    parser.add_argument("--first-runs", type=int, default=1, help="fresh processes per side for time to first result")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--size", type=int, default=64, help="input image side in pixels")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import_everything()
    scratch = tempfile.TemporaryDirectory()
    detector, segmenter, sd = args.detector, args.segmenter, args.sd
    if not (detector and segmenter and sd):
        from mixkit.testing.tiny_appflow import build_tiny_grounding_dino, build_tiny_sam
        from mixkit.testing.tiny_models import build_tiny_sd1

        root = Path(scratch.name)
        detector = detector or str(build_tiny_grounding_dino(root / "dino"))
        segmenter = segmenter or str(build_tiny_sam(root / "sam"))
        sd = sd or str(build_tiny_sd1(root / "sd"))
    models = [str(detector), str(segmenter), str(sd)]
    # Box threshold 0 so the tiny random detector always finds something to inpaint.
    threshold = 0.0 if not args.detector else 0.35
    image = make_image(args.size)

    # 1. Time to first result: fresh processes, sides alternated (hand, chain, chain, hand, ...)
    first = {"chain": [], "hand": []}
    for index in range(args.first_runs):
        for side in (("hand", "chain") if index % 2 == 0 else ("chain", "hand")):
            first[side].append(first_result_seconds(side, models, args.size, args.steps, threshold, args.threads))

    # 2. Steady state: both sides loaded in this process, calls alternated
    chain, manual = build_runners("chain", models, image, args.steps, threshold), \
        build_runners("hand", models, image, args.steps, threshold)
    same = np.array_equal(np.asarray(chain()), np.asarray(manual()))
    times = {"chain": [], "hand": []}
    for _ in range(args.runs):
        for side, run in (("chain", chain), ("hand", manual)):
            start = time.perf_counter()
            run()
            times[side].append(time.perf_counter() - start)

    print(f"text_guided_inpainting, {args.size}x{args.size}, {args.steps} steps, torch threads "
          f"{torch.get_num_threads()}, {args.first_runs} fresh process(es) and {args.runs} steady runs per side; "
          f"identical images: {same}")
    print(f"{'':24}{'AppFlow':>12}{'by hand':>12}{'overhead':>10}")
    for label, values in (("time to first result", first), ("steady-state latency", times)):
        a, b = statistics.median(values["chain"]), statistics.median(values["hand"])
        print(f"{label:24}{a * 1000:10.1f}ms{b * 1000:10.1f}ms{(a / b - 1) * 100:9.1f}%")
    scratch.cleanup()


if __name__ == "__main__":
    main()
