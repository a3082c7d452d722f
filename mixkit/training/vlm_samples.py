"""Image-to-text training samples for the BLIP-2 stage-2 and MiniGPT-4 trainers, and their batch order.

A sample is an image, an optional question and the text to learn (caption or answer). They come
from a kohya folder (the .txt caption is the target) or a JSONL manifest whose lines carry either
`text`/`caption` (captioning) or `question` + `answer` (VQA, as in BLIP-2's VQA fine-tuning).
The order of batches is a pure function of (seed, epoch), so resume and multi-process runs see
exactly the batches a single uninterrupted run would.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mixkit.data.jsonl_manifest import manifest_entry
from mixkit.models.vlm.modular.task_config import CLIP_IMAGE_MEAN, CLIP_IMAGE_STD

logger = logging.getLogger(__name__)

# CLIP's normalisation, which BLIP-2's EVA-CLIP image encoder (and so MiniGPT-4) also uses.
CLIP_MEAN, CLIP_STD = CLIP_IMAGE_MEAN, CLIP_IMAGE_STD


@dataclass(frozen=True)
class VlmSample:
    """One training pair; `question` is None for a caption."""

    image: Path
    target: str
    question: str | None = None


@dataclass
class VlmSampleScan:
    samples: list[VlmSample] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _manifest_sample(line: str, number: int, manifest: Path) -> VlmSample:
    where = f"{manifest}, line {number}"
    entry = manifest_entry(line, where, '{"image": "a.png", "question": "what colour?", "answer": "red"}')
    image = Path(entry["image"]) if Path(entry["image"]).is_absolute() else manifest.parent / entry["image"]
    if "question" in entry or "answer" in entry:
        question, answer = entry.get("question"), entry.get("answer")
        if not isinstance(question, str) or not question.strip() or not isinstance(answer, str) or not answer.strip():
            raise ValueError(f"{where}: a VQA line needs non-empty 'question' and 'answer' strings, "
                             f"got question={question!r}, answer={answer!r}.")
        return VlmSample(image, answer.strip(), question.strip())
    text = entry.get("text", entry.get("caption"))
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where} needs a non-empty 'text' (or 'caption') string, or 'question' and 'answer' strings.")
    return VlmSample(image, text.strip())


def scan_vlm_samples(dataset: str | Path, *, missing_captions: str = "error",
                     caption_extension: str = ".txt") -> VlmSampleScan:
    """Every usable sample of a kohya folder or JSONL manifest; unreadable images are skipped and reported."""
    from mixkit.data import scan_kohya_folder
    from mixkit.data.image_probe import probe_image

    path = Path(dataset).expanduser()
    scan = VlmSampleScan()
    if path.suffix.lower() != ".jsonl":
        report = scan_kohya_folder(path, missing_captions=missing_captions, caption_extension=caption_extension)
        scan.skipped = list(report.skipped)
        scan.samples = [VlmSample(r.path, r.caption) for r in report.records for _ in range(r.repeats)]
    else:
        if not path.is_file():
            raise FileNotFoundError(f"JSONL manifest {str(path)!r} does not exist; pass a .jsonl file or a folder.")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            sample = _manifest_sample(line, number, path)
            size = probe_image(sample.image) if sample.image.is_file() else f"file not found (line {number})"
            if isinstance(size, str):
                scan.skipped.append((sample.image, size))
                logger.warning("Skipping training image %s: %s", sample.image, size)
                continue
            scan.samples.append(sample)
    empty_targets = [s.image for s in scan.samples if not s.target.strip()]
    if empty_targets:
        raise ValueError(f"{dataset}: {len(empty_targets)} sample(s) have an empty caption (first: {empty_targets[0]}); "
                         "an image-to-text model needs a text to learn. Write captions or remove those images.")
    if not scan.samples:
        raise ValueError(f"{dataset} has no usable samples (none found, or all images unreadable); add images "
                         "with .txt captions, or JSONL lines with image and text / question and answer.")
    return scan


def epoch_batches(num_samples: int, batch_size: int, epoch: int, seed: int) -> list[list[int]]:
    """The batches of `epoch`: a seeded shuffle cut into batches (the last one may be smaller)."""
    order = list(range(num_samples))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return [order[i:i + batch_size] for i in range(0, num_samples, batch_size)]


def batch_for_step(num_samples: int, batch_size: int, seed: int, global_index: int) -> list[int]:
    """Sample indices of global batch `global_index` (= step * processes + rank)."""
    per_epoch = -(-num_samples // batch_size)
    epoch, position = divmod(global_index, per_epoch)
    return epoch_batches(num_samples, batch_size, epoch, seed)[position]


def image_batch(paths: list[Path], size: int, mean=CLIP_MEAN, std=CLIP_STD) -> torch.Tensor:
    """Pixels exactly as `load_vlm` prepares them (square bicubic resize, normalised), so training matches use."""
    from mixkit.io.images import load_image
    from mixkit.models.vlm.modular.image_processing import images_to_pixel_values

    return images_to_pixel_values([load_image(path) for path in paths], size, mean, std)


def format_prompt(prompt: str, sample: VlmSample, source: str) -> str:
    """The unsupervised text before the target: `prompt`, with `{}` filled by the sample's question."""
    has_slot = "{}" in prompt
    if sample.question is not None and not has_slot:
        raise ValueError(f"{source}: {sample.image} has a question but prompt {prompt!r} has no '{{}}' for it; "
                         "use e.g. prompt='Question: {} Short answer:' (BLIP-2's VQA prompt).")
    if sample.question is None and has_slot:
        raise ValueError(f"{source}: {sample.image} has no question but prompt {prompt!r} expects one ('{{}}'); "
                         "give every JSONL line 'question' and 'answer', or use a prompt without '{}'.")
    return prompt.format(sample.question) if has_slot else prompt
