"""Fixtures for LoRA tests: tiny SD 1.x / SDXL models and LoRA files written by peer tools.

Fixture files are produced by the `lycoris-lora` package (with kohya's `lora_unet`/`lora_te`
prefixes) and by peft/diffusers, never by mixkit itself, so they are independent oracles.
"""

from __future__ import annotations

import copy
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

# LyCORIS picks fused/compiled kernels per call; the plain torch path is its reference implementation.
os.environ.setdefault("LYCORIS_KERNEL_BACKEND", "torch")

UNET_TARGETS = ["Transformer2DModel", "ResnetBlock2D", "Downsample2D", "Upsample2D"]
TE_TARGETS = ["CLIPAttention", "CLIPMLP"]


@dataclass
class TinyModel:
    unet: torch.nn.Module
    text_encoders: list[torch.nn.Module]

    def copy(self) -> "TinyModel":
        return TinyModel(copy.deepcopy(self.unet), [copy.deepcopy(t) for t in self.text_encoders])


def _load(folder: Path, sdxl: bool) -> TinyModel:
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()
    encoders = [CLIPTextModel.from_pretrained(folder, subfolder="text_encoder").eval()]
    if sdxl:
        encoders.append(CLIPTextModelWithProjection.from_pretrained(folder, subfolder="text_encoder_2").eval())
    return TinyModel(unet, encoders)


@pytest.fixture(autouse=True)
def _private_hash_cache(tmp_path, monkeypatch):
    """LoRA hashes are cached on disk by mixkit.io.hashing; keep the tests' entries out of ~/.cache."""
    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "hash-cache"))


@pytest.fixture(scope="session")
def _sd1_models(tiny_sd1_dir):
    return _load(Path(tiny_sd1_dir), sdxl=False)


@pytest.fixture(scope="session")
def _sdxl_models(tiny_sdxl_dir):
    return _load(Path(tiny_sdxl_dir), sdxl=True)


@pytest.fixture(scope="session")
def sd1_inputs(_sd1_models):
    """Inputs each module of the tiny SD 1.x model sees in one UNet step and one text-encoder pass."""
    return capture_inputs(_sd1_models, lambda m: run_model(m, sdxl=False))


@pytest.fixture(scope="session")
def sdxl_inputs(_sdxl_models):
    return capture_inputs(_sdxl_models, lambda m: run_model(m, sdxl=True))


@pytest.fixture
def sd1(_sd1_models) -> TinyModel:
    """A fresh copy of the tiny SD 1.x UNet + text encoder (tests may apply LoRAs to it)."""
    return _sd1_models.copy()


@pytest.fixture
def sdxl(_sdxl_models) -> TinyModel:
    return _sdxl_models.copy()


@pytest.fixture(scope="module")
def pipes(tiny_sd1_dir, tmp_path_factory):
    """The tiny SD 1.x pipeline with a LoRA folder holding `style`, and the same model without a LoRA folder."""
    from mixkit.testing.tiny_lora import write_attention_lora
    from pipelines.txt2img import TextToImage

    plain = TextToImage.from_pretrained(tiny_sd1_dir)
    folder = tmp_path_factory.mktemp("loras")
    write_attention_lora(plain.model.unet, folder / "style.safetensors")
    return TextToImage(plain.model, lora_dir=folder), plain


@dataclass
class PeerLora:
    """A LoRA file written by LyCORIS plus the LyCORIS-wrapped model copies that define its behaviour."""

    path: Path
    networks: list  # LycorisNetwork per component
    wrapped: TinyModel  # copies whose forwards LyCORIS replaced
    state_dict: dict[str, torch.Tensor]

    def set_multiplier(self, unet: float, te: float | None = None) -> None:
        te = unet if te is None else te
        self.networks[0].set_multiplier(unet)
        for network in self.networks[1:]:
            network.set_multiplier(te)


def _apply_preset(prefix: str, targets: list[str]) -> None:
    from lycoris import LycorisNetwork

    # The preset is class-level state in LyCORIS: set every field each time.
    LycorisNetwork.apply_preset({
        "enable_conv": True, "target_module": targets, "target_name": [], "module_algo_map": {},
        "name_algo_map": {}, "lora_prefix": prefix, "use_fnmatch": False, "exclude_name": [],
    })


def make_peer_lora(folder: Path, model: TinyModel, algo: str, *, seed: int = 0, dim: int = 4, alpha: float = 2.0,
                   per_module_alpha: bool = False, include_te: bool = True, metadata: dict | None = None,
                   name: str | None = None, **kwargs) -> PeerLora:
    """Train-free LyCORIS file: build the network with kohya prefixes, randomise it, save it."""
    from lycoris import create_lycoris
    from lycoris.logging import logger
    from safetensors.torch import save_file

    logger.setLevel(logging.ERROR)
    wrapped = model.copy()
    prefixes = [("lora_unet", wrapped.unet, UNET_TARGETS)]
    if include_te:
        te_prefixes = ["lora_te"] if len(wrapped.text_encoders) == 1 else ["lora_te1", "lora_te2"]
        prefixes += [(p, te, TE_TARGETS) for p, te in zip(te_prefixes, wrapped.text_encoders)]
    generator = torch.Generator().manual_seed(seed)
    networks, state = [], {}
    for prefix, module, targets in prefixes:
        _apply_preset(prefix, targets)
        network = create_lycoris(module, 1.0, linear_dim=dim, linear_alpha=alpha, algo=algo, **kwargs)
        network.apply_to()
        with torch.no_grad():
            for param_name, param in network.named_parameters():
                if "dora_scale" in param_name:
                    param.mul_(1 + 0.2 * torch.randn(param.shape, generator=generator))
                else:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
            if per_module_alpha:
                # Resized / block-weighted files: a different alpha on every module.
                for i, lora in enumerate(network.loras):
                    if hasattr(lora, "alpha") and isinstance(lora.alpha, torch.Tensor) and lora.alpha.dim() == 0:
                        new_alpha = 0.5 + (i % 5)
                        lora.alpha.fill_(new_alpha)
                        lora.scale = new_alpha / lora.lora_dim
        networks.append(network)
        state.update({k: v.detach().clone().contiguous() for k, v in network.state_dict().items()})
    path = Path(folder) / f"{name or algo}.safetensors"
    save_file(state, str(path), metadata=metadata)
    return PeerLora(path=path, networks=networks, wrapped=wrapped, state_dict=state)


