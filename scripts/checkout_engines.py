#!/usr/bin/env python3
"""Register this checkout's engines where the installed metadata lacks them, as a stand-in distribution.

    python scripts/checkout_engines.py DIR    # prints DIR where it wrote one there, nothing where none is needed

``gather-scatter check``, ``run-tests`` and the scoreboard find every engine, the built-in ones
too, through the entry-point group ``gather_scatter.engines`` of the installed distributions'
metadata, which ``pip install -e`` writes from one checkout's ``pyproject.toml``. Where this
checkout's ``src`` runs (``PYTHONPATH=src``) but gather_scatter is not installed (the device
machine of ``benchmarks/device_check.sh``), or is installed from another checkout (a git worktree
of a branch that adds an engine), the engines ``pyproject.toml`` declares and the metadata lacks
are missing. This writes them as ``DIR/gather_scatter_checkout_engines-0.dist-info``, for DIR to
go on ``sys.path`` or ``PYTHONPATH``. Nothing is written where the metadata has them all
(``pip install -e .``, CI) or where gather_scatter is not imported from this checkout.
``conftest.py`` does the same for the tests. Exit status 0, or 2 for a usage error.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUP = "gather_scatter.engines"
STAND_IN = "gather_scatter_checkout_engines-0.dist-info"


def declared(root: Path = ROOT) -> dict[str, str]:
    """The engines ``pyproject.toml`` registers: entry-point name to value."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python 3.10: the table's lines, as pyproject.toml writes them
        table = text.split(f'[project.entry-points."{GROUP}"]', 1)[1].split("\n[", 1)[0]
        return dict(re.findall(r'^([\w.-]+)\s*=\s*"([^"]+)"', table, flags=re.M))
    return dict(tomllib.loads(text)["project"]["entry-points"][GROUP])


def missing(root: Path = ROOT) -> dict[str, str]:
    """The declared engines the installed metadata lacks, where gather_scatter is imported from ``root``'s ``src``."""
    spec = importlib.util.find_spec("gather_scatter")
    if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(root / "src"):
        return {}
    have = {point.name for point in importlib.metadata.entry_points(group=GROUP)}
    return {name: value for name, value in declared(root).items() if name not in have}


def write(folder: Path, engines: dict[str, str]) -> None:
    """Write the stand-in distribution registering ``engines`` into ``folder``."""
    info = folder / STAND_IN
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gather-scatter-checkout-engines\nVersion: 0\n")
    points = "".join(f"{name} = {value}\n" for name, value in sorted(engines.items()))
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{points}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    engines = missing()
    if engines:
        write(Path(args[0]), engines)
        print(args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
