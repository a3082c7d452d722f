"""A tiny captioned dataset of solid-colour squares, and a fixed evaluation loss to prove training works."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.training import diffusion_objective as objective


@pytest.fixture(scope="session")
def colour_dataset(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("colours")
    concept = root / "2_square"
    concept.mkdir()
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0))]:
        Image.new("RGB", (32, 32), colour).save(concept / f"{name}.png")
        (concept / f"{name}.txt").write_text(f"a {name} square, flat", encoding="utf-8")
    return root


def _fixed_denoising_loss(model, dataset_dir) -> float:
    """Epsilon MSE of `model` on the dataset's images at fixed timesteps and noise (an evaluation set)."""
    from mixkit.data import BucketedImageDataset, scan_kohya_folder
    from mixkit.training.text_conditioning import encode_sd

    records = scan_kohya_folder(dataset_dir).records
    batch = BucketedImageDataset(records, 32).load_batch(list(range(len(records))))
    generator = torch.Generator().manual_seed(123)
    from diffusers import DDPMScheduler

    alphas = DDPMScheduler.from_config(model.scheduler_config).alphas_cumprod
    with torch.no_grad():
        latents = model.vae.encode(batch["pixels"]).latent_dist.mean * model.vae.config.scaling_factor
        cond = encode_sd(model.text_encoders, model.tokenizers, batch["captions"], "cpu")
        losses = []
        for t in (50, 250, 500, 750, 950):
            timesteps = torch.full((latents.shape[0],), t)
            noise = torch.randn(latents.shape, generator=generator)
            noisy = objective.add_noise(latents, noise, timesteps, alphas)
            losses.append(objective.weighted_mse(model.unet(noisy, timesteps, **cond).sample, noise, None).item())
    return sum(losses) / len(losses)


@pytest.fixture(scope="session")
def fixed_denoising_loss():
    """`loss(model, dataset_dir)`: the same evaluation for every trainer, so "the loss falls" means the same thing."""
    return _fixed_denoising_loss


def write_images(folder, names, size=32, caption=True):
    """`folder` with a solid-colour `size`-pixel PNG per name, captioned `a <name> square, flat` in .txt files."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    colours = [(255, 0, 0), (0, 0, 255), (0, 200, 0), (250, 200, 0), (120, 0, 160)]
    for i, name in enumerate(names):
        Image.new("RGB", (size, size), colours[i % len(colours)]).save(folder / f"{name}.png")
        if caption:
            (folder / f"{name}.txt").write_text(f"a {name} square, flat", encoding="utf-8")
    return folder


def write_toml(path, text):
    """`path` holding `text` (a kohya dataset config)."""
    path.write_text(text, encoding="utf-8")
    return path


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(_toml_value(item) for item in value)}]"
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


def write_dataset_config(path, datasets: list[dict], general: dict | None = None):
    """`path` holding a kohya dataset config of `datasets` (tables, each with a "subsets" list of tables) and the
    `general` table: JSON for a .json path, else TOML laid out as kohya's documentation writes it. Tests that check
    the TOML syntax itself write it with `write_toml`."""
    if path.suffix == ".json":
        document = {**({"general": general} if general else {}), "datasets": datasets}
        path.write_text(json.dumps(document, default=str), encoding="utf-8")
        return path
    lines = ["[general]", *(f"{key} = {_toml_value(value)}" for key, value in general.items()), ""] if general else []
    for dataset in datasets:
        lines += ["[[datasets]]", *(f"{key} = {_toml_value(value)}" for key, value in dataset.items()
                                    if key != "subsets")]
        for subset in dataset.get("subsets", []):
            lines += ["  [[datasets.subsets]]", *(f"  {key} = {_toml_value(value)}" for key, value in subset.items())]
        lines.append("")
    return write_toml(path, "\n".join(lines))
