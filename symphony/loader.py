"""Load an experiment from a file: `FILE.py` with `make_experiment()` (or `FILE.py:func`), or YAML."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from symphony.errors import SpecError
from symphony.spec import Experiment


def load_experiment(target: str) -> Experiment:
    """Build the experiment that `target` describes.

    Args:
        target: `path/to/file.py` (calls its `make_experiment()`), `path/to/file.py:func`
            (calls `func()`), or `path/to/spec.yaml` / `.yml` (as written by `Experiment.to_yaml`).

    Raises:
        SpecError: missing file, no such function, or it does not return an Experiment.
    """
    path_text, _, func_name = target.partition(":") if target.count(":") == 1 else (target, "", "")
    path = Path(path_text)
    if not path.is_file():
        raise SpecError(f"experiment file {path_text!r} does not exist; pass a .py or .yaml file")
    if path.suffix in (".yaml", ".yml"):
        return Experiment.from_yaml(path.read_text())
    if path.suffix != ".py":
        raise SpecError(f"{path_text!r}: pass a Python file with make_experiment() or a YAML spec")
    module = _import(path)
    func_name = func_name or "make_experiment"
    factory = getattr(module, func_name, None)
    if not callable(factory):
        raise SpecError(
            f"{path_text} has no {func_name}() function; define "
            f"`def {func_name}() -> symphony.Experiment:` that builds and returns the experiment"
        )
    experiment = factory()
    if not isinstance(experiment, Experiment):
        raise SpecError(
            f"{path_text}:{func_name}() returned {type(experiment).__name__}, not an Experiment"
        )
    return experiment


def _import(path: Path):
    name = f"symphony_experiment_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise SpecError(f"importing {path} failed: {type(err).__name__}: {err}") from err
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module
