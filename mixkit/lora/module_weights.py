"""One LoRA module's tensors as read from a file, and the family that turns them into a weight change.

A strength s scales the change at full strength (A1111's `finalize_updown` multiplier, DoRA included); merge
mode adds it to the weight, runtime mode in the forward pass, so both are the same function of the file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from mixkit.lora import deltas
from mixkit.lora.algorithm_family import AlgorithmFamily
from mixkit.lora.algorithms import LORA_ALGORITHMS, SHARED_KEYS


@dataclass
class ModuleWeights:
    """The tensors of one LoRA module, plus the family that interprets them."""

    family: str
    tensors: dict[str, torch.Tensor]
    alpha: float | None = None
    dora_scale: torch.Tensor | None = None
    peft_magnitude: torch.Tensor | None = None  # PEFT's lora_magnitude_vector: DoRA in PEFT's form
    keys: list[str] = field(default_factory=list)
    # A `.scale` tensor: A1111's `NetworkModule.calc_scale` uses it instead of alpha/rank when present.
    scale_override: float | None = None

    @property
    def is_dora(self) -> bool:
        return self.dora_scale is not None or self.peft_magnitude is not None

    @property
    def spec(self) -> AlgorithmFamily:
        return LORA_ALGORITHMS.get(self.family)

    def rank(self) -> int | None:
        return self.spec.rank(self.tensors)

    def scale(self) -> float:
        if not self.spec.scaled:
            return 1.0
        if self.scale_override is not None:
            return self.scale_override
        rank = self.rank()
        return 1.0 if rank is None else deltas.rank_scale(self.alpha, rank)

    def problem(self) -> str | None:
        """What is wrong inside this module (tensors that do not fit together, an unsupported variant), or None."""
        empty = sorted(k for k, t in self.tensors.items() if t.numel() == 0 and k not in ("on_input",))
        if empty:
            return f"{', '.join(f'{k} {list(self.tensors[k].shape)}' for k in empty)} is empty (rank 0)"
        return self.spec.check(self.tensors) if self.spec.check is not None else None

    def implied_shape(self) -> tuple[int, int]:
        """(out, flattened in) of the weight this module was trained on."""
        return self.spec.implied_shape(self.tensors)

    def weight_change(self, weight: torch.Tensor, strength: float) -> torch.Tensor:
        """merged(W0, strength) - W0 in float32, for a float32 original weight `weight`."""
        delta = self.spec.delta(self.tensors, self.scale(), weight)
        if self.peft_magnitude is not None:
            return deltas.peft_dora_weight(weight + delta * strength, self.peft_magnitude.float()) - weight
        if self.dora_scale is None:
            return delta * strength
        # DoRA: the strength scales the whole change W'·m/||W'|| - W0, as A1111 (`finalize_updown` after
        # `apply_weight_decompose`) and ComfyUI (`weight_decompose`) do, so 0 is "no LoRA" and the change is
        # linear in the strength; LyCORIS's own merge (W'·(s·(m/||W'|| - 1) + 1)) agrees only at 1.
        return (deltas.dora_weight(weight + delta, self.dora_scale.float()) - weight) * strength

    def bias_change(self, strength: float) -> torch.Tensor | None:
        key = self.spec.bias_key
        if key is None or key not in self.tensors:
            return None
        scale = self.scale() if self.spec.bias_scaled else 1.0
        return self.tensors[key].float().reshape(-1) * (scale * strength)

    def layout_tensor(self) -> torch.Tensor | None:
        """A tensor whose number of dims must equal the target weight's (Linear 2-D, Conv 4-D), if the family has one."""
        key = self.spec.layout_key
        return None if key is None else self.tensors.get(key)

    @property
    def additive(self) -> bool:
        """True when the change does not depend on the original weight (plain sums: LoRA, LoHa, LoKr, full, norm)."""
        return self.spec.additive and not self.is_dora

    def low_rank_factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None:
        """(down, up, mid) when runtime mode can apply this module as a cheap bypass branch."""
        if self.family != "lora" or self.is_dora:
            return None
        return self.tensors["lora_down.weight"], self.tensors["lora_up.weight"], self.tensors.get("lora_mid.weight")


def rank_cut(weights: ModuleWeights, rank: int) -> ModuleWeights:
    """A1111's `dyn` for DyLoRA files: only the first `rank` ranks of a plain LoRA module (down rows, up columns),
    at the scale of the whole module (alpha over the full rank), as A1111's `rebuild_conventional` slices them.
    Other families and Tucker LoRAs are returned unchanged, as A1111 leaves them."""
    full = weights.rank()
    if weights.family != "lora" or "lora_mid.weight" in weights.tensors or full is None or rank >= full:
        return weights
    tensors = {**weights.tensors, "lora_down.weight": weights.tensors["lora_down.weight"][:rank],
               "lora_up.weight": weights.tensors["lora_up.weight"][:, :rank]}
    alpha = weights.alpha if not weights.alpha else weights.alpha * rank / full  # keeps alpha / rank = alpha / full
    return dataclasses.replace(weights, tensors=tensors, alpha=alpha)


def build_module(tensors_by_suffix: dict[str, torch.Tensor], keys: list[str]) -> tuple[ModuleWeights | None, list[str]]:
    """Recognise one module's tensor group; return it and the suffixes no family claimed.

    A group missing a required tensor is not built: its suffixes come back as unclaimed, with the
    missing ones named as `missing:<suffix>`, so the caller reports the module as broken.
    """
    suffixes = set(tensors_by_suffix)
    for name in LORA_ALGORITHMS:
        family = LORA_ALGORITHMS.get(name)
        if family.matches(suffixes):
            absent = family.missing(suffixes)
            if absent:
                return None, sorted(suffixes) + [f"missing:{k}" for k in absent]
            claimed = set(family.known_keys) | set(SHARED_KEYS)
            own = {k: v for k, v in tensors_by_suffix.items() if k in family.known_keys}
            alpha, scale = tensors_by_suffix.get("alpha"), tensors_by_suffix.get("scale")
            module = ModuleWeights(
                family=name, tensors=own,
                alpha=None if alpha is None else float(alpha.float().reshape(-1)[0].item()),
                dora_scale=tensors_by_suffix.get("dora_scale"),
                peft_magnitude=tensors_by_suffix.get("lora_magnitude_vector"), keys=keys,
                scale_override=None if scale is None else float(scale.float().reshape(-1)[0].item()),
            )
            return module, sorted(suffixes - claimed)
    return None, sorted(suffixes)
