"""Every trainer by name (`sd-lora`, `clip`, ...), for the CLI and apps; imports happen on use.

An entry names its config dataclass and its train function as import paths, so listing trainers
(`mixkit train --help`) does not import torch, diffusers or transformers.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from mixkit.registry import Registry


@dataclass(frozen=True)
class TrainerEntry:
    """Where a trainer's config class and train function live, and what it trains."""

    config: str
    train: str
    description: str

    def load(self):
        """(config class, train function)."""
        config_module, config_name = self.config.rsplit(".", 1)
        train_module, train_name = self.train.rsplit(".", 1)
        return (getattr(importlib.import_module(config_module), config_name),
                getattr(importlib.import_module(train_module), train_name))


TRAINERS: Registry[TrainerEntry] = Registry("trainer")
TRAINERS.register("sd-lora", TrainerEntry(
    "mixkit.training.sd_lora_config.SDLoraTrainingConfig", "mixkit.training.sd_lora_trainer.train_sd_lora",
    "LoRA / LoCon for Stable Diffusion 1.x/2.x/SDXL, exported in kohya format"))
TRAINERS.register("ti", TrainerEntry(
    "mixkit.training.ti_config.SDTextualInversionConfig", "mixkit.training.ti_trainer.train_textual_inversion",
    "textual-inversion embedding (a new word's vectors) for SD 1.x/2.x/SDXL, in kohya's and A1111's formats"))
TRAINERS.register("hypernetwork", TrainerEntry(
    "mixkit.training.hn_config.SDHypernetworkConfig", "mixkit.training.hn_trainer.train_hypernetwork",
    "A1111 hypernetwork (MLPs on the attention's key/value context) for SD 1.x/2.x/SDXL, new or continued, "
    "written as A1111's .pt"))
TRAINERS.register("hypernetwork-create", TrainerEntry(
    "mixkit.training.hn_config.HypernetworkCreateConfig", "mixkit.training.hn_trainer.create_hypernetwork",
    "a new, untrained A1111 hypernetwork .pt (A1111's Create hypernetwork: sizes, layer structure, activation, ...)"))
TRAINERS.register("clip", TrainerEntry(
    "mixkit.training.clip_config.ClipTrainingConfig", "mixkit.training.clip_trainer.train_clip",
    "CLIP contrastive fine-tuning on image-text pairs (all-gathered negatives across processes)"))
TRAINERS.register("sd-finetune", TrainerEntry(
    "mixkit.training.sd_finetune_config.SDFinetuneConfig", "mixkit.training.sd_finetune_trainer.train_sd_finetune",
    "full UNet fine-tune or from-scratch training of Stable Diffusion, with EMA; writes a diffusers folder"))
TRAINERS.register("blip2-stage1", TrainerEntry(
    "mixkit.training.blip2_stage1_config.Blip2Stage1Config", "mixkit.training.blip2_stage1_trainer.run_blip2_stage1",
    "BLIP-2 stage 1: Q-Former pre-training (ITC + ITM + ITG) on image-text pairs, vision frozen"))
TRAINERS.register("blip2-stage2", TrainerEntry(
    "mixkit.training.blip2_stage2_config.Blip2Stage2Config", "mixkit.training.blip2_stage2_trainer.train_blip2_stage2",
    "BLIP-2 stage 2: Q-Former + projection into a language model (LM loss; LM frozen unless asked)"))
TRAINERS.register("minigpt4", TrainerEntry(
    "mixkit.training.minigpt4_config.MiniGPT4Config", "mixkit.training.minigpt4_trainer.train_minigpt4",
    "MiniGPT-4: one linear layer from a frozen BLIP-2 Q-Former into a frozen chat LM"))
# The mixkit-tiny recipes: trainers whose every setting has a default (`mixkit train recipe tiny-sd`).
TRAINERS.register("tiny-clip", TrainerEntry(
    "mixkit.tiny.recipe_clip.TinyClipRecipe", "mixkit.tiny.recipe_clip.train_tiny_clip",
    "recipe: mixkit-tiny-clip, a small CLIP trained from scratch on the shapes world"))
TRAINERS.register("tiny-vae", TrainerEntry(
    "mixkit.tiny.recipe_vae.TinyVaeRecipe", "mixkit.tiny.recipe_vae.train_tiny_vae_recipe",
    "recipe: the autoencoder of mixkit-tiny-sd alone (4x, fully convolutional), to reuse with --set vae=DIR"))
TRAINERS.register("tiny-sd", TrainerEntry(
    "mixkit.tiny.recipe_sd.TinySDRecipe", "mixkit.tiny.recipe_sd.train_tiny_sd",
    "recipe: mixkit-tiny-sd, a small Stable Diffusion (VAE + UNet) on the shapes world, conditioned on tiny-clip"))
TRAINERS.register("tiny-blip2", TrainerEntry(
    "mixkit.tiny.recipe_blip2.TinyBlip2Recipe", "mixkit.tiny.recipe_blip2.train_tiny_blip2",
    "recipe: mixkit-tiny-blip2, a BLIP-2-style captioner / VQA model (stage 1 + stage 2) on the shapes world"))
