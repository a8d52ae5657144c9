"""The package is a stack without import cycles: the NumPy kernels import nothing above the
rules (``_versions``, ``_shapes``, ``_quantized_rules``, ``_validate``) and the settings beside them, the backends import
kernels but never the front door (``ops``, with its runners ``_runners``), and only ``ops``,
``_runners`` and ``_dispatch`` sit on top.

Read from the source with ``ast`` (every import, function-local ones included), so a lazy import
inside a function cannot hide a cycle.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "gather_scatter"
# What a kernel may import from the package: the rules and the per-process settings below them.
KERNEL_MAY_IMPORT = {"_versions", "_shapes", "_quantized_rules", "_validate", "_buffers", "_parallel", "_memory",
                     "_settings", "errors", "kernels"}


def _package_imports(path: pathlib.Path) -> set[str]:
    """The package modules ``path`` imports, as dotted names below ``gather_scatter``
    (``kernels._writes``, ``backends``, ``ops``), resolved from relative imports."""
    here = path.relative_to(PACKAGE).with_suffix("").parts
    package = list(here[:-1])  # a module's package; for __init__ the package itself
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            if node.module:
                found.add(".".join([*base, node.module]))
            else:  # from . import a, b
                found.update(".".join([*base, alias.name]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gather_scatter"):
            found.add(node.module.partition(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.partition(".")[2] for a in node.names if a.name.startswith("gather_scatter."))
    return found


def _modules(folder: str) -> list[pathlib.Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


@pytest.mark.parametrize("path", _modules("kernels"), ids=lambda p: p.name)
def test_kernels_import_nothing_above_the_rules(path):
    imports = _package_imports(path)
    above = {name for name in imports if name.split(".")[0] not in KERNEL_MAY_IMPORT}
    assert not above, f"kernels/{path.name} imports {sorted(above)}"
    forbidden = {"backends", "ops", "_runners", "_dispatch", "reference", "session", "cli"}
    assert not {name.split(".")[0] for name in imports} & forbidden


@pytest.mark.parametrize("path", _modules("backends"), ids=lambda p: p.name)
def test_backends_never_import_the_front_door(path):
    tops = {name.split(".")[0] for name in _package_imports(path)}
    assert not tops & {"ops", "_runners", "_dispatch", "reference", "session", "cli"}, f"backends/{path.name} imports {tops}"


def test_the_front_door_is_where_the_public_functions_live():
    import gather_scatter
    from gather_scatter import ops

    for name in ops.__all__:
        assert getattr(gather_scatter, name) is getattr(ops, name)
        assert getattr(ops, name).__module__ == "gather_scatter.ops"


def test_the_parser_sees_relative_and_local_imports():
    # the dask plans import kernels inside functions: the walk must see those too.
    assert "kernels.scatter_nd" in _package_imports(PACKAGE / "backends" / "_dask_plans.py")
    assert "backends" in _package_imports(PACKAGE / "_runners.py")
    assert "kernels._writes" in _package_imports(PACKAGE / "kernels" / "gather.py")
