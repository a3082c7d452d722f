"""mixkit's modular vision-language model: swap the vision tower, bridge and LM independently."""

from mixkit.models.vlm.modular.bridges import (
    BRIDGES,
    LinearBridge,
    MLPBridge,
    ProjectionBridgeConfig,
    QFormerBridge,
    QFormerBridgeConfig,
    build_bridge,
)
from mixkit.models.vlm.modular.hf_import import from_hf_blip2, from_hf_instructblip
from mixkit.models.vlm.modular.hf_import_llava import from_hf_llava
from mixkit.models.vlm.modular.model import VISION_TOWERS, VisionLanguageModel
from mixkit.models.vlm.modular.minigpt4 import MINIGPT4_TEMPLATE, build_minigpt4, minigpt4_input_ids, minigpt4_prompt
from mixkit.models.vlm.modular.qformer import QFormer, QFormerConfig
from mixkit.models.vlm.modular.saving import save_modular_vlm
from mixkit.models.vlm.modular.stage1 import Blip2Stage1Heads, Stage1Losses, blip2_stage1_losses
from mixkit.models.vlm.modular.task_config import ModularTaskConfig

__all__ = [
    "BRIDGES", "MINIGPT4_TEMPLATE", "VISION_TOWERS", "Blip2Stage1Heads", "Stage1Losses", "blip2_stage1_losses",
    "build_minigpt4", "minigpt4_input_ids", "minigpt4_prompt", "LinearBridge", "MLPBridge", "ProjectionBridgeConfig", "QFormer", "QFormerBridge",
    "QFormerBridgeConfig", "QFormerConfig", "VisionLanguageModel", "build_bridge", "from_hf_blip2",
    "from_hf_instructblip", "from_hf_llava", "ModularTaskConfig", "save_modular_vlm",
]
