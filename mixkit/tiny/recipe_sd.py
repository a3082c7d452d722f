"""Recipe for mixkit-tiny-sd: a small Stable Diffusion (diffusers format) trained from scratch on the world.

Architecture as SD 1.x (UNet2DConditionModel + AutoencoderKL + CLIP text encoder + SD's 1000-step
scaled-linear schedule), only small: 64 px images, 16x16x4 latents (4x autoencoder), the text tower of
mixkit-tiny-clip (frozen). Choices aimed at learning in CPU minutes (not yet enough to ship: the
autoencoder caps quality, see the README's mixkit-tiny status and `reconstruction_accuracy`):
  - a word-level tokenizer and a contrastively trained text encoder, so "star" and "cross" are
    different vectors from the first step (a byte-level random encoder spells them out);
  - latents and text states computed once, so a step costs one UNet forward/backward (fp32:
    measured faster than bf16 autocast for a UNet this small on CPU);
  - min-SNR-5 loss weighting (Hang et al. 2023) and an EMA of the weights;
  - 10% empty captions, so classifier-free guidance works at sampling time.
Progress is measured with the independent judge during training (prompts of every combination).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mixkit.io.atomic import atomic_output_folder
from mixkit.models.diffusion.recommended import RECOMMENDED_FILE, RecommendedSettings
from mixkit.runtime.capability import cpu_bf16_autocast
from mixkit.tiny.recipe_common import (
    RecipeClock,
    base_world,
    earlier_record,
    resolve_tiny_clip,
    start_recipe,
    warmup_cosine,
    write_record,
)
from mixkit.tiny.recipe_state import (
    check_resume_settings,
    read_recipe_state,
    restore_recipe_state,
    save_recipe_state,
    state_folder,
)
from mixkit.tiny.recipe_vae import TinyVaeRecipe, encode_all, train_autoencoder
from mixkit.tiny.unet_growth import (
    grow_full_resolution_attention,
    grow_transformer_depth,
    has_full_resolution_attention,
    transformer_layers,
)
from mixkit.tiny.world_data import render_world
from mixkit.training.config_json import JsonConfig
from mixkit.training.diffusion_objective import (
    add_noise,
    min_snr_weights,
    offset_noise,
    weighted_mse,
)
from mixkit.training.ema import EmaWeights

logger = logging.getLogger(__name__)
MAX_TOKENS = 77


@dataclass
class TinySDRecipe(JsonConfig):
    output: str = "mixkit-tiny-sd"
    clip: str = "mixkit-tiny-clip"  # the trained tiny CLIP folder (its text tower is used, frozen)
    # A `tiny-vae` recipe output to reuse; empty: init_from's own autoencoder when continuing (its UNet knows only
    # those latents), else train one first (the slow stage).
    vae: str = ""
    image_size: int = 64
    train_images: int = 12000
    unet_channels: list[int] = field(default_factory=lambda: [32, 64, 128])
    # Cross-attention at the 16x16 level too; measured: 2.2x the step time (1.7 vs 0.78 s at batch 64, 2 threads).
    # With init_from a UNet without it, the UNet is grown (new blocks start with zero output, see unet_growth).
    full_resolution_attention: bool = False
    # Transformer blocks in each 16x16 attention (needs full_resolution_attention). With init_from a UNet that has
    # fewer, it is deepened (the new block's outputs start at zero, see unet_growth): more capacity where shapes
    # get their outlines.
    full_resolution_transformer_layers: int = 1
    batch_size: int = 64
    steps: int = 2400
    learning_rate: float = 6e-4
    warmup_steps: int = 100
    min_snr_gamma: float = 5.0
    # Measured: without it the background follows the seed, not the prompt (judge: 9% background).
    # At SD's last timestep x_t still holds 7% of the image, and for flat colours on 16x16 latents
    # that mean colour is readable through the noise, so the UNet learns to copy it instead of reading
    # the text; at sampling time pure noise has none. Per-channel offset noise hides it.
    offset_noise: float = 0.3
    init_from: str = ""  # a tiny-sd folder whose UNet (and text encoder) training continues from (empty: from scratch)
    # Measured: tiny-clip v1's text tower, trained against a vision tower that barely tells shapes apart,
    # maps "circle" and "square" to nearly the same states (distance 2.7 against 12.5 for a colour
    # word), and the UNet drew most circles as squares. Training the text encoder with the UNet (at a
    # lower rate, EMA on both) lets the diffusion loss pull the shape words apart.
    train_text_encoder: bool = False
    text_encoder_learning_rate: float = 1e-4
    ema_decay: float = 0.999
    # Extra loss weight on the latent cells a shape covers (1 + foreground_weight there, 1 on the background).
    # A shape (with its rim) touches 5-38% of a 16x16 latent's cells, median 15%, so the plain mean loss is mostly
    # flat background the UNet already draws; the same lever took the autoencoder's shapes from 92% to 98.9%
    # (tiny-vae's foreground_weight).
    foreground_weight: float = 0.0
    # REPA (mixkit.tiny.repa): weight of aligning the UNet's 8x8 features with tiny-clip's vision patch tokens of the
    # clean image (0: off). Measured from scratch: shape 24% -> 42% after 2400 steps; 0.5 is REPA's own weight.
    repa_weight: float = 0.0
    empty_caption_fraction: float = 0.1
    eval_every: int = 400
    eval_prompts: int = 96
    seed: int = 0
    threads: int = 0
    unet_bf16: bool = False  # measured: fp32 is faster than bf16 autocast for a UNet this small on CPU
    # Resume states (`mixkit.tiny.recipe_state`) in <output>-state every this many steps (0: only at --stop-at-step)
    checkpoint_every: int = 0
    resume_from: str = ""  # a <output>-state folder (or step-*.pt in it): continue that run bit for bit

    def check(self) -> None:
        check_resume_settings(self)
        for name in ("image_size", "train_images", "batch_size", "steps", "eval_prompts",
                     "full_resolution_transformer_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.full_resolution_transformer_layers > 1 and not self.full_resolution_attention:
            raise ValueError("full_resolution_transformer_layers > 1 needs full_resolution_attention=true "
                             "(there is no 16x16 attention to deepen without it)")
        if self.image_size % 8:
            raise ValueError(f"image_size must be a multiple of 8, got {self.image_size}")
        if not 0 <= self.empty_caption_fraction < 1:
            raise ValueError(f"empty_caption_fraction must be in [0, 1), got {self.empty_caption_fraction!r}")
        self.clip = resolve_tiny_clip(self.clip)
        if self.init_from and not (Path(self.init_from) / "unet" / "config.json").is_file():
            raise FileNotFoundError(f"init_from {self.init_from!r} is not a tiny-sd folder (no unet/config.json)")
        if self.init_from and not self.vae and (Path(self.init_from) / "vae" / "config.json").is_file():
            self.vae = str(Path(self.init_from) / "vae")
        if not self.text_encoder_learning_rate > 0:
            raise ValueError(f"text_encoder_learning_rate must be > 0, got {self.text_encoder_learning_rate!r}")
        if not self.repa_weight >= 0:
            raise ValueError(f"repa_weight must be >= 0 (0: no alignment), got {self.repa_weight!r}")
        if not self.foreground_weight >= 0:
            raise ValueError(f"foreground_weight must be >= 0 (0: every latent cell counts the same), "
                             f"got {self.foreground_weight!r}")
        if not 0 <= self.offset_noise < 1:
            raise ValueError(f"offset_noise must be in [0, 1), got {self.offset_noise!r}")
        if self.vae and not (Path(self.vae) / "config.json").is_file():
            raise FileNotFoundError(f"autoencoder folder {self.vae!r} has no config.json; train one with "
                                    "`mixkit train recipe tiny-vae --set output=DIR`, or leave vae empty to train it here")


def build_tiny_unet(channels: list[int], cross_attention_dim: int, sample_size: int, seed: int,
                    full_resolution_attention: bool = False, full_resolution_transformer_layers: int = 1):
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    depth = len(channels)
    first_down, last_up = (("CrossAttnDownBlock2D", "CrossAttnUpBlock2D") if full_resolution_attention
                           else ("DownBlock2D", "UpBlock2D"))
    return UNet2DConditionModel(
        sample_size=sample_size, in_channels=4, out_channels=4, block_out_channels=tuple(channels), layers_per_block=1,
        down_block_types=(first_down,) + ("CrossAttnDownBlock2D",) * (depth - 1),
        up_block_types=("CrossAttnUpBlock2D",) * (depth - 1) + (last_up,),
        cross_attention_dim=cross_attention_dim, attention_head_dim=8, norm_num_groups=32,
        transformer_layers_per_block=(1 if full_resolution_transformer_layers == 1
                                      else [full_resolution_transformer_layers] + [1] * (depth - 1)))


def sd_scheduler_config() -> dict:
    """SD 1.x's noise schedule: 1000 steps, scaled-linear betas 0.00085..0.012, epsilon prediction."""
    return dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                prediction_type="epsilon", clip_sample=False, set_alpha_to_one=False, steps_offset=1)


