"""The package's layout is its architecture (docs/architecture.md): a stack of layers without
import cycles, each package behind one face.

Read from the source with ``ast`` (every import, function-local ones included), so a lazy import
inside a function cannot hide a cycle or an upward arrow:

- the import graph between the package's modules has no cycle;
- no module imports from a higher layer than its own, in the order
  resources and errors -> rules -> kernels -> backends -> the front door -> models -> the public
  faces -> check -> conformance -> cli;
- no module imports another package's underscored name (a private module, or a private name of
  a module): what a package gives the rest is its face (``__init__`` and its public modules).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "gather_scatter"

# The layers, bottom first: a module's layer is that of the longest prefix of its dotted name.
LAYERS = [
    {"errors", "_types", "resources"},
    {"rules"},
    {"kernels"},
    {"backends"},
    {"_calls", "_nodes", "ops", "quantized"},
    {"models"},
    {"", "session", "shape_inference", "reference", "data"},  # the package's faces (`""`: its __init__)
    {"check"},
    {"conformance"},
    {"cli", "__main__"},
]
LAYER = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module a dotted name below the package is, or is defined in (``kernels.gather.x`` ->
    ``kernels.gather``)."""
    while name not in MODULES:
        if "." not in name:
            return "" if name in {"", "gather_scatter"} else None
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> list[tuple[str, str]]:
    """(target module, name taken from it) for every import of the package in ``module``;
    the name is ``""`` where a whole module is imported."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "":
        package = []
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else list(package)
                base = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == "gather_scatter" or (node.module or "").startswith("gather_scatter."):
                base = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}".lstrip(".")
                if full in MODULES:
                    found.append((full, ""))
                else:
                    found.append((_resolve(base), alias.name))
        elif isinstance(node, ast.Import):
            found.extend((_resolve(a.name.partition(".")[2]), "") for a in node.names
                         if a.name.startswith("gather_scatter."))
    return [(target, name) for target, name in found if target is not None]


def _layer(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), -1, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYER:
            return LAYER[prefix]
    raise AssertionError(f"{module} has no layer: add its package to LAYERS")


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_cycles():
    graph = {module: {target for target, _ in imports(module) if target != module} for module in MODULES}
    # Tarjan's strongly connected components: any of more than one module is a cycle.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "__init__")
def test_no_import_from_a_higher_layer(module):
    above = sorted({target for target, _ in imports(module) if _layer(target) > _layer(module)})
    assert not above, f"{module or '__init__'} (layer {_layer(module)}) imports from a higher layer: {above}"


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "__init__")
def test_no_import_of_another_packages_private_names(module):
    private = []
    for target, name in imports(module):
        owner = _package_of(target)
        if owner and not (module == owner or module.startswith(owner + ".")):
            hidden = [part for part in [*target[len(owner):].split("."), name] if part.startswith("_")
                      and not part.startswith("__")]
            if hidden:
                private.append(f"{target}{'.' + name if name else ''}")
    assert not private, f"{module} imports private names of other packages: {sorted(set(private))}"


def test_the_top_level_holds_only_faces_and_packages():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and p.suffix != ".typed")
    assert entries == ["__init__.py", "__main__.py", "_calls.py", "_nodes.py", "_types.py", "backends", "check",
                       "cli", "conformance", "data", "errors.py", "kernels", "models", "ops.py", "quantized.py",
                       "reference.py", "resources", "rules", "session.py", "shape_inference.py"]


def test_the_front_door_is_where_the_public_functions_live():
    import gather_scatter
    from gather_scatter import ops

    for name in ops.__all__:
        assert getattr(gather_scatter, name) is getattr(ops, name)
        assert getattr(ops, name).__module__ == "gather_scatter.ops"


def test_the_parser_sees_relative_and_local_imports():
    # the dask plans import kernels inside functions: the walk must see those too.
    assert any(target == "kernels.scatter_nd" for target, _ in imports("backends._dask_plans"))
    assert any(target.startswith("backends") for target, _ in imports("_calls"))
    assert any(target == "kernels._writes" for target, _ in imports("kernels.gather"))


def test_the_checks_would_catch_a_cycle_and_a_private_import(monkeypatch):
    # a lazy import of the front door inside a kernel: upward, and a cycle through ops.
    real = imports

    def planted(module):
        return [*real(module), ("ops", "gather")] if module == "kernels.gather" else real(module)

    monkeypatch.setitem(globals(), "imports", planted)
    with pytest.raises(AssertionError, match="higher layer"):
        test_no_import_from_a_higher_layer("kernels.gather")
    with pytest.raises(AssertionError, match="cycles"):
        test_no_import_cycles()
    monkeypatch.setitem(globals(), "imports", lambda m: [("kernels._writes", "")] if m == "backends.torch" else [])
    with pytest.raises(AssertionError, match="private names"):
        test_no_import_of_another_packages_private_names("backends.torch")


def test_the_public_module_paths_stay_where_users_import_them():
    # the modules that moved into models/ keep their public paths (docs/api.md names them)
    import gather_scatter as gs
    from gather_scatter import reference, session, shape_inference

    assert session.Session is gs.Session and session.run_model is gs.run_model is reference.run_model
    assert shape_inference.infer_model_shapes is gs.infer_model_shapes
    assert session.Plan is type(gs.Session(_one_node_model()).plan)
    assert set(reference.__all__) >= {"NEW_OPS", "Evaluator", "ScatterND", "run_model"}


def _one_node_model():
    import onnx.helper as oh
    from onnx import TensorProto

    node = oh.make_node("Gather", ["x", "i"], ["y"])
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                                        oh.make_tensor_value_info("i", TensorProto.INT64, [1])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
