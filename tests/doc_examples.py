"""Run a documentation example and check what its comments claim (used by the README and docs tests).

An example is a Python code block of a Markdown page. ``run_with_claims`` runs it one statement
at a time and checks two kinds of claim its comments make:

- a value: an expression statement whose trailing comment is a Python literal (``# [5, 0]``),
  optionally before a colon or a parenthesis (``# [5, 0]: elements``, ``# [2, 0] (torch.gather)``)
  or after a ``Name-NN:`` prefix (``# GatherND-11: [[3, 4, 5]]``): the value equals it (a tuple
  is compared with the value as a tuple, such as a shape);
- an error: a statement followed by comment lines ``# SomeError: message`` (continued over
  further comment lines): it raises that class of ``gather_scatter`` with exactly that message.
"""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

import numpy as np
import pytest

import gather_scatter

ERROR_CLAIM = re.compile(r"(\w+(?:Error|Warning)): (.*)")


def python_blocks(page: pathlib.Path) -> list[str]:
    """Every ```python code block of ``page``, in order."""
    return [b.split("```", 1)[0] for b in page.read_text(encoding="utf-8").split("```python\n")[1:]]


def python_block(page: pathlib.Path, marker: str) -> str:
    """The first ```python code block of ``page`` that contains ``marker``."""
    found = [b for b in python_blocks(page) if marker in b]
    assert found, f"{page.name} has no Python block containing {marker!r}"
    return found[0]


def _literal(comment: str):
    """The Python literal a value comment claims, or None when it claims none."""
    text = comment.strip()
    candidates = [text, re.split(r":\s|\s\(", text, maxsplit=1)[0]]
    prefixed = re.match(r"[\w.]+-\d+: (.*)", text)
    if prefixed:
        candidates.append(prefixed.group(1))
    for candidate in candidates:
        try:
            value = ast.literal_eval(candidate.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (list, tuple, int, float, bool)):
            return value
    return None


def run_with_claims(code: str, scope: dict | None = None) -> int:
    """Run ``code`` statement by statement, checking its claims; return how many were checked."""
    scope = {} if scope is None else scope
    lines = code.splitlines()
    trailing = {}  # line number -> the comment after code on that line
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1][: token.start[1]].strip():
            trailing[token.start[0]] = token.string[1:]
    checked = 0
    for statement in ast.parse(code).body:
        end = statement.end_lineno or statement.lineno
        following = []
        while end < len(lines) and lines[end].lstrip().startswith("#"):
            following.append(lines[end].lstrip()[1:].strip())
            end += 1
        module = ast.Module(body=[statement], type_ignores=[])
        error = ERROR_CLAIM.fullmatch(" ".join(following)) if following else None
        if error:
            with pytest.raises(getattr(gather_scatter, error.group(1))) as raised:
                exec(compile(module, "<example>", "exec"), scope)
            assert str(raised.value) == error.group(2)
            checked += 1
            continue
        claim = _literal(trailing.get(statement.end_lineno or statement.lineno, ""))
        if isinstance(statement, ast.Expr) and claim is not None:
            value = eval(compile(ast.Expression(body=statement.value), "<example>", "eval"), scope)
            if isinstance(claim, tuple):
                assert tuple(value) == claim, (ast.unparse(statement), value, claim)
            else:
                assert np.array_equal(np.asarray(value), np.asarray(claim)), (ast.unparse(statement), value, claim)
            checked += 1
            continue
        exec(compile(module, "<example>", "exec"), scope)
    return checked
