"""Captioning throughput: mixkit's batched `caption()` vs a straightforward transformers loop.

Both run the same BLIP-2-OPT weights, greedy decoding, and exactly `--new-tokens` new tokens
(`min_new_tokens` is set too, so random weights that emit EOS early cannot skew the ratio).
The baseline is what a user writes from the model card: processor + `generate` per image.
Variants alternate (loop, batch sizes, loop, ...) for `--rounds` rounds in one process and each
figure is the median, printed as ratios, so they compare like with like on a shared machine. `--model full` builds the BLIP-2-OPT-2.7B architecture with random weights (~16 GB in
fp32); the default `tiny` model measures framework overhead.

    python -m benchmarks.caption --model tiny --images 16   (from the repository root)
    python -m benchmarks.caption --model full --images 8 --new-tokens 10 --rounds 1   (~6 min per round)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def random_images(count: int, size: int = 224):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(count)]


def build_model(kind: str, attn_implementation: str):
    """A Blip2Adapter and the raw (model, processor) pair sharing its weights."""
    import torch

    from mixkit.models.vlm import load_vlm
    from mixkit.models.vlm.generative import Blip2Adapter

    if kind == "tiny":
        from mixkit.testing.tiny_vlm import build_tiny_blip2

        folder = build_tiny_blip2(tempfile.mkdtemp(prefix="bench-blip2-"), seed=0)
        adapter = load_vlm(folder, attn_implementation=attn_implementation)
        return adapter
    if kind == "full":
        from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2Processor, BlipImageProcessor

        from mixkit.testing.tiny_vlm import IMAGE_TOKEN, tiny_byte_bpe_tokenizer

        tokenizer = tiny_byte_bpe_tokenizer()  # ids fit any vocabulary; the text is meaningless anyway
        # Salesforce/blip2-opt-2.7b's layout: EVA ViT-g (the vision default), BERT-base Q-Former, OPT-2.7B.
        opt_2_7b = dict(model_type="opt", vocab_size=50272, hidden_size=2560, word_embed_proj_dim=2560,
                        num_hidden_layers=32, num_attention_heads=32, ffn_dim=10240, max_position_embeddings=2048,
                        bos_token_id=2, eos_token_id=2, pad_token_id=1)
        config = Blip2Config(text_config=opt_2_7b, image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))
        config._attn_implementation = attn_implementation
        torch.manual_seed(0)
        model = Blip2ForConditionalGeneration(config).eval()
        processor = Blip2Processor(BlipImageProcessor(size={"height": 224, "width": 224}), tokenizer,
                                   num_query_tokens=config.num_query_tokens)
        return Blip2Adapter(model, processor, device=torch.device("cpu"), dtype=torch.float32, source="random blip2-opt-2.7b")
    return load_vlm(kind, attn_implementation=attn_implementation)


def baseline_loop(adapter, images, new_tokens: int) -> float:
    """Images per second of processor + generate, one image at a time."""
    import torch

    start = time.perf_counter()
    for image in images:
        inputs = adapter.processor(images=image, return_tensors="pt")
        with torch.no_grad():
            adapter.model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    return len(images) / (time.perf_counter() - start)


def mixkit_batched(adapter, images, new_tokens: int, batch_size: int) -> float:
    adapter.default_batch_size = batch_size
    start = time.perf_counter()
    adapter.caption(images, max_new_tokens=new_tokens, min_new_tokens=new_tokens)
    return len(images) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny', 'full' (random 2.7B weights) or a BLIP-2 folder/hub id")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "mixkit"], help="mixkit's attention backend")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; each figure is their median")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.images < max(args.batch_sizes):
        parser.error(f"--images ({args.images}) must be at least the largest batch size ({max(args.batch_sizes)})")

    images = random_images(args.images)
    adapter = build_model(args.model, args.attn)
    # Warm both paths up (first-call allocations, lazy imports) before timing either.
    mixkit_batched(adapter, images[:2], 2, 2)
    baseline_loop(adapter, images[:1], 2)
    runs: dict[str, list[float]] = {"loop": [], **{f"batch {b}": [] for b in args.batch_sizes}}
    for _ in range(args.rounds):
        runs["loop"].append(baseline_loop(adapter, images, args.new_tokens))
        for batch_size in args.batch_sizes:
            runs[f"batch {batch_size}"].append(mixkit_batched(adapter, images, args.new_tokens, batch_size))
    base = statistics.median(runs["loop"])
    print(f"model={args.model} images={args.images} new_tokens={args.new_tokens} attn={args.attn} "
          f"rounds={args.rounds} (medians)")
    print(f"transformers loop (batch 1): {base:8.2f} images/s")
    for batch_size in args.batch_sizes:
        ours = statistics.median(runs[f"batch {batch_size}"])
        print(f"mixkit caption batch {batch_size:>3}: {ours:8.2f} images/s  ratio {ours / base:5.2f}x")


if __name__ == "__main__":
    main()
