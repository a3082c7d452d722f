"""Resume states of the tiny recipes: what is refused, and what a restore puts back (the bit-for-bit runs are in
test_recipes.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from mixkit.tiny.recipe_common import RecipeClock
from mixkit.tiny.recipe_state import (
    check_resume_settings,
    read_recipe_state,
    restore_recipe_state,
    save_recipe_state,
    state_folder,
)
from mixkit.training.training_state import CheckpointMismatchError


@dataclass
class ToyRecipe:
    output: str = "out"
    steps: int = 10
    learning_rate: float = 0.1
    checkpoint_every: int = 0
    resume_from: str = ""


def _run(seed=0, width=3):
    torch.manual_seed(seed)
    model = torch.nn.Linear(width, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, width)).sum().backward()
    optimizer.step()
    return model, optimizer, torch.Generator().manual_seed(seed)


def _save(folder, step, recipe=None, name="toy", width=3):
    model, optimizer, generator = _run(width=width)
    return save_recipe_state(folder, name=name, recipe=recipe or ToyRecipe(), step=step, modules={"model": model},
                             ema=None, optimizer=optimizer, generator=generator, curve=[{"step": step}],
                             metrics={"acc": 0.5}, clock=RecipeClock(), extra={"note": "kept"},
                             tensors={"t": torch.arange(3)})


def test_a_state_restores_weights_optimizer_and_generators_and_only_the_newest_is_kept(tmp_path):
    model, optimizer, generator = _run()
    _save(tmp_path, 2)
    path = _save(tmp_path, 4)
    assert [p.name for p in tmp_path.iterdir()] == [path.name] == ["step-00000004.pt"]
    torch.manual_seed(0)  # the global RNG as the save saw it: seeded, then drawn from by the layer's init
    torch.nn.Linear(3, 2)
    global_next = torch.rand(3)

    fresh, fresh_optimizer, fresh_generator = _run(seed=7)
    torch.randn(5, generator=fresh_generator)
    state = read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(), total_steps=10)
    restore_recipe_state(state, name="toy", modules={"model": fresh}, ema=None, optimizer=fresh_optimizer,
                         generator=fresh_generator)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))
    saved_moments, restored_moments = optimizer.state_dict()["state"][0], fresh_optimizer.state_dict()["state"][0]
    assert all(torch.equal(saved_moments[k], restored_moments[k]) for k in ("exp_avg", "exp_avg_sq"))
    assert torch.equal(torch.randn(4, generator=fresh_generator), torch.randn(4, generator=generator))
    assert torch.equal(torch.rand(3), global_next)
    assert state.step == 4 and state.curve == [{"step": 4}] and state.metrics == {"acc": 0.5}
    assert state.extra == {"note": "kept"} and torch.equal(state.tensors["t"], torch.arange(3))


def test_resume_refuses_another_recipe_changed_settings_a_finished_run_and_other_weights(tmp_path):
    _save(tmp_path, 4)
    with pytest.raises(CheckpointMismatchError, match="a state of the toy recipe, not tiny-sd; resume it with "
                                                      "`mixkit train recipe toy`"):
        read_recipe_state(str(tmp_path), name="tiny-sd", recipe=ToyRecipe(), total_steps=10)
    with pytest.raises(CheckpointMismatchError, match=r"learning_rate: 0.1 in the state, 0.2 now"):
        read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(learning_rate=0.2), total_steps=10)
    read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(output="elsewhere", checkpoint_every=3),
                      total_steps=10)  # where it writes may change
    with pytest.raises(CheckpointMismatchError, match="saved at step 4, the run's last step"):
        read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(), total_steps=4)
    state = read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(), total_steps=10)
    wider, optimizer, generator = _run(width=5)
    with pytest.raises(CheckpointMismatchError, match="another architecture"):
        restore_recipe_state(state, name="toy", modules={"model": wider}, ema=None, optimizer=optimizer,
                             generator=generator)


def test_resume_from_names_what_is_missing_or_unreadable(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; name a <output>-state folder"):
        check_resume_settings(ToyRecipe(resume_from=str(tmp_path / "nothing")))
    with pytest.raises(FileNotFoundError, match="holds no resume state"):
        check_resume_settings(ToyRecipe(resume_from=str(tmp_path)))
    broken = tmp_path / "step-00000003.pt"
    broken.write_bytes(b"not a state")
    with pytest.raises(CheckpointMismatchError, match="is not a readable mixkit recipe state"):
        read_recipe_state(str(tmp_path), name="toy", recipe=ToyRecipe(), total_steps=10)
    torch.save({"format": "something else"}, broken)
    with pytest.raises(CheckpointMismatchError, match="is not a mixkit recipe state"):
        read_recipe_state(str(broken), name="toy", recipe=ToyRecipe(), total_steps=10)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="checkpoint_every must be an integer >= 0"):
            check_resume_settings(ToyRecipe(checkpoint_every=bad))
    assert state_folder("runs/my-tiny-sd/") == state_folder("runs/my-tiny-sd")
    assert str(state_folder("runs/my-tiny-sd")) == "runs/my-tiny-sd-state"
