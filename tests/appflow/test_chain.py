"""Chain validation: every malformed chain fails before any model loads, naming the step and key."""

from __future__ import annotations

import pytest

import appflow
from appflow import Appflow, Chain, ChainError, ModelCache, Port, Step, Task, register_task, validate_chain
from appflow.model_kinds import ModelKind, register_model_kind
from appflow.task import TASKS

LOADS: list[str] = []


def _counting_load(source, device, dtype):
    LOADS.append(source)
    return {"source": source}


if "test-counter" not in appflow.MODEL_KINDS:
    register_model_kind(ModelKind("test-counter", "a counting test model", (), _counting_load))


class ShoutTask(Task):
    """A user task: upper-cases a text, using a (counting) model so loading can be observed."""

    name = "test_shout"
    inputs = {"text": Port("text")}
    outputs = {"text": "text", "length": "scores"}
    main_output = "text"
    models = {"counter": "test-counter"}
    default_models = {"counter": "counter-model"}
    options = {"suffix": "!"}

    def run(self, models, options, *, text):
        import torch

        models.get("counter")
        return {"text": text.upper() + options["suffix"], "length": torch.tensor([float(len(text))])}


class ReverseTask(Task):
    name = "test_reverse"
    inputs = {"text": Port("text")}
    outputs = {"text": "text"}
    main_output = "text"

    def run(self, models, options, *, text):
        return {"text": text[::-1]}


class NeedsImageTask(Task):
    name = "test_needs_image"
    inputs = {"image": Port("image")}
    outputs = {"text": "text"}
    main_output = "text"

    def run(self, models, options, *, image):
        return {"text": f"{image.width}x{image.height}"}


for _task in (ShoutTask, ReverseTask, NeedsImageTask):
    if _task.name not in TASKS:
        register_task(_task)


@pytest.fixture(autouse=True)
def _clear_loads():
    LOADS.clear()


def test_user_registered_task_in_user_chain_runs_and_loads_its_model_once():
    # No declared inputs: `text` of the second step is piped from the first, the first's is the app's.
    chain = Chain("shout_then_reverse", [Step("test_shout"), Step("test_reverse")])
    flow = Appflow(chain, cache=ModelCache())
    assert flow.inputs == {"text": "text"}
    assert LOADS == []  # building a flow loads nothing
    result = flow(text="abc")
    assert result["result"] == "!CBA"
    assert result["text"] == "!CBA"  # the later step's output wins the shared name
    assert result["length"].tolist() == [3.0]
    flow(text="xy", suffix="?")  # per-call option override
    assert LOADS == ["counter-model"]
    assert flow(text="xy", suffix="?")["result"] == "?YX"


def test_a_declared_app_input_wins_over_an_earlier_output_of_the_same_name():
    chain = Chain("both_read_input", [Step("test_shout"), Step("test_reverse")], inputs=["text"],
                  outputs={"shouted": "test_shout.text"})
    result = Appflow(chain, cache=ModelCache())(text="abc")
    assert result["result"] == "cba"
    assert result["shouted"] == "ABC!"


def test_chain_from_dict_json_and_yaml_give_the_same_result(tmp_path):
    import json

    import yaml

    data = {"name": "data_chain", "inputs": ["text"],
            "steps": [{"task": "test_shout", "id": "loud", "options": {"suffix": "?"}},
                      {"task": "test_reverse", "inputs": {"text": "loud.text"}}],
            "outputs": {"loud": "loud.text"}}
    (tmp_path / "chain.json").write_text(json.dumps(data))
    (tmp_path / "chain.yaml").write_text(yaml.safe_dump(data))
    results = [Appflow(source, cache=ModelCache())(text="ab") for source in
               (data, str(tmp_path / "chain.json"), tmp_path / "chain.yaml")]
    for result in results:
        assert result["result"] == "?BA"
        assert result["loud"] == "AB?"