def load_text_tower(clip_folder: str):
    """(tokenizer, frozen CLIPTextModel) from a tiny-CLIP folder, as an SD text encoder."""
    from transformers import CLIPModel, CLIPTextModel, CLIPTokenizer

    clip = CLIPModel.from_pretrained(clip_folder, torch_dtype=torch.float32)
    text_encoder = CLIPTextModel(clip.config.text_config)
    source = {k: v for k, v in clip.state_dict().items() if k.startswith("text_model.")}
    target = text_encoder.state_dict()
    mapped = {}
    for key in target:
        for candidate in (f"text_model.{key}", key if key.startswith("text_model.") else None):
            if candidate in source:
                mapped[key] = source[candidate]
                break
    missing = sorted(set(target) - set(mapped))
    if missing:
        raise ValueError(f"tiny CLIP folder {clip_folder!r} lacks text weights {missing[:5]}")
    text_encoder.load_state_dict(mapped)
    return CLIPTokenizer.from_pretrained(clip_folder), text_encoder.eval().requires_grad_(False)


def load_sd_text_encoder(folder: str):
    """(tokenizer, frozen CLIPTextModel) of a tiny-sd folder, in fp32 for training."""
    from transformers import CLIPTextModel, CLIPTokenizer

    text_encoder = CLIPTextModel.from_pretrained(folder, subfolder="text_encoder", torch_dtype=torch.float32)
    return CLIPTokenizer.from_pretrained(folder, subfolder="tokenizer"), text_encoder.eval().requires_grad_(False)


