"""Stable Diffusion model families and their loading (diffusers folders, hub ids, single files)."""

from mixkit.models.diffusion.family import ModelFamily, detect_family
from mixkit.models.diffusion.components import DiffusionModel

__all__ = ["ModelFamily", "detect_family", "DiffusionModel", "load_diffusion_model", "load_single_file",
           "load_single_file_vae", "save_ldm_checkpoint"]


def __getattr__(name: str):
    """Loaders import torch/diffusers; resolve them on first use to keep this package cheap."""
    if name == "load_diffusion_model":
        from mixkit.models.diffusion.loading import load_diffusion_model

        return load_diffusion_model
    if name in ("load_single_file", "load_single_file_vae"):
        from mixkit.models.diffusion import single_file

        return getattr(single_file, name)
    if name == "save_ldm_checkpoint":
        from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

        return save_ldm_checkpoint
    raise AttributeError(name)