def capture_inputs(model: TinyModel, run) -> dict[tuple[int, str], torch.Tensor]:
    """Inputs of every Linear/Conv/Norm module during `run(model)`, keyed by (root index, module path)."""
    seen: dict[tuple[int, str], torch.Tensor] = {}
    handles = []

    def remember(key):
        def hook(module, args):
            seen.setdefault(key, args[0].detach().clone())  # returns None: inputs are left as they are
        return hook

    for index, root in enumerate([model.unet, *model.text_encoders]):
        for path, module in root.named_modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.GroupNorm, torch.nn.LayerNorm)):
                handles.append(module.register_forward_pre_hook(remember((index, path))))
    try:
        run(model)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def unet_inputs(unet, seed: int = 0, sdxl: bool = False):
    generator = torch.Generator().manual_seed(seed)
    sample = torch.randn(1, 4, 8, 8, generator=generator)
    context = torch.randn(1, 7, unet.config.cross_attention_dim, generator=generator)
    kwargs = {}
    if sdxl:
        kwargs["added_cond_kwargs"] = {"text_embeds": torch.randn(1, 32, generator=generator),
                                       "time_ids": torch.randn(1, 6, generator=generator)}
    return sample, torch.tensor([10]), context, kwargs


def run_model(model: TinyModel, sdxl: bool = False) -> list[torch.Tensor]:
    """One UNet step and each text encoder on fixed inputs (what a LoRA changes)."""
    sample, timestep, context, kwargs = unet_inputs(model.unet, sdxl=sdxl)
    ids = torch.tensor([[512, 40, 41, 42, 43, 513, 513]])
    with torch.no_grad():
        outputs = [model.unet(sample, timestep, context, **kwargs).sample]
        outputs += [te(ids).last_hidden_state for te in model.text_encoders]
    return outputs


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def snapshot(model: TinyModel) -> dict[str, torch.Tensor]:
    state = {f"unet.{k}": v.detach().clone() for k, v in model.unet.state_dict().items()}
    for i, te in enumerate(model.text_encoders):
        state.update({f"te{i}.{k}": v.detach().clone() for k, v in te.state_dict().items()})
    return state


def merged_change(model: TinyModel, path) -> dict[str, torch.Tensor]:
    """What merging the LoRA file at `path` adds to every weight (the model is restored afterwards)."""
    from mixkit.lora import LoraRequest, apply_loras

    before = snapshot(model)
    handle = apply_loras(model.unet, model.text_encoders, [LoraRequest(path)], mode="merge")
    after = snapshot(model)
    handle.remove()
    return {k: after[k] - before[k] for k in before}


def assert_bit_identical(model: TinyModel, before: dict[str, torch.Tensor]) -> None:
    after = snapshot(model)
    assert after.keys() == before.keys()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert not changed, f"parameters changed after remove(): {changed[:5]}"
    patched = [n for root in [model.unet, *model.text_encoders] for n, m in root.named_modules() if "forward" in m.__dict__]
    assert not patched, f"forwards still patched after remove(): {patched[:5]}"


def make_kohya_lycoris_file(path: Path, model: TinyModel, network_args: dict[str, str], *, dim: int = 4,
                            alpha: float = 2.0, record: bool = True) -> Path:
    """A file as a kohya run with `--network_module lycoris.kohya --network_args ...` writes it: LyCORIS's own
    `kohya.create_network` and `save_weights`, with the `ss_network_*` keys kohya's train_network.py passes (its
    network_args as given, strings), or none with `record=False` (kohya's metadata left out)."""
    import json

    import lycoris.kohya
    from lycoris.logging import logger

    logger.setLevel(logging.ERROR)
    wrapped = model.copy()
    text_encoders = wrapped.text_encoders[0] if len(wrapped.text_encoders) == 1 else wrapped.text_encoders
    network = lycoris.kohya.create_network(1.0, dim, alpha, None, text_encoders, wrapped.unet, **network_args)
    network.apply_to(text_encoders, wrapped.unet, apply_text_encoder=True, apply_unet=True)
    metadata = {"ss_network_module": "lycoris.kohya", "ss_network_dim": str(dim), "ss_network_alpha": str(alpha),
                "ss_network_args": json.dumps(network_args)} if record else None
    network.save_weights(str(path), torch.float32, metadata)
    return Path(path)