class CaptionBatches:
    """The text states of a batch of training captions, with dropped rows replaced by the empty caption.

    A frozen encoder runs once per distinct caption up front; a trained one runs on each batch (with
    gradients), so its states follow its weights.
    """

    def __init__(self, tokenizer, text_encoder, captions: list[str], trained: bool) -> None:
        self.text_encoder, self.trained = text_encoder, trained
        distinct = sorted(set(captions))
        row_of = {caption: i for i, caption in enumerate(distinct)}
        self.rows = torch.tensor([row_of[c] for c in captions])
        self.ids = tokenizer(distinct + [""], padding="max_length", max_length=MAX_TOKENS, truncation=True,
                             return_tensors="pt").input_ids
        if not trained:
            with torch.no_grad():
                self.frozen = torch.cat([text_encoder(self.ids[s:s + 256]).last_hidden_state
                                         for s in range(0, len(self.ids), 256)])

    def states(self, index: torch.Tensor, drop: torch.Tensor) -> torch.Tensor:
        rows = torch.where(drop, torch.full_like(index, len(self.ids) - 1), self.rows[index])
        if not self.trained:
            return self.frozen[rows]
        return self.text_encoder(self.ids[rows]).last_hidden_state


@torch.no_grad()
def sample_latents(unet, scheduler_config: dict, text_states: torch.Tensor, empty_state: torch.Tensor,
                   steps: int = 20, guidance: float = 5.0, seed: int = 0) -> torch.Tensor:
    """A plain DDIM loop with classifier-free guidance, for measuring progress during training."""
    from diffusers import DDIMScheduler

    scheduler = DDIMScheduler(**scheduler_config)
    scheduler.set_timesteps(steps)
    size = unet.config.sample_size
    generator = torch.Generator().manual_seed(seed)
    latents = torch.randn((text_states.shape[0], 4, size, size), generator=generator)
    context = torch.cat([empty_state.expand_as(text_states), text_states])
    for t in scheduler.timesteps:
        prediction = unet(torch.cat([latents, latents]), t, encoder_hidden_states=context).sample.float()
        unconditional, conditional = prediction.chunk(2)
        latents = scheduler.step(unconditional + guidance * (conditional - unconditional), t, latents).prev_sample
    return latents


@torch.no_grad()
def judge_accuracy(unet, vae, scaling: float, tokenizer, text_encoder, prompts: list[str], judge) -> dict[str, float]:
    from mixkit.evaluation import score_images

    captions = CaptionBatches(tokenizer, text_encoder, prompts, trained=False)  # the last row is the empty caption
    latents = sample_latents(unet, sd_scheduler_config(), captions.frozen[captions.rows], captions.frozen[-1:])
    with cpu_bf16_autocast():
        images = vae.decode(latents / scaling).sample.float()
    return score_images(judge, (images / 2 + 0.5).clamp(0, 1), prompts)


