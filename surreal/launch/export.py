"""`surreal export`: a run's greedy policy as one TorchScript or ONNX file, and its model card.

The file maps a batch of observations to the greedy actions `surreal eval` takes (the policy's
`Policy.export_module()`, normalization inside), and needs only torch (`torch.jit.load`) or
onnxruntime to run. Before it returns, the written file is loaded back and run on inputs that
were not traced, and its actions are compared with the module's (docs/export.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from surreal.api.exporting import Exportable
from surreal.launch.model_card import write_card
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import RunDir, resolve_run
from surreal.runtime.runfolder.storage_sync import reading

FORMATS = {"torchscript": ".pt", "onnx": ".onnx"}
"""--format -> the file suffix of its default name."""
CHECKPOINTS = ("latest", "best")
"""--checkpoint: `latest.pt` (what `surreal eval` plays), or `best.pt` (the best evaluation)."""
ONNX_OPSET = 17


@dataclass
class Exported:
    """What `export_run` wrote and from what."""

    file: Path
    card: Path
    step: int
    inputs: dict[str, tuple[str, list[Any]]]
    """name -> (dtype, shape with "batch" first)."""
    outputs: dict[str, tuple[str, list[Any]]]


def default_file(run: RunDir, fmt: str) -> Path:
    """`EXPERIMENT-TRIAL.pt` (or `.onnx`) in the current folder."""
    return Path(f"{run.path.parent.name}-{run.path.name}{FORMATS[fmt]}")


def export_run(
    path: str | Path, fmt: str = "torchscript", out: str | Path | None = None, which: str = "latest"
) -> Exported:
    """Export the run at `path` (a run folder or its s3:// URL) to `out` (default
    `default_file`) and write its model card beside it (`out` with the suffix `.md`).

    Raises:
        ValueError: an unknown format or checkpoint, or a policy that cannot be exported.
        FileNotFoundError: no run or no such checkpoint there.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt}: not one of {', '.join(FORMATS)}")
    if which not in CHECKPOINTS:
        raise ValueError(f"--checkpoint {which}: not one of {', '.join(CHECKPOINTS)}")
    with reading(str(path)) as local:
        run = resolve_run(local)
        state = _checkpoint(run, which)
        module = _module(run, state)
        file = Path(out) if out else default_file(run, fmt)
        if not file.absolute().parent.is_dir():
            raise ValueError(f"-o {file}: {file.absolute().parent} is not a folder")
        traced = trace(module)
        (write_onnx if fmt == "onnx" else write_torchscript)(traced, module, file)
        check_file(file, fmt, module)
        exported = Exported(
            file,
            file.with_suffix(".md"),
            int(state["counters"]["global_step"]),
            *_signature(module),
        )
        write_card(exported, run, str(path), fmt, which, state)
    return exported


def _checkpoint(run: RunDir, which: str) -> dict[str, Any]:
    if which == "latest":
        return checkpoint.load(run.checkpoint)
    best = run.checkpoint.with_name(checkpoint.BEST)
    if not best.is_file():
        raise FileNotFoundError(
            f"no {best}: the evaluator writes it at the run's best evaluation (runs before "
            "`surreal export` existed have none); use --checkpoint latest"
        )
    return checkpoint.load(best)


def _module(run: RunDir, state: dict[str, Any]) -> Exportable:
    """The run's policy with the checkpoint's parameters, as its exportable module (CPU)."""
    torch.set_num_threads(1)
    policy = run.algo_class().make_policy(run.load_config().algo, run.env_info())
    policy.load_params(state["params"])
    module = policy.export_module()
    if module is None:
        raise ValueError(
            f"{type(policy).__name__} cannot be exported: its export_module() returns None "
            "(docs/export.md says what to return)"
        )
    return module.cpu().eval()


def trace(module: Exportable) -> torch.jit.ScriptModule:
    """The module traced on a batch of 3 (a different batch size is checked afterwards), in
    eval mode and without gradients (its outputs are plain tensors)."""
    module.eval().requires_grad_(False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings on the distributions' Python checks
        return torch.jit.trace(module, module.example_inputs(3), check_trace=False)


def write_torchscript(traced: torch.jit.ScriptModule, module: Exportable, file: Path) -> None:
    """`torch.jit.save`, with the input and output names in the file's `surreal.json`."""
    names = {"inputs": list(module.input_names), "outputs": list(module.output_names)}
    torch.jit.save(traced, str(file), _extra_files={"surreal.json": json.dumps(names)})


def write_onnx(traced: torch.jit.ScriptModule, module: Exportable, file: Path) -> None:
    """The traced module through torch's TorchScript-based ONNX exporter, the batch dynamic."""
    names = list(module.input_names) + list(module.output_names)
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            traced,
            module.example_inputs(3),
            str(file),
            input_names=list(module.input_names),
            output_names=list(module.output_names),
            dynamic_axes={name: {0: "batch"} for name in names},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )


def run_file(file: Path, fmt: str, inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """The exported file's outputs on `inputs`, loaded as a user would load it."""
    if fmt == "torchscript":
        with torch.no_grad():
            out = torch.jit.load(str(file))(*(torch.as_tensor(x) for x in inputs))
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
    import onnxruntime

    session = onnxruntime.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs, strict=True)))


def check_file(file: Path, fmt: str, module: Exportable, batch: int = 5) -> None:
    """Raise ValueError unless the written file gives the module's outputs on a new batch."""
    inputs = tuple(x.numpy() for x in module.example_inputs(batch))
    with torch.no_grad():
        want = module(*(torch.as_tensor(x) for x in inputs))
    want = [t.numpy() for t in (want if isinstance(want, tuple) else (want,))]
    got = run_file(file, fmt, inputs)
    for name, a, b in zip(module.output_names, want, got, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype or not np.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise ValueError(
                f"the exported {file} gives another {name} than the policy "
                f"({b.dtype}{list(b.shape)} vs {a.dtype}{list(a.shape)}); please report it"
            )


def _signature(module: Exportable) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputs, outputs): name -> (dtype, ["batch", *shape]) from one example batch."""
    example = module.example_inputs(2)
    with torch.no_grad():
        out = module(*example)
    out = out if isinstance(out, tuple) else (out,)

    def shapes(names, tensors):
        return {
            n: (str(t.dtype).replace("torch.", ""), ["batch", *t.shape[1:]])
            for n, t in zip(names, tensors, strict=True)
        }

    return shapes(module.input_names, example), shapes(module.output_names, out)
