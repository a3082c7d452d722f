"""The IP-Adapter infotext keys written and read back: names, scales and guidance windows."""

from __future__ import annotations

import numpy as np
import pytest

from .ip_adapter_helpers import SMALL, pixels, reference


def test_windows_round_trip_through_a_generated_infotext(ip_pipe, adapter_file, second_adapter):
    """write -> parse -> the same scales and windows, and a call with them gives the same picture and infotext."""
    from pipelines.infotext import parse_infotext
    from pipelines.ip_adapter_infotext import ip_adapter_fields_from_infotext

    call = dict(SMALL, ip_adapter=[str(adapter_file), str(second_adapter)],
                ip_adapter_image=[reference(0), reference(1)])
    first = ip_pipe(**call, ip_adapter_scale=[0.8, 0.35], ip_adapter_guidance=[(0.0, 0.25), (0.5, 1.0)])
    assert 'IP-Adapter Guidance: "0-0.25, 0.5-1"' in first.infotexts[0]
    fields = ip_adapter_fields_from_infotext(parse_infotext(first.infotexts[0]))
    assert fields == {"ip_adapter_scale": [0.8, 0.35], "ip_adapter_guidance": [(0.0, 0.25), (0.5, 1.0)]}
    again = ip_pipe(**call, **fields)
    assert np.array_equal(pixels(again), pixels(first))
    assert again.infotexts[0] == first.infotexts[0]


def test_full_windows_are_not_written_and_read_as_every_step(ip_pipe, adapter_file):
    from pipelines.infotext import parse_infotext
    from pipelines.ip_adapter_infotext import GUIDANCE_KEY, ip_adapter_fields_from_infotext

    result = ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=0.6,
                     ip_adapter_guidance=(0.0, 1.0))
    assert GUIDANCE_KEY not in result.infotexts[0]
    assert ip_adapter_fields_from_infotext(parse_infotext(result.infotexts[0])) == {
        "ip_adapter_scale": [0.6], "ip_adapter_guidance": [(0.0, 1.0)]}


@pytest.mark.parametrize("windows", [[(0.2, 0.8)], [(1e-05, 0.5), (0.0, 1.0)], [(0.125, 0.125), (0.0, 0.3)]])
def test_written_windows_parse_back_exactly(windows):
    from pipelines.infotext import build_infotext, parse_infotext
    from pipelines.ip_adapter_infotext import (
        IPAdapterInfotextEntry, ip_adapter_entries_from_infotext, ip_adapter_infotext,
    )

    names = [f"ip-adapter_{index}" for index in range(len(windows))]
    scales = [0.5 + index / 3 for index in range(len(windows))]
    written = ip_adapter_infotext(names, scales, windows)
    parsed = parse_infotext(build_infotext("a cat", "", {"Steps": 4, **written}))
    assert ip_adapter_entries_from_infotext(parsed) == [IPAdapterInfotextEntry(name, scale, *window)
                                                        for name, scale, window in zip(names, scales, windows)]


@pytest.mark.parametrize("guidance, message", [
    ("0.2-0.8", "1 windows for the 2 adapters"),
    ("0.2-0.8, late", "'late' is not 'start-end'"),
    ("0.2-0.8, 0.9-0.1", "'0.9-0.1' is not 'start-end' with 0 <= start <= end <= 1"),
])
def test_bad_guidance_entries_are_named(guidance, message):
    from pipelines.ip_adapter_infotext import ip_adapter_entries_from_infotext

    with pytest.raises(ValueError, match=message):
        ip_adapter_entries_from_infotext({"IP-Adapter": "a: 1, b: 0.5", "IP-Adapter Guidance": guidance})


def test_no_adapter_no_fields():
    from pipelines.ip_adapter_infotext import ip_adapter_fields_from_infotext

    assert ip_adapter_fields_from_infotext({"Steps": 20}) == {}
