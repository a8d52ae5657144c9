#!/usr/bin/env python3
"""Build the documentation site, serve it, and look at its key pages in headless Chromium.

    python scripts/check_docs_browser.py [--out DIR] [--no-install]

Builds the site with ``mkdocs build --strict`` into a temporary folder, serves it on a local
port, and opens each key page twice in Debian's ``chromium`` (installed with apt-get when
missing and this process may, unless ``--no-install``; no browser is downloaded otherwise):
``--screenshot`` writes ``DIR/<page>.png`` (default DIR: ``docs-browser-check``), and
``--dump-dom`` gives the page as the browser rendered it. It fails (exit status 1) when

- a page's request for any resource (an image, a stylesheet, a script) gets an HTTP error
  from the server, or an image in the rendered page has no file behind it (a broken image);
- the browser logs a console message on a page (an uncaught exception, a failed load, any
  ``console.*`` call: Chromium's log does not give the level, and the site logs none);
- a page loads a stylesheet, script, font or image from another host (the site must read the
  same offline; the browser resolves no host but the local server, so such a load cannot hang);
- the API reference page lacks a rendered entry (an mkdocstrings heading) for a name of
  ``gather_scatter.__all__``, or an operator page lacks its generated versions table;
- the browser does not finish a page within 60 s, twice.

Exit status 2 when Chromium is missing and cannot be installed, or the site does not build.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import ClassVar

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = {  # screenshot name -> path in the site
    "home": "",
    "getting-started": "getting-started/",
    "gather": "operators/gather/",
    "scatter-nd": "operators/scatter-nd/",
    "tensor-scatter": "operators/tensor-scatter/",
    "versions": "versions/",
    "array-libraries": "array-libraries/",
    "models": "models/",
    "shape-inference": "shape-inference/",
    "checker": "checker/",
    "performance": "performance/",
    "api": "api/",
    "architecture": "architecture/",
}
# Chromium logs each console message (any level: its log does not tell them apart) as
# `...:INFO:CONSOLE:12] "message", source: URL (12)` (older builds: `CONSOLE(12)]`).
CONSOLE = re.compile(r"CONSOLE[:(]\d+\)?\]\s*\"(.*?)\", source: (\S*)")


def find_chromium(install: bool) -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if not install or not shutil.which("apt-get"):
        return None
    print("chromium is missing: apt-get install chromium", flush=True)
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if sudo is None:
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"], env=env)
    return shutil.which("chromium")


def build(site: pathlib.Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode:
        sys.exit(f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}")


class Handler(http.server.SimpleHTTPRequestHandler):
    log: ClassVar[list[tuple[str, int]]] = []

    def log_request(self, code="-", size="-"):  # record every request and its status, print nothing
        Handler.log.append((self.path, int(getattr(code, "value", code))))

    def log_message(self, *args):
        pass


def serve(site: pathlib.Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# A resource the site's HTML loads from another host: <link rel=stylesheet|preconnect|preload|icon ...>,
# <script src>, <img src>. (Links a reader follows, <a href>, may point anywhere.)
TAG = re.compile(r"<(link|script|img)\b[^>]*>")
LOADED_LINKS = {"stylesheet", "preconnect", "preload", "icon", "dns-prefetch"}


def external_resources(html: str) -> list[str]:
    """Return the URLs of other hosts that ``html``'s tags load, attributes in any order."""
    found = []
    for tag in TAG.finditer(html):
        text, kind = tag.group(0), tag.group(1)
        if kind == "link":
            rel = re.search(r'\brel="?([\w -]+)', text)
            if not rel or not LOADED_LINKS & set(rel.group(1).split()):
                continue
        url = re.search(r'\b(?:href|src)="(https?://[^"]+)"', text)
        if url:
            found.append(url.group(1))
    return found


TIMEOUT_S = 60


def chromium(browser: str, profile: str, *args: str) -> subprocess.CompletedProcess | None:
    """Run one headless Chromium command; None when it timed out twice.

    Every host but the local server resolves to nothing, so a request elsewhere fails at once
    instead of waiting on the network (the virtual-time budget otherwise waits for it).
    """
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--window-size=1280,1600",
        *args,
    ]
    for _ in range(2):
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue
    return None


def check_page(
    browser: str, profile: str, base: str, name: str, path: str, out: pathlib.Path, site: pathlib.Path
) -> list[str]:
    url = base + path
    problems = []
    Handler.log.clear()
    (out / f"{name}.png").unlink(missing_ok=True)
    shot = chromium(browser, profile, f"--screenshot={out / (name + '.png')}", url)
    dom = chromium(browser, profile, "--dump-dom", url)
    if shot is None or dom is None:
        return [f"the browser did not finish the page in {TIMEOUT_S} s, twice"]
    if not (out / f"{name}.png").is_file():
        problems.append(f"no screenshot ({shot.returncode}): {shot.stderr.strip()[-300:]}")
    for log in (shot.stderr, dom.stderr):
        for message, source in CONSOLE.findall(log):  # the site logs nothing when all is well
            problems.append(f"console: {message} ({source})")
    for request, status in list(Handler.log):
        if status >= 400:
            problems.append(f"HTTP {status} for {request}")
    html = dom.stdout
    if "<body" not in html:
        problems.append(f"no rendered DOM ({dom.returncode}): {dom.stderr.strip()[-300:]}")
        return sorted(set(problems))
    for url in external_resources(html):
        if not url.startswith(base):
            problems.append(f"loads a resource from another host: {url}")
    page_dir = (site / path).resolve()
    for src in re.findall(r'<img[^>]+src="([^"]+)"', html):
        if src.startswith(("http:", "https:", "data:")) and not src.startswith(base):
            continue
        target = (site / src[len(base) :]) if src.startswith(base) else (page_dir / src.split("#")[0].split("?")[0])
        if not target.resolve().is_file():
            problems.append(f"broken image: {src}")
    if name == "api":
        import gather_scatter

        ids = set(re.findall(r'id="(gather_scatter\.[\w.]+)"[^>]*class="doc doc-heading"', html))
        missing = [
            n for n in gather_scatter.__all__ if not any(i == f"gather_scatter.{n}" or i.endswith(f".{n}") for i in ids)
        ]
        if missing:
            problems.append(f"no rendered API entry for {missing}")
    if (path.startswith("operators/") or name == "versions") and "<th>since_version</th>" not in html:
        problems.append("no generated versions table")
    return sorted(set(problems))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs-browser-check", help="where the screenshots go")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install chromium")
    args = parser.parse_args()
    browser = find_chromium(not args.no_install)
    if browser is None:
        print("chromium not found and not installable here (apt-get install chromium)", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site, profile = pathlib.Path(tmp, "site"), os.path.join(tmp, "profile")
        build(site)
        server, base = serve(site)
        failed = 0
        try:
            for name, path in PAGES.items():
                problems = check_page(browser, profile, base, name, path, out, site)
                print(f"{'FAIL' if problems else 'ok  '} {name:16} {base}{path} -> {out / (name + '.png')}")
                for problem in problems:
                    print(f"       {problem}")
                failed += bool(problems)
        finally:
            server.shutdown()
    print(f"{len(PAGES) - failed} of {len(PAGES)} pages ok; screenshots in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
