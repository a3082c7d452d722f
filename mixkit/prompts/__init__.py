"""The A1111 (v1.10) prompt language and prompt encoding.

Parsing (pure functions): `parse_prompt_attention`, `get_learned_conditioning_prompt_schedules`,
`get_multicond_prompt_list`, `extract_extra_networks`. Encoding: `PromptEncoder`,
`build_conditioning_plan`, `combine_cfg`, `EmbeddingLibrary`. Styles: `StyleLibrary` (A1111's styles.csv).
"""

from mixkit.prompts.attention import parse_prompt_attention
from mixkit.prompts.composable import get_multicond_prompt_list
from mixkit.prompts.conditioning import (
    ConditioningPlan, StepConditioning, build_conditioning_plan, combine_cfg, expand_latents,
)
from mixkit.prompts.embeddings import EmbeddingLibrary, TextualInversion, load_textual_inversion, ti_hashes_infotext
from mixkit.prompts.emphasis import EMPHASIS_MODES
from mixkit.prompts.encoder import EncodedPrompt, PromptEncoder
from mixkit.prompts.extra_networks import ExtraNetworkRequest, extract_extra_networks
from mixkit.prompts.limits import MAX_BRACKET_DEPTH, MAX_PROMPT_CHARS, check_prompt_text
from mixkit.prompts.scheduling import get_learned_conditioning_prompt_schedules
from mixkit.prompts.styles import StyleLibrary, apply_style_texts

__all__ = [
    "parse_prompt_attention", "get_learned_conditioning_prompt_schedules", "get_multicond_prompt_list",
    "extract_extra_networks", "ExtraNetworkRequest", "check_prompt_text", "MAX_PROMPT_CHARS", "MAX_BRACKET_DEPTH",
    "PromptEncoder", "EncodedPrompt", "build_conditioning_plan", "ConditioningPlan", "StepConditioning",
    "combine_cfg", "expand_latents", "EmbeddingLibrary", "TextualInversion", "load_textual_inversion",
    "ti_hashes_infotext", "EMPHASIS_MODES", "StyleLibrary", "apply_style_texts",
]
