"""AppFlow: multimodal apps as validated chains of small typed tasks, run in one call.

    from appflow import Appflow
    task = Appflow(app="openset_det_sam", models=["IDEA-Research/grounding-dino-tiny", "facebook/sam-vit-base"])
    result = task(image=img, prompt="dog")   # result["labels"], result["boxes"], result["seg_masks"]
"""

from appflow.apps import APPS, describe_app, list_apps, register_app
from appflow.cache import MODEL_CACHE, ModelCache, release_models
from appflow.chain import Chain, ChainError, Step, validate_chain
from appflow.chain_files import chain_from_dict, load_chain
from appflow.flow import Appflow
from appflow.model_kinds import MODEL_KINDS, ModelKind, register_model_kind
from appflow.progress import AppInterrupted
from appflow.ports import PORT_TYPES, register_port_type
from appflow.task import TASKS, Port, Task, register_task

__all__ = [
    "APPS", "AppInterrupted", "Appflow", "Chain", "ChainError", "MODEL_CACHE", "MODEL_KINDS", "ModelCache", "ModelKind",
    "PORT_TYPES", "Port", "Step", "TASKS", "Task", "chain_from_dict", "describe_app", "list_apps", "load_chain",
    "register_app", "register_model_kind", "register_port_type", "register_task", "release_models", "validate_chain",
]
