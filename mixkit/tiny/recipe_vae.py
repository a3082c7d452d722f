"""Recipe for the autoencoder of mixkit-tiny-sd (`mixkit train recipe tiny-vae`): a small diffusers
`AutoencoderKL`, 4x downsampling.

The world is flat colours and sharp edges, so a slim VAE suffices. It has no attention in its mid
block (fully convolutional, so it also trains on crops when `crop` is below the image size).
Measured here: trained as a VAE (sampled latents, KL term) it learns far too slowly for a CPU
recipe (PSNR 20 dB after 500 steps at 8x, and the judge could not read its reconstructions), so
it is trained as a plain autoencoder on the posterior mean, with the log-variance pulled to a
small value so that `latent_dist.sample()` (img2img) stays close to the mean. The latent scaling
factor is measured on the trained encoder (1 / std of the latents), as SD's 0.18215 was.
Measured here (2 threads): PSNR 22 dB after 250 steps, 27 dB after 500, 28 dB after 750, and the judge
reads colour and shape from the reconstructions only from about 750 steps on; the curve in the
shipped record shows the rest. It is the slow part of the tiny-sd recipe (about 0.8 s per step).

A second stage can continue from a trained autoencoder (`init_from`) with the encoder frozen
(`train_encoder=false`) and extra loss weight on shape pixels (`foreground_weight`): the image-mean
loss is dominated by the flat background, so small stars and crosses stay blurred long after the
PSNR looks good, and the judge cannot tell them apart. Freezing the encoder keeps every latent (and
the scaling factor) as it was, so a UNet already trained on them stays valid with the sharper decoder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from mixkit.io.atomic import atomic_output_folder
from mixkit.runtime.capability import cpu_bf16_autocast
from mixkit.tiny.recipe_common import (
    RecipeClock,
    base_world,
    earlier_record,
    start_recipe,
    warmup_cosine,
    write_record,
)
from mixkit.tiny.recipe_state import (
    RecipeState,
    check_resume_settings,
    read_recipe_state,
    restore_recipe_state,
    save_recipe_state,
    state_folder,
)
from mixkit.tiny.world_data import WorldTensors, render_world
from mixkit.training.config_json import JsonConfig

logger = logging.getLogger(__name__)


@dataclass
class TinyVaeSettings:
    block_out_channels: tuple[int, ...] = (32, 64, 64)
    latent_channels: int = 4
    crop: int = 64
    batch_size: int = 32
    steps: int = 3000
    learning_rate: float = 2e-3
    warmup_steps: int = 30
    logvar_target: float = -12.0
    logvar_weight: float = 1e-3
    train_encoder: bool = True
    foreground_weight: float = 0.0


def build_tiny_vae(settings: TinyVaeSettings, sample_size: int, seed: int):
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    blocks = len(settings.block_out_channels)
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * blocks,
                         up_block_types=("UpDecoderBlock2D",) * blocks, block_out_channels=settings.block_out_channels,
                         latent_channels=settings.latent_channels, layers_per_block=1, norm_num_groups=8,
                         sample_size=sample_size, mid_block_add_attention=False)


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of images in [-1, 1]."""
    mse = (a.clamp(-1, 1) - b).pow(2).mean().item() / 4.0
    return 10 * torch.log10(torch.tensor(1.0 / max(mse, 1e-10))).item()


def random_crops(images: torch.Tensor, crop: int, generator: torch.Generator) -> torch.Tensor:
    size = images.shape[-1]
    tops = torch.randint(0, size - crop + 1, (images.shape[0],), generator=generator)
    lefts = torch.randint(0, size - crop + 1, (images.shape[0],), generator=generator)
    return torch.stack([img[:, t:t + crop, l:l + crop] for img, t, l in zip(images, tops.tolist(), lefts.tolist())])


