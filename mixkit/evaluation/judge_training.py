"""Train the attribute judge on clean shapes-world images, on CPU, in a few minutes.

The training data comes from the world's renderer only; images are rendered once into a uint8
tensor (rendering costs more than a training step) and reused for several epochs with light
pixel noise, which makes the judge tolerant of the grain a generator leaves without ever showing
it a generated image. Validation uses a different seed, so its images were never trained on.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch.nn import functional as F

from mixkit.data.shapes import WorldConfig, check_world_config, generate_samples
from mixkit.data.shapes_vocab import COLOURS, SHAPES
from mixkit.evaluation.judge_model import IGNORE, AttributeJudge, JudgeConfig, count_parameters, scene_labels

# The judge must recognise every word of the vocabulary (including the LoRA-only extras), so its
# training world draws from all of them.
FULL_WORLD = WorldConfig(shapes=SHAPES, colours=COLOURS, backgrounds=COLOURS)


@dataclass(frozen=True)
class JudgeTrainingConfig:
    """The judge recipe; recorded next to the saved weights."""

    train_count: int = 12000
    validation_count: int = 2000
    steps: int = 2200
    batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    noise_std: float = 0.02
    seed: int = 0
    validation_seed: int = 1
    curve_every: int = 0  # > 0: also measure validation accuracy every N steps (its CPU time is not counted)
    world: WorldConfig = field(default_factory=lambda: FULL_WORLD)
    judge: JudgeConfig = field(default_factory=JudgeConfig)

    def to_dict(self) -> dict:
        data = {key: value for key, value in asdict(self).items() if key not in ("world", "judge")}
        return {**data, "world": self.world.to_dict(), "judge": self.judge.to_dict()}


def check_training_config(config: JudgeTrainingConfig) -> None:
    if not isinstance(config, JudgeTrainingConfig):
        raise TypeError(f"config must be a JudgeTrainingConfig, got {type(config).__name__}")
    for name in ("train_count", "validation_count", "steps", "batch_size"):
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if config.seed == config.validation_seed:
        raise ValueError(f"seed and validation_seed are both {config.seed}: validation images must be ones the "
                         "judge never trained on; choose a different validation_seed")
    if not 0 < config.learning_rate < 1:
        raise ValueError(f"learning_rate must be in (0, 1), got {config.learning_rate!r}")
    if not 0 <= config.noise_std < 0.5:
        raise ValueError(f"noise_std must be in [0, 0.5), got {config.noise_std!r}")
    if config.judge.image_size % 16 or config.judge.image_size < 16:
        raise ValueError(f"judge image_size must be a multiple of 16 (>= 16), got {config.judge.image_size!r}")
    check_world_config(config.world)
    for name, words, known in (("shapes", config.world.shapes, config.judge.shapes),
                               ("colours", config.world.colours + config.world.backgrounds, config.judge.colours)):
        missing = sorted(set(words) - set(known))
        if missing:
            raise ValueError(f"the world draws {name} {missing} that the judge config has no class for")


def one_cycle_learning_rate(step: int, total_steps: int, peak: float, warmup_fraction: float = 0.15) -> float:
    """Linear warm-up to `peak`, then cosine decay to ~0: reaches high accuracy in few steps,
    which is the point of a judge that trains within minutes on a shared CPU."""
    warmup = max(1, round(warmup_fraction * total_steps))
    if step < warmup:
        return peak * (0.04 + 0.96 * step / warmup)
    progress = (step - warmup) / max(1, total_steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as plain tensor math.

    Written out rather than taken from torch.optim because constructing any torch.optim optimizer
    imports torch._dynamo, which costs 5-15 s on this 2-core machine: more than training the tiny
    judges of the tests.
    """

    def __init__(self, parameters: list[torch.Tensor], betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        self.parameters, self.betas, self.eps, self.weight_decay = parameters, betas, eps, weight_decay
        self.first = [torch.zeros_like(p) for p in parameters]
        self.second = [torch.zeros_like(p) for p in parameters]
        self.steps = 0

    @torch.no_grad()
    def step(self, learning_rate: float) -> None:
        self.steps += 1
        beta1, beta2 = self.betas
        correction1, correction2 = 1 - beta1 ** self.steps, 1 - beta2 ** self.steps
        for parameter, first, second in zip(self.parameters, self.first, self.second):
            if parameter.grad is None:
                continue
            parameter.mul_(1 - learning_rate * self.weight_decay)
            first.mul_(beta1).add_(parameter.grad, alpha=1 - beta1)
            second.mul_(beta2).addcmul_(parameter.grad, parameter.grad, value=1 - beta2)
            denominator = (second / correction2).sqrt_().add_(self.eps)
            parameter.addcdiv_(first, denominator, value=-learning_rate / correction1)


def render_dataset(count: int, seed: int, world: WorldConfig, judge: JudgeConfig) -> tuple[torch.Tensor, dict]:
    """Render `count` clean images (uint8, N×3×S×S) and their labels per head."""
    samples = generate_samples(count, seed, world, split="all")
    size = judge.image_size
    images = np.empty((count, size, size, 3), dtype=np.uint8)
    labels = {name: torch.empty(count, dtype=torch.long) for name in judge.head_sizes()}
    for row, sample in enumerate(samples):
        images[row] = np.asarray(sample.render(size, world))
        for name, value in scene_labels(sample.scene, judge).items():
            labels[name][row] = value
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), labels


