"""Trainable LoRA / LoCon adapters attached to a frozen UNet and text encoders, in kohya's layout.

Each adapter is `up(down(x)) * alpha / rank` added to the output of an existing Linear or Conv2d
through a forward hook, so the base model's own modules and state-dict names stay untouched and
removing the hooks restores it exactly. Module names follow kohya's sd-scripts
(`lora_unet_<diffusers path with _>`), so `LoraNetwork.state_dict()` *is* the shareable file:
`<name>.lora_down.weight`, `<name>.lora_up.weight`, `<name>.alpha`.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from mixkit.training.pissa import LORA_INITIALISATIONS, PISSA, kohya_factors, principal_factors, residual_weight

if TYPE_CHECKING:
    from mixkit.training.lycoris_presets import LayerPreset

# Which parent modules are adapted, as in kohya's networks/lora.py: attention blocks always,
# ResNet and resampling blocks only for LoCon (their 3x3 convs are where LoCon adds capacity).
UNET_ATTENTION_PARENTS = ("Transformer2DModel",)
UNET_CONV_PARENTS = ("ResnetBlock2D", "Downsample2D", "Upsample2D")
TEXT_ENCODER_PARENTS = ("CLIPAttention", "CLIPSdpaAttention", "CLIPMLP")
# The "cross-kv" network (Kumari et al. 2023, Custom Diffusion): only the projections that turn text
# states into cross-attention keys and values, the one place where a new word enters the UNet.
CROSS_ATTENTION_KV = ("attn2.to_k", "attn2.to_v")


class LoraAdapter(nn.Module):
    """down (rank outputs, same kernel/stride/padding as the base layer) then up (1x1), scaled by alpha/rank."""

    def __init__(self, base: nn.Module, rank: int, alpha: float | None) -> None:
        """`alpha` None or 0 means alpha = rank (scale 1), as kohya's LoRAModule reads it; the buffer (the file's
        `.alpha`) then holds the rank, as kohya's files do, so every loader applies the scale the run trained with
        (an alpha of 0 taken literally would scale the adapter, and so every gradient, to exactly zero)."""
        super().__init__()
        if isinstance(base, nn.Conv2d):
            self.lora_down = nn.Conv2d(base.in_channels, rank, base.kernel_size, base.stride, base.padding, bias=False)
            self.lora_up = nn.Conv2d(rank, base.out_channels, 1, bias=False)
        else:
            self.lora_down = nn.Linear(base.in_features, rank, bias=False)
            self.lora_up = nn.Linear(rank, base.out_features, bias=False)
        # kohya's initialisation: random down, zero up, so training starts from the unchanged model.
        nn.init.kaiming_uniform_(self.lora_down.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_up.weight)
        self.register_buffer("alpha", torch.tensor(float(rank if not alpha else alpha)))
        self.rank = rank
        self.multiplier = 1.0
        # kohya's regularisers, active in training mode only (set by `LoraNetwork`): `dropout` on the rank-wide
        # hidden values, `rank_dropout` of whole rank channels per sample (the rest scaled up by 1/(1-p)),
        # `module_dropout`: the whole adapter skipped for a step with this probability.
        self.dropout = 0.0
        self.rank_dropout = 0.0
        self.module_dropout = 0.0

    def _skipped(self) -> bool:
        return self.training and self.module_dropout > 0 and torch.rand(()) < self.module_dropout

    def _down(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.lora_down(x)
        if not self.training:
            return hidden
        if self.dropout:
            hidden = nn.functional.dropout(hidden, self.dropout)
        if self.rank_dropout:
            # One keep/drop per (sample, rank channel); channels sit last for a Linear, second for a conv.
            samples = hidden.shape[0] if hidden.ndim > 1 else 1
            keep = (torch.rand(samples, self.rank, device=hidden.device) > self.rank_dropout).to(hidden.dtype)
            if isinstance(self.lora_down, nn.Linear):
                keep = keep.view(*([samples] if hidden.ndim > 1 else []), *([1] * (hidden.ndim - 2)), self.rank)
            else:
                keep = keep.view(samples, self.rank, *([1] * (hidden.ndim - 2)))
            hidden = hidden * keep / (1.0 - self.rank_dropout)
        return hidden

    def _scaled_up(self) -> torch.Tensor:
        # The scale goes on the rank x out weight, not on the tokens x out output: one small multiply per
        # call instead of a full-size one forward and another backward (with the fused add below: a sixth of the
        # adapters' cost on mixkit-tiny-sd, 0.20 -> 0.17 s a step).
        return self.lora_up.weight * (self.multiplier * float(self.alpha) / self.rank)  # a float: one tensor op

    def _delta(self, hidden: torch.Tensor) -> torch.Tensor:
        up = self._scaled_up()
        return nn.functional.conv2d(hidden, up) if isinstance(self.lora_up, nn.Conv2d) else nn.functional.linear(hidden, up)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The adapter's contribution, `up(down(x)) * alpha / rank`."""
        # The adapter's weights stay fp32 (they are trained) while a frozen base may run in bf16/fp16;
        # under autocast the matmuls pick their dtype themselves, outside it (validation images) cast here.
        dtype = self.lora_down.weight.dtype
        if x.dtype == dtype or torch.is_autocast_enabled(x.device.type):
            return self._delta(self._down(x))
        return self._delta(self._down(x.to(dtype))).to(x.dtype)

    def added_to(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """`out + self(x)`, or `out` alone when module dropout skips the adapter for this call."""
        if self._skipped():
            return out
        return self._plus_low_rank(out, x)

    def _plus_low_rank(self, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """`out + self(x)`; for a Linear base in full precision the add rides in the up matmul (addmm)."""
        fused = (isinstance(self.lora_up, nn.Linear) and out.dtype == x.dtype == self.lora_down.weight.dtype
                 and not torch.is_autocast_enabled(x.device.type))
        if not fused:
            return out + self(x)
        hidden = self._down(x)
        flat = torch.addmm(out.reshape(-1, out.shape[-1]), hidden.reshape(-1, hidden.shape[-1]), self._scaled_up().t())
        return flat.view(out.shape)


def max_norm_ratio(up: torch.Tensor, down: torch.Tensor, scale: float, max_norm: float) -> float:
    """The factor that brings the adapter's weight change `scale * up @ down` (Frobenius norm) down to `max_norm`,
    1.0 when it is already within (kohya's scale_weight_norms, max-norm regularisation after Srivastava et al. 2014).
    A conv adapter's change is the same product over the flattened kernels (its up is 1x1)."""
    norm = (up.flatten(1).double() @ down.flatten(1).double()).norm().item() * abs(scale)
    return 1.0 if norm <= max_norm else max_norm / norm


def _is_1x1(module: nn.Module) -> bool:
    return isinstance(module, nn.Conv2d) and tuple(module.kernel_size) == (1, 1)


def find_targets(root: nn.Module, parents: tuple[str, ...], *, include_3x3: bool) -> list[tuple[str, nn.Module]]:
    """(dotted path, layer) of every Linear/Conv2d inside modules whose class name is in `parents`."""
    found: dict[str, nn.Module] = {}
    for parent_name, parent in root.named_modules():
        if type(parent).__name__ not in parents:
            continue
        for child_name, child in parent.named_modules():
            if isinstance(child, nn.Linear) or _is_1x1(child) or (include_3x3 and isinstance(child, nn.Conv2d)):
                found[f"{parent_name}.{child_name}".strip(".")] = child
    return sorted(found.items())


def find_named_targets(root: nn.Module, paths: tuple[str, ...], *, include_3x3: bool) -> list[tuple[str, nn.Module]]:
    """(dotted path, layer) of the Linear/Conv2d layers at exactly these paths (a LyCORIS preset's target names, like
    `conv_in`); paths the model lacks are skipped, as LyCORIS skips them."""
    return sorted((path, layer) for path, layer in root.named_modules() if path in paths and (
        isinstance(layer, nn.Linear) or _is_1x1(layer) or (include_3x3 and isinstance(layer, nn.Conv2d))))


class LoraNetwork(nn.Module):
    """All adapters of one run, keyed by kohya module name; `attach`/`detach` manage the hooks."""

    def __init__(self, unet: nn.Module, text_encoders: list[nn.Module], *, rank: int, alpha: float,
                 conv_rank: int | None = None, conv_alpha: float | None = None, train_text_encoder: bool = False,
                 train_unet: bool = True, unet_layers: tuple[str, ...] | None = None,
                 word_vectors: nn.Module | None = None, dropout: float = 0.0, rank_dropout: float = 0.0,
                 module_dropout: float = 0.0, dora: bool = False, preset: LayerPreset | None = None,
                 top_level_paths: bool = True, initialisation: str = "kaiming") -> None:
        """`unet_layers`: adapt only the UNet layers whose path ends with one of these (None: all targets);
        `train_unet=False` (kohya's network_train_text_encoder_only) creates no UNet adapters at all, as kohya's
        `apply_to(..., apply_unet=False)` does, so the file holds `lora_te*` modules only;
        `word_vectors`: a `TrainedWordVectors` trained, attached and switched off together with the adapters;
        `dropout` / `rank_dropout` / `module_dropout`: kohya's network_dropout and network_args (see `LoraAdapter`),
        active while the network is in training mode; `dora`: every adapter a `DoraAdapter` (LyCORIS's dora_wd);
        `preset`: a LyCORIS layer preset (`lycoris_presets`) choosing the layers instead of kohya's networks.lora
        choice (3x3 convolutions then need `conv_rank`), its top-level paths only with `top_level_paths` (kohya's SDXL
        UNet has none of them); `initialisation`: "kaiming" (kohya's random down, zero up) or "pissa" (the layer's
        principal components, the base layer holding the residual while attached; `pissa`)."""
        # Imported here: dora_adapter builds on this module's LoraAdapter.
        from mixkit.training.dora_adapter import DoraAdapter

        super().__init__()
        if initialisation not in LORA_INITIALISATIONS:
            raise ValueError(f"initialisation {initialisation!r} is not one of {list(LORA_INITIALISATIONS)}")
        if initialisation == PISSA and (dora or dropout or rank_dropout or module_dropout):
            raise ValueError("PiSSA adapters carry the layer's principal part, so they cannot be dropped (dropouts) "
                             "or re-normalised (DoRA); use initialisation 'kaiming' for those")
        self.dora = dora
        self.pissa = initialisation == PISSA
        self._weights_while_detached: dict[str, torch.Tensor] = {}
        self._residuals: dict[str, tuple[tuple, torch.Tensor]] = {}
        self.word_vectors = word_vectors
        self.adapters = nn.ModuleDict()
        self._targets: dict[str, nn.Module] = {}
        self._hooks: list = []
        prefixes = ["lora_te"] if len(text_encoders) == 1 else ["lora_te1", "lora_te2"]
        if preset is None:
            groups = [("lora_unet", unet, find_targets(unet, UNET_ATTENTION_PARENTS, include_3x3=False))] \
                if train_unet else []
            if conv_rank and train_unet:
                groups.append(("lora_unet", unet, find_targets(unet, UNET_CONV_PARENTS, include_3x3=True)))
            te_parents = TEXT_ENCODER_PARENTS
        else:
            convs = bool(preset.convs and conv_rank)
            paths = preset.unet_paths if top_level_paths else ()
            groups = [("lora_unet", unet, find_targets(unet, preset.unet_parents, include_3x3=convs)
                       + find_named_targets(unet, paths, include_3x3=convs))] if train_unet else []
            te_parents = preset.text_encoder_parents
        if train_text_encoder:
            groups += [(p, te, find_targets(te, te_parents, include_3x3=False)) for p, te in zip(prefixes, text_encoders)]
        for prefix, root, targets in groups:
            # transformers 5 dropped CLIPTextModel's `text_model.` level; shared files (A1111, kohya,
            # diffusers' converter) still name text-encoder modules `text_model_encoder_...`.
            level = "text_model." if prefix.startswith("lora_te") and not hasattr(root, "text_model") else ""
            for path, layer in targets:
                name = f"{prefix}_{(level + path).replace('.', '_')}"
                if name in self.adapters or (prefix == "lora_unet" and unet_layers and not path.endswith(unet_layers)):
                    continue
                is_3x3 = isinstance(layer, nn.Conv2d) and not _is_1x1(layer)
                adapter = (DoraAdapter if dora else LoraAdapter)(layer, conv_rank if is_3x3 else rank,
                                                                 conv_alpha if is_3x3 else alpha)
                adapter.dropout, adapter.rank_dropout, adapter.module_dropout = dropout, rank_dropout, module_dropout
                if self.pissa:
                    _start_from_principal_part(adapter, layer)
                self.adapters[name] = adapter
                self._targets[name] = layer

    def _residual_of(self, name: str, layer: nn.Module) -> torch.Tensor:
        """The PiSSA residual of this layer's current weight, made again only when the weight was replaced or moved
        (the prior-preservation pass detaches and attaches every step)."""
        weight = layer.weight.data
        key = (weight.data_ptr(), weight.dtype, weight.device, tuple(weight.shape))
        cached = self._residuals.get(name)
        if cached is None or cached[0] != key:
            adapter = self.adapters[name]
            cached = (key, residual_weight(weight, adapter.pissa_down0, adapter.pissa_up0,
                                           float(adapter.alpha) / adapter.rank))
            self._residuals[name] = cached
        return cached[1]

    def attach(self) -> "LoraNetwork":
        """Add each adapter's output to its layer's output (idempotent)."""
        self.detach()
        for name, layer in self._targets.items():
            adapter = self.adapters[name]
            if self.pissa:  # the base layer holds W - principal part; the adapter adds it back (and what it learns)
                residual = self._residual_of(name, layer)
                self._weights_while_detached[name] = layer.weight.data
                layer.weight.data = residual
            self._hooks.append(layer.register_forward_hook(lambda _m, args, out, a=adapter: a.added_to(out, args[0])))
        if self.word_vectors is not None:
            self.word_vectors.attach()
        return self

    def detach(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        for name, weight in self._weights_while_detached.items():
            self._targets[name].weight.data = weight  # the very tensor the model had: restored bit for bit
        self._weights_while_detached.clear()
        if self.word_vectors is not None:
            self.word_vectors.detach()

    @contextlib.contextmanager
    def disabled(self):
        """The base model's own behaviour for the duration (hooks off, not zeroed: no adapter compute)."""
        attached = bool(self._hooks)
        self.detach()
        try:
            yield
        finally:
            if attached:
                self.attach()

    def parameter_groups(self, unet_lr: float, text_encoder_lr: float, word_vectors_lr: float | None = None,
                         up_lr_ratio: float | None = None, *, unet_up_lr_ratio: float | None = None,
                         text_encoder_up_lr_ratio: float | None = None) -> list[dict]:
        """UNet adapters, text-encoder adapters, then word vectors (without weight decay, as textual inversion
        trains them: decay would pull a word towards the zero vector, not towards its starting point).

        With `up_lr_ratio` (LoRA+, Hayou et al. 2024; kohya's `loraplus_lr_ratio`) each adapter set is split
        into its down weights at the set's rate and its up weights at `up_lr_ratio` times that: with up
        starting at zero, equal rates leave the up side learning too slowly for the width of the layer.
        `unet_up_lr_ratio` / `text_encoder_up_lr_ratio` set one part's ratio, each falling back to `up_lr_ratio`
        (kohya's loraplus_unet_lr_ratio / loraplus_text_encoder_lr_ratio)."""
        groups = []
        for prefix, lr, ratio in (("lora_unet", unet_lr, unet_up_lr_ratio or up_lr_ratio),
                                  ("lora_te", text_encoder_lr, text_encoder_up_lr_ratio or up_lr_ratio)):
            adapters = [a for n, a in self.adapters.items() if n.startswith(prefix)]
            if ratio is None:
                groups.append({"params": [p for a in adapters for p in a.parameters()], "lr": lr})
            else:
                # DoRA's magnitudes learn at the part's rate, as LyCORIS's LoRA+ boosts only lora_up weights.
                ups = {id(a.lora_up.weight) for a in adapters}
                groups += [{"params": [p for a in adapters for p in a.parameters() if id(p) not in ups], "lr": lr},
                           {"params": [a.lora_up.weight for a in adapters], "lr": lr * ratio}]
        if self.word_vectors is not None:
            groups.append({"params": list(self.word_vectors.parameters()),
                           "lr": text_encoder_lr if word_vectors_lr is None else word_vectors_lr, "weight_decay": 0.0})
        return [g for g in groups if g["params"]]

    @torch.no_grad()
    def apply_max_norm(self, max_norm: float) -> int:
        """Scale every adapter whose weight change is longer than `max_norm` back to it, up and down by the square
        root of the factor each (as kohya does after each step); returns how many adapters were scaled. A DoRA
        adapter's magnitude is left as it is: LyCORIS's apply_max_norm bounds the low-rank change alone too."""
        if self.pissa:
            raise ValueError("max-norm (scale_weight_norms) bounds a LoRA's change up @ down, but a PiSSA adapter's "
                             "product is the layer's principal part; train PiSSA without scale_weight_norms")
        scaled = 0
        for adapter in self.adapters.values():
            ratio = max_norm_ratio(adapter.lora_up.weight, adapter.lora_down.weight,
                                   float(adapter.alpha) / adapter.rank, max_norm)
            if ratio < 1.0:
                adapter.lora_up.weight.mul_(ratio ** 0.5)
                adapter.lora_down.weight.mul_(ratio ** 0.5)
                scaled += 1
        return scaled

    def kohya_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors of the shareable file: float32 copies with kohya's key names. A PiSSA adapter is written as
        the Kohya LoRA of its change to the original weight, at twice its rank (`pissa.kohya_factors`)."""
        if not self.pissa:
            return {f"{name}.{key}": value.detach().float().cpu().clone()
                    for name, adapter in self.adapters.items() for key, value in adapter.state_dict().items()}
        tensors = {}
        for name, adapter in self.adapters.items():
            trained = adapter.lora_down.weight.detach().cpu(), adapter.lora_up.weight.detach().cpu()
            down, up, alpha = kohya_factors(*trained, adapter.pissa_down0.cpu(), adapter.pissa_up0.cpu(),
                                            float(adapter.alpha) / adapter.rank)
            tensors.update({f"{name}.lora_down.weight": down, f"{name}.lora_up.weight": up,
                            f"{name}.alpha": torch.tensor(alpha)})
        return tensors


@torch.no_grad()
def _start_from_principal_part(adapter: LoraAdapter, layer: nn.Module) -> None:
    """PiSSA's start: the adapter's weights the layer's top singular directions, kept (not saved: they follow from
    the base model) to write the file as the change from them."""
    down, up = principal_factors(layer.weight, adapter.rank, float(adapter.alpha) / adapter.rank)
    adapter.lora_down.weight.copy_(down)
    adapter.lora_up.weight.copy_(up)
    adapter.register_buffer("pissa_down0", down.clone(), persistent=False)
    adapter.register_buffer("pissa_up0", up.clone(), persistent=False)