def test_explicit_bindings_run_steps_in_dependency_order_not_list_order():
    chain = Chain("out_of_order", [Step("test_reverse", id="second", inputs={"text": "first.text"}),
                                   Step("test_shout", id="first")], inputs=["text"], result="second.text")
    plan = validate_chain(chain)
    assert [step.id for step in plan.order] == ["first", "second"]
    assert Appflow(chain, cache=ModelCache())(text="ab")["result"] == "!BA"


@pytest.mark.parametrize("chain, message", [
    (Chain("c", [Step("no_such_task")]), "step 'no_such_task': Unknown AppFlow task 'no_such_task'"),
    (Chain("c", [Step("test_shout")], inputs=[]), "step 'test_shout', input 'text': nothing provides 'text'"),
    (Chain("c", [Step("test_reverse", id="r", inputs={"text": "nowhere.text"})]), "refers to step 'nowhere'"),
    (Chain("c", [Step("test_shout", id="a"), Step("test_reverse", id="b", inputs={"text": "a.missing"})]),
     "step 'a' has no output 'missing'"),
    (Chain("c", [Step("test_shout", id="a"), Step("test_reverse", id="b", inputs={"text": "a.length"})]),
     "step 'b', input 'text' expects 'text' but a.length is 'scores'"),
    (Chain("c", [Step("test_reverse", id="a"), Step("test_needs_image", id="b", inputs={"image": "text"})],
           inputs=["text"]), "input 'image' expects 'image' but app input 'text' is already 'text'"),
    (Chain("c", [Step("test_reverse", id="a", inputs={"text": "b.text"}),
                 Step("test_reverse", id="b", inputs={"text": "a.text"})]), "cycle between steps ['a', 'b']"),
    (Chain("c", [Step("test_reverse", id="a"), Step("test_reverse", id="a")]), "two steps have id 'a'"),
    (Chain("c", [Step("test_reverse", options={"bogus": 1})]), "has no option(s) ['bogus']"),
    (Chain("c", [Step("test_reverse", inputs={"txt": "text"})]), "has no input(s) ['txt']"),
    (Chain("c", []), "has no steps"),
])
def test_malformed_chains_fail_validation_naming_step_and_key(chain, message):
    with pytest.raises(ChainError) as error:
        Appflow(chain, cache=ModelCache())
    assert message in str(error.value)
    assert LOADS == []


def test_validation_error_comes_before_any_model_loads_even_with_loadable_models():
    chain = Chain("c", [Step("test_shout", id="a"), Step("test_needs_image", id="b", inputs={"image": "a.text"})])
    with pytest.raises(ChainError, match="input 'image' expects 'image' but a.text is 'text'"):
        Appflow(chain, cache=ModelCache())
    assert LOADS == []


def test_bad_chain_descriptions_name_the_key(tmp_path):
    with pytest.raises(ChainError, match=r"steps\[0\] has no 'task'"):
        Appflow({"steps": [{"id": "x"}]})
    with pytest.raises(ChainError, match="unknown key\\(s\\) \\['step'\\]"):
        Appflow({"step": []})
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [unclosed")
    with pytest.raises(ChainError, match="not valid YAML"):
        Appflow(str(bad))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        Appflow(str(tmp_path / "missing.json"))


def test_registering_a_task_checks_its_declarations():
    class Broken(Task):
        name = "test_broken"
        inputs = {"x": Port("no-such-port-type")}
        outputs = {"y": "text"}
        main_output = "y"

    with pytest.raises(KeyError, match="no-such-port-type"):
        register_task(Broken)
    assert "test_broken" not in TASKS


def test_user_app_registration_validates_and_lists_it():
    name = "test_registered_app"
    if name not in appflow.APPS:
        appflow.register_app(Chain(name, [Step("test_shout")], inputs=["text"]))
    assert appflow.describe_app(name)["models"] == {"counter": {"kind": "test-counter", "default": "counter-model"}}
    assert Appflow(name, cache=ModelCache())(text="a")["result"] == "A!"
    with pytest.raises(ChainError):
        appflow.register_app(Chain("test_broken_app", [Step("test_reverse", inputs={"text": "x.y"})]))
    assert "test_broken_app" not in appflow.APPS
