"""`<hypernet:name:strength>` tags: A1111's fields, loud errors for malformed ones, one strength per name."""

from __future__ import annotations

import pytest

from mixkit.hypernetworks import HypernetworkLibrary, parse_hypernetwork_tags, resolve_hypernetwork_requests
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork


def test_tags_are_read_in_order_with_a1111s_defaults():
    prompt = "a <hypernet:a:0.5> cat <lora:x:1> <hypernet:b> <Hypernet:c:1> <hypernet:d:x=1:0.25>"
    assert [(r.name, r.strength, r.raw) for r in parse_hypernetwork_tags(prompt)] == [
        ("a", 0.5, "<hypernet:a:0.5>"), ("b", 1.0, "<hypernet:b>"),  # kinds are case-sensitive: not <Hypernet:...>
        ("d", 0.25, "<hypernet:d:x=1:0.25>")]  # named fields are not read


@pytest.mark.parametrize("prompt, message", [
    ("<hypernet::1>", "has no name"),
    ("<hypernet:a:strong>", "strength must be a number, got 'strong'"),
    ("<hypernet:a:nan>", "finite"),
    ("<hypernet:a:1e9>", "beyond"),
])
def test_malformed_tags_are_refused(prompt, message):
    with pytest.raises(ValueError, match=message):
        parse_hypernetwork_tags(prompt)


def test_a_name_twice_is_applied_twice_at_its_last_strength(tmp_path):
    write_a1111_hypernetwork(tmp_path / "a.pt", widths=(8,))
    write_a1111_hypernetwork(tmp_path / "b.pt", widths=(8,), seed=1)
    requests = parse_hypernetwork_tags("<hypernet:a:1> <hypernet:b:0.3> <hypernet:a:0.5>")
    with pytest.warns(UserWarning, match="hypernetwork a is named more than once"):
        applications = resolve_hypernetwork_requests(requests, HypernetworkLibrary(tmp_path))
    assert [(a.hypernetwork.name, a.strength) for a in applications] == [("a", 0.5), ("b", 0.3), ("a", 0.5)]
    assert applications[0].hypernetwork is applications[2].hypernetwork
