"""`register_task(replace=True)`: re-running a notebook cell that defines a task replaces it, as `register_app`
does for apps."""

from __future__ import annotations

import pytest

from appflow import Appflow, Chain, ModelCache, Port, Step, Task, register_task
from appflow.task import TASKS


def _text_task(name: str, suffix: str) -> type[Task]:
    class Suffix(Task):
        inputs = {"text": Port("text")}
        outputs = {"text": "text"}
        main_output = "text"

        def run(self, models, options, *, text):
            return {"text": text + suffix}

    Suffix.name = name
    return Suffix


@pytest.fixture
def task_name():
    name = "test_replace_suffix"
    yield name
    TASKS._entries.pop(name, None)  # leave the registry as the other tests expect it


def test_a_second_registration_is_refused_with_advice_that_works(task_name):
    first = register_task(_text_task(task_name, "!"))
    with pytest.raises(ValueError, match="already registered; pass replace=True to override it"):
        register_task(_text_task(task_name, "?"))
    assert TASKS.get(task_name) is first
    second = register_task(_text_task(task_name, "?"), replace=True)  # the advice, followed (a TypeError before)
    assert TASKS.get(task_name) is second
    flow = Appflow(Chain("suffix", [Step(task_name)]), cache=ModelCache())
    assert flow(text="hi")["result"] == "hi?"


def test_replace_also_works_as_a_decorator_argument(task_name):
    register_task(_text_task(task_name, "!"))

    @register_task(replace=True)
    class Again(_text_task(task_name, "")):
        def run(self, models, options, *, text):
            return {"text": text.upper()}

    assert TASKS.get(task_name) is Again
    assert Appflow(Chain("upper", [Step(task_name)]), cache=ModelCache())(text="hi")["result"] == "HI"