def train_tiny_sd(recipe: TinySDRecipe, stop_at_step: int | None = None):
    from mixkit.evaluation import eval_prompts, load_shipped_judge
    from mixkit.training.training_result import TrainingResult

    clock, curve = start_recipe(recipe), []
    world = base_world()
    train = render_world(recipe.train_images, recipe.seed, world, recipe.image_size)
    # Continuing keeps the text encoder the UNet was trained with (it may have been trained too).
    tokenizer, text_encoder = load_sd_text_encoder(recipe.init_from) if recipe.init_from else load_text_tower(recipe.clip)
    judge = load_shipped_judge()
    # Progress is measured on prompts of every combination (held-out ones included, ~5%).
    prompts = [p.prompt for p in eval_prompts(dataclasses.replace(world, held_out=()), count=recipe.eval_prompts, seed=1234)]

    resumed = read_recipe_state(recipe.resume_from, name="tiny-sd", recipe=recipe,
                                total_steps=recipe.steps) if recipe.resume_from else None
    if resumed is not None and stop_at_step is not None and stop_at_step <= resumed.step:
        raise ValueError(f"--stop-at-step {stop_at_step} is not after step {resumed.step}, where {resumed.path} "
                         "resumes; stop at a later step")
    if resumed is not None and "vae_config" in resumed.extra:  # the autoencoder that run trained, not a new one
        vae, vae_metrics = _autoencoder_of_state(resumed), resumed.extra["vae_metrics"]
    else:
        vae, vae_metrics = _autoencoder(recipe, clock, curve)
    means, stds = encode_all(vae, train)
    scaling = float(vae.config.scaling_factor)

    captions = CaptionBatches(tokenizer, text_encoder, train.captions, trained=recipe.train_text_encoder)
    downsampling = 2 ** (len(vae.config.block_out_channels) - 1)
    cell_weights = latent_foreground_weights(train, downsampling, recipe.foreground_weight)
    if recipe.init_from:
        from diffusers import UNet2DConditionModel

        unet = UNet2DConditionModel.from_pretrained(recipe.init_from, subfolder="unet", torch_dtype=torch.float32)
        curve.append({"stage": "init", "from": recipe.init_from, **earlier_record(recipe.init_from)})
        if recipe.full_resolution_attention and not has_full_resolution_attention(unet.config):
            before = sum(p.numel() for p in unet.parameters())
            unet = grow_full_resolution_attention(unet, recipe.seed)
            curve.append({"stage": "grow", "what": "full-resolution cross-attention (zero output: same UNet output)",
                          "parameters_before": before, "parameters_after": sum(p.numel() for p in unet.parameters())})
        while recipe.full_resolution_attention and \
                transformer_layers(unet.config)[0] < recipe.full_resolution_transformer_layers:
            before = sum(p.numel() for p in unet.parameters())
            unet = grow_transformer_depth(unet, level=0, seed=recipe.seed)
            curve.append({"stage": "grow", "what": "one more 16x16 transformer block (zero output: same UNet output)",
                          "parameters_before": before, "parameters_after": sum(p.numel() for p in unet.parameters())})
    else:
        unet = build_tiny_unet(recipe.unet_channels, text_encoder.config.hidden_size, recipe.image_size // downsampling,
                               recipe.seed, recipe.full_resolution_attention, recipe.full_resolution_transformer_layers)
    trained = [unet, text_encoder] if recipe.train_text_encoder else [unet]
    text_encoder.requires_grad_(recipe.train_text_encoder)
    ema = EmaWeights(_parameters(trained), max_decay=recipe.ema_decay)
    alignment = _Alignment(recipe, unet, train, means.shape[-1]) if recipe.repa_weight else None
    groups = [{"params": list(unet.parameters()) + (list(alignment.head.parameters()) if alignment else []),
               "base_lr": recipe.learning_rate}]
    if recipe.train_text_encoder:
        text_encoder.train()
        groups.append({"params": list(text_encoder.parameters()), "base_lr": recipe.text_encoder_learning_rate})
    optimizer = torch.optim.AdamW(groups, lr=recipe.learning_rate, weight_decay=0.01)
    alphas_cumprod = _alphas_cumprod()
    generator = torch.Generator().manual_seed(recipe.seed)
    metrics: dict[str, float] = {}
    modules = {"unet": unet, **({"text_encoder": text_encoder} if recipe.train_text_encoder else {}),
               **({"repa_head": alignment.head} if alignment else {})}
    first_step, last_state = 0, None
    if resumed is not None:
        restore_recipe_state(resumed, name="tiny-sd", modules=modules, ema=ema, optimizer=optimizer,
                             generator=generator)
        first_step, curve, metrics, clock, last_state = (resumed.step, resumed.curve, resumed.metrics, resumed.clock,
                                                         resumed.path)
        logger.info("tiny-sd resumes %s at step %d", resumed.path, first_step)
    for step in range(first_step, recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = group["base_lr"] * warmup_cosine(step, recipe.steps, recipe.warmup_steps)
        index = torch.randint(0, len(train), (recipe.batch_size,), generator=generator)
        latents = (means[index] + stds[index] * torch.randn(means[index].shape, generator=generator)) * scaling
        drop = torch.rand(recipe.batch_size, generator=generator) < recipe.empty_caption_fraction
        context = captions.states(index, drop)
        noise = offset_noise(latents.shape, generator, recipe.offset_noise)
        timesteps = torch.randint(0, 1000, (recipe.batch_size,), generator=generator)
        noisy = add_noise(latents, noise, timesteps, alphas_cumprod)
        with cpu_bf16_autocast(recipe.unet_bf16):
            prediction = unet(noisy, timesteps, encoder_hidden_states=context).sample
        weights = min_snr_weights(alphas_cumprod, timesteps, recipe.min_snr_gamma, "epsilon")
        loss = weighted_mse(prediction, noise, weights, None if cell_weights is None else cell_weights[index])
        if alignment is not None:
            loss = loss + recipe.repa_weight * alignment.loss(index)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        ema.update(_parameters(trained))
        done = step + 1
        if done % recipe.eval_every == 0 or done == recipe.steps or (stop_at_step and done >= stop_at_step):
            metrics = _evaluate(trained, ema, unet, vae, scaling, tokenizer, text_encoder, prompts, judge)
            curve.append({"stage": "unet", "step": done, "loss": round(loss.item(), 4), "wall_seconds": clock.wall(),
                          **{k: round(v, 4) for k, v in metrics.items()}})
            logger.info("tiny-sd step %d loss %.4f %s (%.0f s)", done, loss.item(),
                        {k: round(v, 3) for k, v in metrics.items()}, clock.wall())
        stopping = stop_at_step is not None and done >= stop_at_step
        if done < recipe.steps and (stopping or (recipe.checkpoint_every and done % recipe.checkpoint_every == 0)):
            # an autoencoder trained by this run goes into the state: a resume needs it, not a retrained one
            own_vae = {} if recipe.vae else {"vae_metrics": vae_metrics, "vae_config": {
                key: value for key, value in vae.config.items() if not key.startswith("_")}}  # no paths, versions
            last_state = save_recipe_state(state_folder(recipe.output), name="tiny-sd", recipe=recipe, step=done,
                                           modules=modules, ema=ema, optimizer=optimizer, generator=generator,
                                           curve=curve, metrics=metrics, clock=clock, extra=own_vae,
                                           tensors=vae.state_dict() if own_vae else None)
        if stopping:
            break
    ema.copy_to(_parameters(trained))
    if alignment is not None:
        alignment.features.remove()  # the head is thrown away: the saved UNet is an ordinary one
    text_encoder.eval().requires_grad_(False)
    output = save_tiny_sd(Path(recipe.output), unet, vae, tokenizer, text_encoder)
    write_record(output, "tiny-sd", recipe, {**vae_metrics, **metrics}, curve, clock)
    return TrainingResult(steps=done, seconds=clock.wall(), output=output, first_step=first_step,
                          last_checkpoint=last_state)


class _Alignment:
    """REPA's parts for one run: the training images' patch tokens, the UNet hook and the head."""

    def __init__(self, recipe: TinySDRecipe, unet, train, latent_size: int) -> None:
        from mixkit.tiny.repa import AlignmentHead, UNetFeatures, check_alignment_grid, vision_patch_tokens

        self.tokens = vision_patch_tokens(recipe.clip, train.images)
        channels = check_alignment_grid(unet, latent_size, self.tokens.shape[1])
        torch.manual_seed(recipe.seed)
        self.head = AlignmentHead(channels, self.tokens.shape[-1])
        self.features = UNetFeatures(unet)

    def loss(self, index: torch.Tensor) -> torch.Tensor:
        from mixkit.tiny.repa import alignment_loss

        return alignment_loss(self.features.latest, self.tokens[index], self.head)


def _autoencoder_of_state(resumed):
    """The autoencoder a resumed run had trained itself, rebuilt from its state."""
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_config(resumed.extra["vae_config"])
    vae.load_state_dict(resumed.tensors)
    return vae.eval()


def _autoencoder(recipe: TinySDRecipe, clock: RecipeClock, curve: list[dict]):
    """The recipe's `vae` folder when given (with the metrics its record holds), else a freshly trained one."""
    from diffusers import AutoencoderKL

    if not recipe.vae:
        return train_autoencoder(TinyVaeRecipe(image_size=recipe.image_size), clock, curve)
    vae = AutoencoderKL.from_pretrained(recipe.vae, torch_dtype=torch.float32).eval()
    earlier = earlier_record(recipe.vae)
    curve.append({"stage": "vae-from", "from": recipe.vae, **earlier})
    return vae, {"vae": recipe.vae, **(earlier.get("metrics") or {})}


def latent_foreground_weights(train, downsampling: int, foreground_weight: float) -> torch.Tensor | None:
    """(N, 1, h, w) loss weights per latent cell: 1 + foreground_weight where any pixel of the cell's
    `downsampling`-square patch is shape (`foreground_mask`, rim included), 1 elsewhere; None when 0."""
    if not foreground_weight:
        return None
    import torch.nn.functional as F

    from mixkit.tiny.recipe_vae import foreground_mask

    masks = []
    for start in range(0, len(train), 1024):
        indices = torch.arange(start, min(start + 1024, len(train)))
        masks.append(F.max_pool2d(foreground_mask(train.float_images(indices)), downsampling))
    return 1.0 + foreground_weight * torch.cat(masks)


def _alphas_cumprod() -> torch.Tensor:
    config = sd_scheduler_config()
    betas = torch.linspace(config["beta_start"] ** 0.5, config["beta_end"] ** 0.5, 1000, dtype=torch.float64) ** 2
    return torch.cumprod(1.0 - betas, dim=0).float()


def _parameters(modules) -> list[torch.nn.Parameter]:
    return [p for module in modules for p in module.parameters()]


def _evaluate(trained, ema, unet, vae, scaling, tokenizer, text_encoder, prompts, judge) -> dict[str, float]:
    """Judge accuracy of the EMA weights (the ones that ship), restoring the training weights after."""
    backup = [p.detach().clone() for p in _parameters(trained)]
    modes = [m.training for m in trained]
    ema.copy_to(_parameters(trained))
    for module in trained:
        module.eval()
    scores = judge_accuracy(unet, vae, scaling, tokenizer, text_encoder, prompts, judge)
    for module, mode in zip(trained, modes):
        module.train(mode)
    with torch.no_grad():
        for p, saved in zip(_parameters(trained), backup):
            p.copy_(saved)
    return {k: v for k, v in scores.items() if k.startswith("single/") and not k.endswith("/n")}


# Written into every tiny-sd folder; measured on the step-4 UNet of the README's history.
TINY_SD_RECOMMENDED = RecommendedSettings(
    cfg_scale=5.0, note=("CFG 5 was chosen on the step-4 UNet (mixkit eval tiny, 200 prompts, DPM++ 2M 20 steps: shape "
                         "83.5% at CFG 3, 86% at 5, 79.5% at 8); README has the shipped UNet's figures"),
    calibration_prompts=(  # int8 calibration (pipelines.approx.int8): every shape and colour, one- and two-shape scenes
        "a red circle on a blue background",
        "a black star on a yellow background",
        "a small white triangle below a small white circle, on a green background",
        "a small green square at the top left, on a purple background",
        "a large blue cross at the bottom right, on a red background",
        "a purple circle and a red triangle on a white background",
        "a large yellow square on a black background",
        "a small red star on the left of a blue cross, on a yellow background",
    ))


def save_tiny_sd(folder: Path, unet, vae, tokenizer, text_encoder) -> Path:
    """Write a diffusers StableDiffusionPipeline folder with fp16 safetensors (atomically: temp, then rename)."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline

    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=DDIMScheduler(**sd_scheduler_config()), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    with atomic_output_folder(folder, replace=True) as staged:
        pipe.to(torch.float16).save_pretrained(staged, safe_serialization=True)
        (staged / RECOMMENDED_FILE).write_text(TINY_SD_RECOMMENDED.to_json(), encoding="utf-8")
    return folder
