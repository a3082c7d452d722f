"""Settings > Sampler parameters "Random number generator source": A1111's `randn_source` radio (GPU, CPU, NV).

Applied with its own button, as the colour correction settings are; the value is `/sdapi/v1/options`' `randn_source`,
read by every generation of the UI and of the API (override_settings can change it per request). mixkit's default
is CPU; NV draws NVIDIA's GPU noise on the CPU (`pipelines.rng_source`), and GPU is taken only by a model on the CPU.
"""

from __future__ import annotations

import gradio as gr

from pipelines.rng_source import RNG_SOURCES
from pipelines.rng_source import SETTING_KEY as RNG_SOURCE_KEY
from webui.server_state import ServerState

LABEL = ("Random number generator source (changes seeds drastically; NV: NVIDIA's GPU noise drawn on the CPU, the "
         "same picture on any machine; GPU: only with the model on the CPU, where it is the CPU noise)")


def build_rng_source_settings(state: ServerState, apply_settings) -> None:
    """The radio (A1111's choices, in its order) and its button."""
    source = gr.Radio(list(RNG_SOURCES), value=lambda: state.options.get(RNG_SOURCE_KEY), label=LABEL,
                      elem_id="settings_randn_source")
    status = gr.Markdown()
    button = gr.Button("Apply RNG source", elem_id="settings_apply_randn_source")
    button.click(lambda value: apply_settings(state, {RNG_SOURCE_KEY: value}), inputs=source, outputs=status)
