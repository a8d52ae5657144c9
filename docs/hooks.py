"""MkDocs hooks: the parts of the site that must not drift are generated at build time.

One directive, an HTML comment alone on a line of a page's Markdown:

``<!-- versions-table -->`` / ``<!-- versions-table: Gather GatherND -->``
    The supported-versions table, rendered from ``gather_scatter.rules.versions.REGISTRY`` (every
    version, or those of the named operators), and for each operator with several versions
    what changed from one to the next, computed from the same values.

The pages hold all their other text themselves; the README is a front page that links to them.
"""

from __future__ import annotations

import itertools
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

try:  # an installed (editable) package, or else the source tree
    from gather_scatter.rules import versions as _versions
except ImportError:  # pragma: no cover - only without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))
    from gather_scatter.rules import versions as _versions

DIRECTIVE = re.compile(r"^<!--\s*versions-table\s*:?\s*(.*?)\s*-->\s*$", re.MULTILINE)


# --- the versions table ------------------------------------------------------------------------


def _types_cell(types: frozenset[str]) -> str:
    if types == _versions.ALL_TYPES:
        return "all 16"
    if types == _versions.TYPES_BEFORE_BFLOAT16:
        return "all but bfloat16"
    if types == _versions.TENSOR_SCATTER_TYPES:
        return "all 24"
    return ", ".join(sorted(types))


def _input_types_cell(v: _versions.OpVersion) -> str:
    """Return the inputs whose types differ from data's (GatherBlockQuantized's scales), each after a semicolon."""
    return "".join(f"; {name}: {_types_cell(types)}" for name, types in v.input_types.items())


def _attributes_cell(v: _versions.OpVersion) -> str:
    if not v.attributes:
        return "—"
    choices = {"reduction": v.reductions, "mode": v.modes}
    return ", ".join(
        f"{name} ({default!r}: {', '.join(choices[name])})" if name in choices else f"{name} ({default})"
        for name, default in v.attributes.items()
    )


def _domain(v: _versions.OpVersion) -> str:
    return v.domain or "ai.onnx"


def _selected(ops: list[str]) -> list[_versions.OpVersion]:
    versions = list(_versions.REGISTRY.values())
    return [v for v in versions if not ops or v.op_type in ops]


def _opsets(v: _versions.OpVersion) -> str:
    later = [
        w.since_version
        for w in _versions.REGISTRY.values()
        if (w.domain, w.op_type) == (v.domain, v.op_type) and w.since_version > v.since_version
    ]
    last = (min(later) - 1) if later else (v.removed_in - 1 if v.removed_in else _versions.LATEST_OPSET[v.domain])
    return f"{v.since_version}–{last}" if last != v.since_version else str(last)  # noqa: RUF001 (an en dash: a range)


def versions_table(ops: list[str]) -> str:
    """Render the supported-versions table of ``<!-- versions-table -->`` as Markdown.

    Parameters
    ----------
    ops : list of str
        The operator types to list (``["Gather", "GatherND"]``); empty for every version in
        ``gather_scatter.rules.versions.REGISTRY``.

    Returns
    -------
    str
        A Markdown table, one row per operator version, followed by what `changes` says.
    """
    rows = [
        "| op | domain | since_version | model opsets | attributes (default) | data types | index types |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in _selected(ops):
        rows.append(
            f"| {v.op_type} | {_domain(v)} | {v.since_version} | {_opsets(v)} | {_attributes_cell(v)} "
            f"| {_types_cell(v.data_types)}{_input_types_cell(v)} | {', '.join(sorted(v.index_types))} |"
        )
    return "\n".join(rows) + "\n\n" + changes(ops)


def _diff(old: _versions.OpVersion, new: _versions.OpVersion) -> list[str]:
    said = []
    for name in new.attributes.keys() - old.attributes.keys():
        said.append(f"adds the attribute `{name}` (default `{new.attributes[name]!r}`)")
    for name in old.attributes.keys() - new.attributes.keys():
        said.append(f"drops the attribute `{name}`")
    added = [r for r in new.reductions if r not in old.reductions]
    if added and old.reductions and "reduction" in old.attributes:
        said.append("adds the reductions " + ", ".join(f"`{r}`" for r in added))
    elif "reduction" in new.attributes and "reduction" not in old.attributes:
        said.append("accepts the reductions " + ", ".join(f"`{r}`" for r in new.reductions))
    types = sorted(new.data_types - old.data_types)
    if types:
        said.append(f"adds the data type{'s' if len(types) > 1 else ''} " + ", ".join(types))
    index = sorted(new.index_types - old.index_types)
    if index:
        said.append(f"adds the index type{'s' if len(index) > 1 else ''} " + ", ".join(index))
    return said or ["the same attributes and types"]


def changes(ops: list[str]) -> str:
    """Say, as a Markdown list, what changed from each operator version to the next.

    Parameters
    ----------
    ops : list of str
        The operator types to compare; empty for every operator in the registry.

    Returns
    -------
    str
        One bullet per pair of consecutive versions (and one per removed operator), under a
        lead-in sentence; the empty string where no selected operator has several versions.
    """
    by_op: dict[tuple[str, str], list[_versions.OpVersion]] = {}
    for v in _selected(ops):
        by_op.setdefault((v.domain, v.op_type), []).append(v)
    lines = []
    for versions in by_op.values():
        versions.sort(key=lambda v: v.since_version)
        for old, new in itertools.pairwise(versions):
            lines.append(f"- **{new.name}** (from {old.name}): " + "; ".join(_diff(old, new)) + ".")
        last = versions[-1]
        if last.removed_in:
            lines.append(
                f"- **{last.op_type}** is removed at opset {last.removed_in}"
                + (f"; models use {last.replaced_by} instead." if last.replaced_by else ".")
            )
    if not lines:
        return ""
    return "What changed from version to version (computed from the same registry):\n\n" + "\n".join(lines) + "\n"


# --- the hook ----------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Expand the page's directives (MkDocs ``on_page_markdown`` event).

    Parameters
    ----------
    markdown : str
        The page's Markdown source.
    page : mkdocs.structure.pages.Page
        The page being built (unused).
    config : mkdocs.config.defaults.MkDocsConfig
        The site's configuration (unused).
    files : mkdocs.structure.files.Files
        The site's files (unused).

    Returns
    -------
    str
        ``markdown`` with each directive line replaced by what it stands for.
    """
    return DIRECTIVE.sub(lambda match: versions_table(match.group(1).split()), markdown)


def on_config(config):
    """Watch the version registry too (MkDocs ``on_config`` event).

    ``mkdocs serve`` then rebuilds when it changes, not only when ``docs/`` does.

    Parameters
    ----------
    config : mkdocs.config.defaults.MkDocsConfig
        The site's configuration; its ``watch`` list is extended in place.

    Returns
    -------
    mkdocs.config.defaults.MkDocsConfig
        ``config``.
    """
    watch = config.setdefault("watch", [])
    if _versions.__file__ not in watch:
        watch.append(_versions.__file__)
    return config
