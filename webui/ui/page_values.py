"""Values a page starts from (Settings defaults and the like), computed when the page is served and written into it.

Gradio sets a component whose `value=` is a function through a page-load event, which lands after the form is already
editable: a value typed in the meantime was replaced (a browser hunt typed Steps 3 and got the Settings default of 20).
A1111 builds its page with its defaults in it, so nothing replaces a field the user edited. Here those functions are
taken over before Gradio attaches their load events (`take_page_values`, while the Blocks is still being built) and
are evaluated each time Gradio serves the page or its config (`ServePageValues`): a page opened after a Settings change
starts from the new values, and no later update can overwrite what the user typed.
"""

from __future__ import annotations

from collections.abc import Callable

# Where Gradio serves the config a page starts from: "/" embeds it in the HTML, "/config" is what its client reloads.
CONFIG_PATHS = ("/", "/config", "/config/")


class PageValues:
    """The components whose value is a function evaluated per page, and how to write their values into a config."""

    def __init__(self, functions: dict[int, tuple[object, Callable[[], object]]],
                 props: dict[int, Callable[[], dict]] | None = None) -> None:
        self._functions = functions  # component id -> (component, function of nothing giving its value)
        self._props = props or {}  # component id -> function giving several props (`serve_props`)

    def write_into(self, config: dict) -> None:
        """Set each taken component's value in Gradio's `config` (as `Blocks.config`) to its function's value now.

        The value goes through the component's `postprocess`, as Gradio does with the value it puts in the config
        when the component is built."""
        for entry in config["components"]:
            taken = self._functions.get(entry["id"])
            if taken is not None:
                component, function = taken
                entry["props"]["value"] = component.postprocess(function())
            props = self._props.get(entry["id"])
            if props is not None:
                entry["props"].update(props())


def serve_props(component, function: Callable[[], dict]) -> None:
    """Have `function`'s props (e.g. a dropdown's `choices` and `value`, in their config form) written into each page
    served, for a component whose choices change while the server runs; `take_page_values` collects it."""
    component.mixkit_page_props = function


def take_page_values(blocks) -> PageValues:
    """Take over every component in `blocks` (still inside its `with`) whose value is a function of nothing.

    Gradio attaches a page-load event for such a component when the Blocks is closed; clearing the pending event here
    leaves it none. A function of other components or of a timer (Gradio's `inputs=` / `every=`) is left to Gradio:
    it updates a value on purpose, after the page is built."""
    functions, props = {}, {}
    for component in blocks.blocks.values():
        if getattr(component, "mixkit_page_props", None) is not None:
            props[component._id] = component.mixkit_page_props
        pending = getattr(component, "load_event_to_attach", None)
        if pending is None:
            continue
        function, triggers, inputs = pending
        if triggers or inputs:
            continue
        functions[component._id] = (component, function)
        component.load_event_to_attach = None
    return PageValues(functions, props)


class ServePageValues:
    """ASGI middleware: before Gradio serves its page or its config, the page values of this moment are written in.

    The functions read Settings under a lock, so they run in the thread pool, not on the event loop."""

    def __init__(self, app, blocks, values: PageValues) -> None:
        self.app, self.blocks, self.values = app, blocks, values

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in CONFIG_PATHS:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(self.values.write_into, self.blocks.config)
        await self.app(scope, receive, send)
