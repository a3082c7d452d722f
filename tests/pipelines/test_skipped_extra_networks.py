"""Tags of extra-network kinds mixkit does not apply (`<3:love>`, `<foo:bar>`, and `<hypernet:x:1>` without a
hypernetwork folder) are removed from the prompt and skipped with a warning, as A1111's `extra_networks.parse_prompt`
removes every `<\\w+:[^>]+>` tag and its `activate` skips unknown kinds; the infotext keeps the prompt as written,
as A1111's does."""

import numpy as np
import pytest

from pipelines.infotext import parse_infotext

SMALL = dict(width=64, height=64, steps=2, seed=9, sampler="Euler")


@pytest.mark.parametrize("prompt, warning", [
    ("a red <3:love> circle", "skipping unknown extra network '3'"),
    ("a red <foo:bar:x> circle", "skipping unknown extra network 'foo'"),
    ("a red <hypernet:anime_3:0.8> circle", "no hypernetwork folder is set"),
])
def test_the_tag_is_removed_not_refused(sd1_pipe, prompt, warning):
    with pytest.warns(UserWarning, match=warning):
        tagged = sd1_pipe(prompt=prompt, **SMALL)
    without = sd1_pipe(prompt="a red  circle", **SMALL)  # the tag's place keeps its spaces, as in A1111
    assert np.array_equal(np.asarray(tagged.images[0]), np.asarray(without.images[0]))
    assert parse_infotext(tagged.infotexts[0])["Prompt"] == prompt


def test_text_that_is_no_tag_is_encoded(sd1_pipe):
    # `<foo:>` has nothing after the colon: no tag for A1111's regex, so it is prompt text
    kept = sd1_pipe(prompt="a red <foo:> circle", **SMALL)
    without = sd1_pipe(prompt="a red  circle", **SMALL)
    assert not np.array_equal(np.asarray(kept.images[0]), np.asarray(without.images[0]))