def head_accuracies(judge: AttributeJudge, images: torch.Tensor, labels: dict, batch_size: int = 256) -> dict[str, float]:
    """Accuracy of each head over the images where it applies."""
    judge.eval()
    correct = {name: 0 for name in labels}
    counted = {name: 0 for name in labels}
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = judge(images[start:start + batch_size].float() / 255.0)
            for name, target in labels.items():
                target = target[start:start + batch_size]
                applies = target != IGNORE
                correct[name] += int((logits[name].argmax(1)[applies] == target[applies]).sum())
                counted[name] += int(applies.sum())
    return {name: correct[name] / counted[name] for name in labels if counted[name]}


def train_judge(config: JudgeTrainingConfig | None = None, *, progress=None) -> tuple[AttributeJudge, dict]:
    """Train a judge from scratch; returns it (eval mode) and a record of recipe, time and validation accuracy."""
    config = config or JudgeTrainingConfig()
    check_training_config(config)
    started, cpu_started = time.perf_counter(), time.process_time()
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    images, labels = render_dataset(config.train_count, config.seed, config.world, config.judge)
    render_seconds = time.perf_counter() - started
    cpu_paused = time.process_time()
    val_images, val_labels = render_dataset(config.validation_count, config.validation_seed, config.world, config.judge)
    not_training_cpu = time.process_time() - cpu_paused  # validation is measurement, not training
    curve: list[dict] = []

    judge = AttributeJudge(config.judge)
    optimizer = AdamW(list(judge.parameters()), weight_decay=config.weight_decay)
    judge.train()
    for step in range(config.steps):
        batch = torch.randint(0, len(images), (config.batch_size,), generator=generator)
        pixels = images[batch].float() / 255.0
        if config.noise_std:
            pixels = (pixels + config.noise_std * torch.randn(pixels.shape, generator=generator)).clamp(0, 1)
        logits = judge(pixels)
        loss = sum(F.cross_entropy(logits[name], labels[name][batch], ignore_index=IGNORE)
                   for name in logits if (labels[name][batch] != IGNORE).any())
        for parameter in judge.parameters():
            parameter.grad = None
        loss.backward()
        optimizer.step(one_cycle_learning_rate(step, config.steps, config.learning_rate))
        if progress is not None and (step % 100 == 0 or step == config.steps - 1):
            progress(step, loss.item())
        if config.curve_every and (step + 1) % config.curve_every == 0 and step + 1 < config.steps:
            cpu_paused = time.process_time()
            accuracy = head_accuracies(judge, val_images, val_labels)
            judge.train()
            curve.append({"step": step + 1, "cpu_seconds": round(cpu_paused - cpu_started - not_training_cpu, 1),
                          "min_accuracy": round(min(accuracy.values()), 5),
                          "shape": round(min(accuracy["shape1"], accuracy.get("shape2", 1.0)), 5)})
            not_training_cpu += time.process_time() - cpu_paused
    train_seconds = time.perf_counter() - started
    train_cpu_seconds = time.process_time() - cpu_started - not_training_cpu

    accuracy = head_accuracies(judge, val_images, val_labels)
    record = {
        "recipe": config.to_dict(),
        "parameters": count_parameters(judge),
        "render_seconds": round(render_seconds, 1),
        # Wall time depends on how many others share the machine; CPU time is the comparable number.
        "train_wall_seconds": round(train_seconds, 1),
        "train_cpu_seconds_including_render": round(train_cpu_seconds, 1),
        "validation_accuracy": {name: round(value, 5) for name, value in accuracy.items()},
        "min_validation_accuracy": round(min(accuracy.values()), 5) if accuracy else math.nan,
        "accuracy_curve": curve,
        "torch_threads": torch.get_num_threads(),
    }
    return judge.eval(), record
