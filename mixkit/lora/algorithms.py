"""The LoRA families (LoRA/LoCon, LoHa, LoKr, IA3, full diff, norm, GLoRA, OFT) as one registry.

A file is a set of modules; each module is a group of tensors whose suffixes (`lora_down.weight`,
`hada_w1_a`, `lokr_w1`, ...) say which family it is (`module_weights.build_module`). Every family turns its
tensors into the change it makes to the target's weight (and bias) at full strength and checks that its tensors
fit together (`check`) before anything is applied.
"""

from __future__ import annotations

from mixkit.lora.algorithm_family import AlgorithmFamily
from mixkit.lora.families_factored import GLORA, LOHA, LOKR, LORA
from mixkit.lora.families_per_weight import FULL, IA3, NORM, OFT
from mixkit.registry import Registry

LORA_ALGORITHMS: Registry[AlgorithmFamily] = Registry("LoRA algorithm")
# Registration order is the order `build_module` tries the families in.
for _family in (LORA, LOHA, LOKR, IA3, FULL, NORM, GLORA, OFT):
    LORA_ALGORITHMS.register(_family.name, _family)

# Keys every family may carry next to its own tensors.
SHARED_KEYS = ("alpha", "dora_scale", "lora_magnitude_vector", "scale")