def foreground_mask(images: torch.Tensor) -> torch.Tensor:
    """1 on shape pixels (and a one-pixel rim around them), 0 on the background, shape (B, 1, H, W).

    The background is the per-image median colour: in this world it always covers most of the image.
    """
    background = images.flatten(2).median(dim=2).values[:, :, None, None]
    mask = ((images - background).abs().sum(dim=1, keepdim=True) > 0.1).to(images.dtype)
    return F.max_pool2d(mask, kernel_size=3, stride=1, padding=1)


def reconstruction_loss(reconstruction: torch.Tensor, images: torch.Tensor, foreground_weight: float) -> torch.Tensor:
    """L1 + MSE, each pixel weighted 1 + foreground_weight on shapes (plain L1 + MSE when 0)."""
    error = reconstruction - images
    weight = 1.0 + foreground_weight * foreground_mask(images) if foreground_weight else 1.0
    return (error.abs() * weight).mean() + (error.pow(2) * weight).mean()


@dataclass
class AutoencoderRun:
    """How the tiny-vae recipe's own run stops, keeps resume states and resumes (`mixkit.tiny.recipe_state`);
    tiny-sd's autoencoder stage runs without one."""

    recipe: TinyVaeRecipe
    stop_at_step: int | None = None
    resumed: RecipeState | None = None
    last_state: Path | None = None

    def restore(self, vae, optimizer, generator, clock: RecipeClock, curve: list[dict]) -> int:
        """The step to start from: 0, or the resumed state's (its weights, optimizer, RNGs, curve, clock restored)."""
        if self.resumed is None:
            return 0
        restore_recipe_state(self.resumed, name="tiny-vae", modules={"vae": vae}, ema=None, optimizer=optimizer,
                             generator=generator)
        curve[:] = self.resumed.curve
        clock.wall_start, clock.cpu_start = self.resumed.clock.wall_start, self.resumed.clock.cpu_start
        self.last_state = self.resumed.path
        logger.info("tiny-vae resumes %s at step %d", self.resumed.path, self.resumed.step)
        return self.resumed.step

    def stops_after(self, step: int) -> bool:
        return self.stop_at_step is not None and step >= self.stop_at_step

    def keep_state(self, step: int, vae, optimizer, generator, clock: RecipeClock, curve: list[dict]) -> None:
        """A resume state after `step` when due (every `checkpoint_every`, and at the stop step)."""
        every = self.recipe.checkpoint_every
        if step < self.recipe.steps and (self.stops_after(step) or (every and step % every == 0)):
            self.last_state = save_recipe_state(state_folder(self.recipe.output), name="tiny-vae", recipe=self.recipe,
                                                step=step, modules={"vae": vae}, ema=None, optimizer=optimizer,
                                                generator=generator, curve=curve, metrics={}, clock=clock)


