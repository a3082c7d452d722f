"""What every recipe does before its work (`mixkit.tiny.recipe_common.start_recipe`)."""

from __future__ import annotations

from mixkit.tiny.recipe_clip import TinyClipRecipe
from mixkit.tiny.recipe_common import start_recipe
from mixkit.tiny.recipe_state import state_folder


def test_an_output_under_home_is_written_there_not_to_a_folder_named_tilde(tmp_path, monkeypatch):
    """`--set output=~/models/tiny-clip` (or a JSON config's "~/..."): the output check looked at the home folder but
    the weights and resume states went to `./~/models/...` in the working folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    recipe = TinyClipRecipe(output="~/models/tiny-clip")
    start_recipe(recipe)
    assert recipe.output == str(tmp_path / "home" / "models" / "tiny-clip")
    assert state_folder(recipe.output) == tmp_path / "home" / "models" / "tiny-clip-state"
