"""A real Inspect AI eval, offline: `mockllm/model` answering through a tool and an `as_tool` sub-agent.

The main model calls the `helper` agent (a `react` agent on its own mockllm model) on its first
turn, then answers; the helper calls `add`, then `submit`. Both models are scripted by a function
of the conversation (mockllm's callable `custom_outputs`), each reply with explicit usage so no
tokenizer is needed. Two samples × two epochs; the includes() scorer passes one sample, fails the other.
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.agent import as_tool, react
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool


@tool
def add():  # noqa: ANN201 - inspect's tool factory
    async def execute(x: int, y: int) -> int:
        """Add two numbers.

        Args:
            x: First number.
            y: Second number.
        """
        return x + y

    return execute


def _usage(output: ModelOutput, prompt: int, completion: int) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)
    return output


def _main(input, tools, tool_choice, config):  # noqa: ANN001, ANN202 - mockllm's callable signature
    answered = any(isinstance(m, ChatMessageTool) for m in input)
    if not answered:
        return _usage(ModelOutput.for_tool_call("mockllm/model", "helper", {"input": "add 1 and 2"}), 10 * len(input), 5)
    return _usage(ModelOutput.from_content("mockllm/model", "The answer is 3"), 10 * len(input), 5)


def _helper(input, tools, tool_choice, config):  # noqa: ANN001, ANN202
    results = sum(isinstance(m, ChatMessageTool) for m in input)
    if results == 0:
        return _usage(ModelOutput.for_tool_call("mockllm/model", "add", {"x": 1, "y": 2}), 7 * len(input), 3)
    return _usage(ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "3"}), 7 * len(input), 3)


def run_eval(log_dir: Path) -> tuple[Path, Path]:
    """Run the eval; return its `.eval` log and the same log written as `.json` by Inspect."""
    helper = react(name="helper", description="Adds numbers", tools=[add()],
                   model=get_model("mockllm/model", custom_outputs=_helper))
    task = Task(dataset=[Sample(input="What is 1 + 2?", target="3", id="s1"),
                         Sample(input="What is 1 + 2, again?", target="4", id="s2")],
                solver=[use_tools(as_tool(helper)), generate()], scorer=includes(), name="addition")
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=_main), log_dir=str(log_dir), display="none",
                 epochs=2, log_format="eval")
    assert log.status == "success", log.error
    eval_path = Path(log.location)
    json_path = log_dir / "addition.json"
    write_eval_log(read_eval_log(str(eval_path)), str(json_path), format="json")
    return eval_path, json_path


def read_log(path: Path) -> EvalLog:
    """The log as Inspect reads it (the raw data the checks recompute from)."""
    return read_eval_log(str(path))