def train_tiny_vae(settings: TinyVaeSettings, train: WorldTensors, valid: WorldTensors, seed: int,
                   clock: RecipeClock, curve: list[dict], vae=None, judge=None, run: AutoencoderRun | None = None):
    """Train and return (vae in eval mode, validation PSNR); appends progress to `curve`.

    `vae` continues a trained autoencoder instead of building a fresh one; with a `judge`, the curve
    also records how well it reads the reconstructions (PSNR alone hides blurred small shapes).
    `run`: the recipe's own stop step, resume states and resumed state.
    """
    size = train.images.shape[-1]
    vae = build_tiny_vae(settings, size, seed) if vae is None else vae
    vae.requires_grad_(True)
    if not settings.train_encoder:
        vae.encoder.requires_grad_(False)
        vae.quant_conv.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in vae.parameters() if p.requires_grad], lr=settings.learning_rate,
                                  weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    valid_images = valid.float_images(torch.arange(min(64, len(valid))))
    first_step = run.restore(vae, optimizer, generator, clock, curve) if run is not None else 0
    for step in range(first_step, settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = settings.learning_rate * warmup_cosine(step, settings.steps, settings.warmup_steps)
        index = torch.randint(0, len(train), (settings.batch_size,), generator=generator)
        images = train.float_images(index)
        if settings.crop < size:
            images = random_crops(images, settings.crop, generator)
        with cpu_bf16_autocast(), torch.set_grad_enabled(settings.train_encoder):
            posterior = vae.encode(images).latent_dist
        with cpu_bf16_autocast():
            reconstruction = vae.decode(posterior.mean).sample.float()
        loss = reconstruction_loss(reconstruction, images, settings.foreground_weight)
        if settings.train_encoder:
            loss = loss + settings.logvar_weight * (posterior.logvar.float() - settings.logvar_target).pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        stopping = run is not None and run.stops_after(step + 1)
        if (step + 1) % 100 == 0 or step + 1 == settings.steps or stopping:  # the record needs the last step's point
            quality = validation_psnr(vae, valid_images)
            reading = reconstruction_accuracy(vae, valid, judge) if judge is not None else {}
            curve.append({"stage": "vae", "step": step + 1, "loss": round(loss.item(), 4), "psnr": round(quality, 2),
                          **reading, "wall_seconds": clock.wall()})
            logger.info("tiny-vae step %d loss %.4f psnr %.2f %s(%.0f s)", step + 1, loss.item(), quality,
                        f"judge {reading} " if reading else "", clock.wall())
        if run is not None:
            run.keep_state(step + 1, vae, optimizer, generator, clock, curve)
        if stopping:
            break
    vae.eval()
    return vae, validation_psnr(vae, valid_images)


@torch.no_grad()
def validation_psnr(vae, images: torch.Tensor) -> float:
    was_training = vae.training
    vae.eval()
    with cpu_bf16_autocast():
        reconstruction = vae.decode(vae.encode(images).latent_dist.mean).sample.float()
    vae.train(was_training)
    return psnr(reconstruction, images)


@torch.no_grad()
def encode_all(vae, data: WorldTensors, batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior mean and std of every image (fp32), so UNet training samples latents without the encoder."""
    means, stds = [], []
    for start in range(0, len(data), batch_size):
        index = torch.arange(start, min(start + batch_size, len(data)))
        with cpu_bf16_autocast():
            posterior = vae.encode(data.float_images(index)).latent_dist
        means.append(posterior.mean.float())
        stds.append(posterior.std.float())
    return torch.cat(means), torch.cat(stds)


@dataclass
class TinyVaeRecipe(JsonConfig):
    output: str = "mixkit-tiny-vae"
    image_size: int = 64
    train_images: int = 3000  # flat colours and edges: more images do not help, more steps do
    data_seed: int = 5
    steps: int = 3000
    batch_size: int = 32
    learning_rate: float = 2e-3
    seed: int = 0
    threads: int = 0
    init_from: str = ""  # an autoencoder folder to continue from (empty: a fresh one)
    train_encoder: bool = True  # false (needs init_from) keeps the latents, so UNets trained on them stay valid
    foreground_weight: float = 0.0  # extra loss weight on shape pixels, which the image-mean loss under-weights
    # Resume states (`mixkit.tiny.recipe_state`) in <output>-state every this many steps (0: only at --stop-at-step)
    checkpoint_every: int = 0
    resume_from: str = ""  # a <output>-state folder (or step-*.pt in it): continue that run bit for bit

    def check(self) -> None:
        check_resume_settings(self)
        for name in ("image_size", "train_images", "steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.image_size % 4:
            raise ValueError(f"image_size must be a multiple of 4 (the autoencoder downsamples 4x), got {self.image_size}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not self.foreground_weight >= 0:
            raise ValueError(f"foreground_weight must be >= 0, got {self.foreground_weight!r}")
        if self.init_from and not (Path(self.init_from) / "config.json").is_file():
            raise FileNotFoundError(f"init_from {self.init_from!r} is not an autoencoder folder (no config.json); "
                                    "give the output folder of `mixkit train recipe tiny-vae`")
        if not self.train_encoder and not self.init_from:
            raise ValueError("train_encoder=false freezes the encoder, which only makes sense when continuing a "
                             "trained autoencoder: set init_from=DIR too")

    def settings(self) -> TinyVaeSettings:
        return TinyVaeSettings(crop=self.image_size, batch_size=self.batch_size, steps=self.steps,
                               learning_rate=self.learning_rate, train_encoder=self.train_encoder,
                               foreground_weight=self.foreground_weight)


def train_autoencoder(recipe: TinyVaeRecipe, clock: RecipeClock, curve: list[dict], run: AutoencoderRun | None = None):
    """(vae with its measured scaling factor, metrics): the tiny-vae recipe as a stage of the tiny-sd one (and,
    with `run`, as the recipe itself)."""
    from mixkit.evaluation import load_shipped_judge

    recipe.check()
    world = base_world()
    train = render_world(recipe.train_images, recipe.data_seed, world, recipe.image_size)
    valid = render_world(128, recipe.data_seed + 1, world, recipe.image_size)
    start = None
    if recipe.init_from:
        from diffusers import AutoencoderKL

        start = AutoencoderKL.from_pretrained(recipe.init_from, torch_dtype=torch.float32)
        curve.append({"stage": "init", "from": recipe.init_from, **earlier_record(recipe.init_from)})
    judge = load_shipped_judge()
    vae, quality = train_tiny_vae(recipe.settings(), train, valid, recipe.seed, clock, curve, vae=start, judge=judge,
                                  run=run)
    if recipe.train_encoder:  # new latents, new scale; a frozen encoder keeps the scale its UNets were trained with
        means, _ = encode_all(vae, train)
        vae.register_to_config(scaling_factor=round(float(1.0 / means.std()), 5))
    reading = reconstruction_accuracy(vae, valid, judge)
    curve.append({"stage": "vae-judge", **reading, "wall_seconds": clock.wall()})
    logger.info("tiny-vae reconstructions read by the judge: %s", reading)
    return vae, {"vae_psnr": round(quality, 2), **{f"vae_reconstruction/{k}": v for k, v in reading.items()}}


def train_tiny_vae_recipe(recipe: TinyVaeRecipe, stop_at_step: int | None = None):
    """`mixkit train recipe tiny-vae`: train the autoencoder alone and write it as a diffusers folder."""
    from mixkit.training.training_result import TrainingResult

    clock, curve = start_recipe(recipe), []
    run = AutoencoderRun(recipe, stop_at_step)
    if recipe.resume_from:
        run.resumed = read_recipe_state(recipe.resume_from, name="tiny-vae", recipe=recipe, total_steps=recipe.steps)
        if stop_at_step is not None and stop_at_step <= run.resumed.step:
            raise ValueError(f"--stop-at-step {stop_at_step} is not after step {run.resumed.step}, where "
                             f"{run.resumed.path} resumes; stop at a later step")
    vae, metrics = train_autoencoder(recipe, clock, curve, run)
    folder = Path(recipe.output)
    with atomic_output_folder(folder, replace=True) as staged:
        vae.save_pretrained(staged, safe_serialization=True)
        write_record(staged, "tiny-vae", recipe, metrics, curve, clock)
    steps = min(recipe.steps, stop_at_step or recipe.steps)
    return TrainingResult(steps=steps, seconds=clock.wall(), output=folder, first_step=run.resumed.step
                          if run.resumed else 0, last_checkpoint=run.last_state)


@torch.no_grad()
def reconstruction_accuracy(vae, data: WorldTensors, judge, count: int = 128) -> dict[str, float]:
    """How well the judge reads the autoencoder's reconstructions: the ceiling for the whole model."""
    from mixkit.data.shapes_captions import caption_scene
    from mixkit.evaluation import score_images

    index = torch.arange(min(count, len(data)))
    with cpu_bf16_autocast():
        reconstruction = vae.decode(vae.encode(data.float_images(index)).latent_dist.mean).sample.float()
    prompts = [caption_scene(data.scenes[i], "plain") for i in index.tolist()]
    scores = score_images(judge, (reconstruction / 2 + 0.5).clamp(0, 1), prompts)
    return {k: round(v, 4) for k, v in scores.items() if k.startswith("single/") and not k.endswith("/n")}
