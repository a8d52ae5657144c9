"""Write the hosted Session's routing table into docs/models.md (between its ``routes`` markers).

    python scripts/routes_doc.py          # rewrite the table for the installed onnxruntime
    python scripts/routes_doc.py --check  # exit 1 if the page is not current

The table is ``gather_scatter.models.hosted._routes.markdown``: the rules of ``_ort_routes.RULES`` and the
count of combinations they route. tests/test_hosted_suite.py checks the page against it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "models.md"
START, END = "<!-- routes:start -->", "<!-- routes:end -->"


def current(page: str, table: str) -> str:
    """``page`` with the text between the markers replaced by ``table``."""
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where the page is not current")
    args = parser.parse_args()
    import onnxruntime

    from gather_scatter.models.hosted._routes import markdown

    page = PAGE.read_text(encoding="utf-8")
    new = current(page, markdown(onnxruntime.__version__))
    if args.check:
        return 0 if new == page else 1
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
