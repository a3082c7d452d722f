"""Turn an editing instruction ("make the dog a cat") into (what to find, what to paint) with an LLM.

The LLM must reply with one JSON object `{"what": ..., "into": ...}`; anything else is refused
with an error quoting the reply, before any image step runs, so the input image is never touched
by a misunderstood instruction. The `llm` role takes a transformers causal LM, or any callable
`reply(prompt) -> str` (a remote chat API, or a scripted reply in tests).
"""

from __future__ import annotations

import json
from typing import Any

from appflow.option_specs import OptionSpec
from appflow.task import Port, Task, check_int_option, register_task

LLM_NEW_TOKENS = OptionSpec("int", 1, 1024, 1, label="LLM reply length (tokens)")

EDIT_PROMPT = """You turn an image-editing instruction into the object to change and what it should become.
Reply with one JSON object and nothing else, like {"what": "<object in the image>", "into": "<what to paint instead>"}.
Instruction: make the dog a cat
Reply: {"what": "dog", "into": "a cat"}
Instruction: replace the red car with a blue bicycle
Reply: {"what": "red car", "into": "a blue bicycle"}
Instruction: <instruction>
Reply:"""


class EditReplyError(ValueError):
    """The LLM's reply is not the JSON object the dialog editing chain needs."""


def parse_edit_reply(reply: str) -> tuple[str, str]:
    """(what, into) from the first JSON object in `reply`; EditReplyError when there is none or it is incomplete."""
    if not isinstance(reply, str):
        raise EditReplyError(f"The LLM reply must be a string, got {type(reply).__name__}.")
    start = reply.find("{")
    problem = "it contains no JSON object"
    if start >= 0:
        try:
            data, _ = json.JSONDecoder().raw_decode(reply[start:])
        except ValueError as error:
            problem = f"its JSON is malformed ({error.msg})"
        else:
            values = [data.get(key) if isinstance(data, dict) else None for key in ("what", "into")]
            if all(isinstance(v, str) and v.strip() for v in values):
                return values[0].strip(), values[1].strip()
            problem = 'its JSON object lacks non-empty string values for "what" and "into"'
    raise EditReplyError(f"Cannot use the LLM reply {reply[:200]!r}: {problem}. Expected "
                         '{"what": "<object>", "into": "<replacement>"}; the image was not modified. '
                         "Rephrase the instruction or use a stronger instruction-following model.")


def generate_reply(llm: Any, prompt: str, max_new_tokens: int) -> str:
    """The model's greedy continuation of `prompt` (chat template applied when the tokenizer has one)."""
    import torch

    if callable(llm):
        return llm(prompt)
    tokenizer, model = llm.processor, llm.model
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)
    else:
        ids = tokenizer(prompt, return_tensors="pt")
    ids = {k: v.to(model.device) for k, v in ids.items()}
    with torch.no_grad():
        output = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False,
                                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
    return tokenizer.decode(output[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


@register_task
class EditInstructionTask(Task):
    """An instruction -> `prompt` (what to detect) and `inpaint_prompt` (what to paint there)."""

    name = "edit_instruction_parsing"
    description = "LLM: instruction -> (what, into what)"
    inputs = {"instruction": Port("text")}
    outputs = {"prompt": "text", "inpaint_prompt": "text", "reply": "text"}
    main_output = "inpaint_prompt"
    models = {"llm": "causal-lm"}
    default_models = {"llm": "Qwen/Qwen2.5-0.5B-Instruct"}
    options = {"max_new_tokens": 64}
    option_specs = {"max_new_tokens": LLM_NEW_TOKENS}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_int_option("max_new_tokens", options["max_new_tokens"], LLM_NEW_TOKENS.low, LLM_NEW_TOKENS.high)

    def run(self, models, options, *, instruction: str) -> dict[str, Any]:
        if not instruction.strip():
            raise ValueError("Task 'edit_instruction_parsing': instruction is empty; say what to change, "
                             "e.g. 'make the dog a cat'.")
        reply = generate_reply(models.get("llm"), EDIT_PROMPT.replace("<instruction>", instruction.strip()),
                               options["max_new_tokens"])
        what, into = parse_edit_reply(reply)
        return {"prompt": what, "inpaint_prompt": into, "reply": reply}
