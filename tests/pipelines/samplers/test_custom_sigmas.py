"""`pipelines.samplers.custom_sigmas`: A1111's schedule types run through diffusers' `_convert_to_karras` step."""

from __future__ import annotations

import pytest

from pipelines.samplers.custom_sigmas import with_sigma_schedule
from pipelines.samplers.sigma_schedules import karras_sigmas


def test_a_scheduler_class_without_the_hook_is_refused_instead_of_running_its_default_schedule():
    class NoKarrasHook:  # a diffusers release that renamed the step would look like this
        pass

    with pytest.raises(TypeError, match=r"NoKarrasHook has no `_convert_to_karras`.*choose the schedule type Automatic"):
        with_sigma_schedule(NoKarrasHook, karras_sigmas, False)
