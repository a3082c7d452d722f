"""Stable Diffusion model families and their loading (diffusers folders, hub ids, single files)."""

from mixkit.models.diffusion.family import ModelFamily, detect_family
from mixkit.models.diffusion.components import DiffusionModel

__all__ = ["ModelFamily", "detect_family", "DiffusionModel"]
