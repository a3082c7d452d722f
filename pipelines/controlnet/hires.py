"""Hires fix with ControlNet units guiding both passes, as sd-webui-controlnet runs them.

The extension detects each unit's map once, for the first pass (a pixel-perfect resolution is computed
from the first pass's size), and resizes that map by the unit's resize mode to each pass's size
(`Script.detectmap_proc(detected_map, module, resize_mode, h, w)` and again at the hires size). Here the
first pass prepares the controls as any ControlNet txt2img does, and the second pass resizes them to its
own sampling size (`pipelines.controlnet.residuals.resize_controls`); the guidance window counts the
second pass's own steps. Canny and mlsd units use soft injection in the second pass whatever their control mode
(the extension's `high_res_fix_forced_soft_injection`: `weight * 0.825 ** (12 - i)` per residual). `HiresFix` picks these passes when its params carry units (`hires_passes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.controlnet.inpaint_only import INPAINT_ONLY
from pipelines.controlnet.pipelines import ControlImg2ImgParams, ControlNetMixin, _ControlState
from pipelines.controlnet.residuals import hires_second_pass_controls
from pipelines.hires import HiresParams, _FirstPass, _SecondPass


@dataclass
class ControlHiresParams(HiresParams):
    controlnets: list = field(default_factory=list)  # ControlNetUnit, at most ControlNetLimits.max_units


class ControlFirstPass(ControlNetMixin, _FirstPass):
    """The first pass with its units; keeps the prepared controls for the second pass."""

    controls_out: list

    def check_inputs(self, params) -> None:
        super().check_inputs(params)
        for index, unit in enumerate(params.controlnets):
            if unit.preprocessor == INPAINT_ONLY:
                raise ValueError(f"ControlNet {index}: preprocessor 'inpaint_only' with hires fix is not supported here "
                                 "(the extension keeps the picture's unmasked area in both passes at their own sizes); "
                                 "use 'inpaint', or inpaint_only without hires fix.")

    def _prepare(self, params) -> _ControlState:
        state = super()._prepare(params)
        self.controls_out = state.controls
        return state


class ControlSecondPass(ControlNetMixin, _SecondPass):
    """The second pass guided by the first pass's controls, resized to this pass's size."""

    first_controls: list

    @classmethod
    def pass_params(cls, params: ControlHiresParams, **values) -> ControlImg2ImgParams:
        return ControlImg2ImgParams(**values, controlnets=params.controlnets)

    def follow(self, first_pass: ControlFirstPass) -> None:
        self.first_controls = first_pass.controls_out

    def _prepare(self, params) -> _ControlState:
        base = super(ControlNetMixin, self)._prepare(params)  # _SecondPass's: the given latents
        return _ControlState(base, hires_second_pass_controls(self.first_controls, params.width, params.height))
