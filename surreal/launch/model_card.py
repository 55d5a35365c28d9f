"""The model card `surreal export` writes beside the file: what it is, where it came from, how
well it did, and how to run it."""

from __future__ import annotations

import json
from typing import Any

from surreal.api import config as config_io
from surreal.runtime.runfolder.rundir import RunDir, read_json

_LOAD = {
    "torchscript": (
        "import torch\n\n"
        'policy = torch.jit.load("{file}")\n'
        "{outputs} = policy({inputs})  # torch tensors, a batch first"
    ),
    "onnx": (
        "import onnxruntime\n\n"
        'policy = onnxruntime.InferenceSession("{file}")\n'
        "{outputs} = policy.run(None, {{{feeds}}})  # numpy arrays, a batch first"
    ),
}


def write_card(
    exported: Any, run: RunDir, where: str, fmt: str, which: str, state: dict[str, Any]
) -> None:
    """Write `exported.card` (markdown) for the file `exported.file` of the run at `where`."""
    config, info = run.load_config(), run.info()
    lines = [
        f"# {info.get('algo')} on {config.env.id}",
        "",
        f"`{exported.file.name}` ({fmt}): a batch of observations in, the greedy actions out "
        "(those `surreal eval` takes), observation normalization inside.",
        "",
        "| | |",
        "|---|---|",
        f"| environment | `{config.env.id}` |",
        f"| algorithm | `{info.get('algo')}` |",
        f"| run | `{where}` |",
        f"| checkpoint | {which}, step {exported.step:,} |",
        f"| eval return | {_eval_line(run, which, state)} |",
        f"| trained with | {_commands(info)} |",
        f"| exported with | `surreal export {where} --format {fmt} --checkpoint {which} "
        f"-o {exported.file}` |",
        "",
        "## Inputs and outputs",
        "",
        *_io_lines("in", exported.inputs),
        *_io_lines("out", exported.outputs),
        *_notes(exported),
        "",
        "## Use",
        "",
        "```python",
        _usage(exported, fmt),
        "```",
        "",
        "## Config",
        "",
        "```json",
        json.dumps(config_io.to_dict(config), indent=2, sort_keys=True),
        "```",
        "",
    ]
    exported.card.write_text("\n".join(lines))


def _eval_line(run: RunDir, which: str, state: dict[str, Any]) -> str:
    """The checkpoint's own evaluation (best.pt keeps it), and the run's last and best."""
    status = read_json(run.status_file, {}) or {}
    shown = []
    if "eval_return" in state:
        shown.append(f"{state['eval_return']:.1f} at this checkpoint's step")
    if status.get("charts/eval_return") is not None:
        shown.append(f"last {status['charts/eval_return']:.1f}")
    if status.get("best_eval_return") is not None:
        shown.append(f"best {status['best_eval_return']:.1f}")
    episodes = run.load_config().eval.episodes
    return ", ".join(shown) + f" (mean of {episodes} greedy episodes)" if shown else "none yet"


def _commands(info: dict[str, Any]) -> str:
    commands = info.get("commands") or []
    if not commands:
        return "not recorded (a run launched before `surreal export` existed)"
    return "; then ".join(f"`{c}`" for c in commands)


def _io_lines(kind: str, named: dict[str, tuple[str, list[Any]]]) -> list[str]:
    return [
        f"- {kind}: `{n}` {dtype} [{', '.join(map(str, shape))}]"
        for n, (dtype, shape) in named.items()
    ]


def _notes(exported: Any) -> list[str]:
    if "lstm_h" not in exported.inputs:
        return []
    return [
        "",
        "Recurrent: pass zeros as `lstm_h` and `lstm_c` at the start of each episode, and the "
        "returned `lstm_h_out` and `lstm_c_out` at the next step.",
    ]


def _usage(exported: Any, fmt: str) -> str:
    inputs, outputs = list(exported.inputs), list(exported.outputs)
    return _LOAD[fmt].format(
        file=exported.file.name,
        outputs=", ".join(outputs) if len(outputs) > 1 or fmt != "onnx" else f"({outputs[0]},)",
        inputs=", ".join(inputs),
        feeds=", ".join(f'"{n}": {n}' for n in inputs),
    )
