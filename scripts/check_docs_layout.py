"""Checks the built documentation site (bash scripts/docs.sh) in headless
Chromium: on every page, at a laptop's width (1280 px) and a narrow one
(800 px), no code block and no table is wider than the box that shows it
(nothing is clipped or hidden behind a scroll bar).

    python scripts/check_docs_layout.py [build/site] [--chromium PATH]

Each page is loaded in an iframe of a small wrapper page, whose script
measures the page once it has laid out and writes what it found into the
wrapper's DOM, which `chromium --dump-dom` prints. Exits 1 naming every
overflowing block (page, width, its first line), 0 when there is none.
"""

from __future__ import annotations

import argparse
import html
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

WIDTHS = (1280, 800)
_WRAPPER = """<!doctype html><html><body>
<iframe id="page" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<pre id="result">pending</pre>
<script>
document.getElementById("page").addEventListener("load", () => {{
  const doc = document.getElementById("page").contentDocument;
  const found = [];
  for (const block of doc.querySelectorAll(".md-typeset pre > code, .md-typeset table")) {{
    const box = block.closest(".md-typeset__scrollwrap") || block;
    if (block.scrollWidth > box.clientWidth + 1) {{
      const first = (block.innerText || "").split("\\n")[0].slice(0, 80);
      found.push(`${{first}} (${{block.scrollWidth}} px in ${{box.clientWidth}})`);
    }}
  }}
  document.getElementById("result").textContent = JSON.stringify(found);
}});
</script></body></html>"""


def overflowing(chromium: str, page: pathlib.Path, width: int) -> list[str]:
    """The first lines of the blocks of `page` wider than their box."""
    with tempfile.TemporaryDirectory() as folder:
        wrapper = pathlib.Path(folder, "wrapper.html")
        wrapper.write_text(_WRAPPER.format(src=page.resolve().as_uri(), width=width))
        dom = subprocess.run(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--allow-file-access-from-files",
             f"--window-size={width + 50},1000", "--virtual-time-budget=10000",
             "--dump-dom", wrapper.as_uri()],
            capture_output=True, text=True, timeout=120, check=True).stdout
    match = re.search(r'<pre id="result">(.*?)</pre>', dom, re.DOTALL)
    if match is None or match[1] == "pending":
        raise RuntimeError(f"{page}: the page did not load in Chromium")
    return json.loads(html.unescape(match[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", default="build/site", type=pathlib.Path)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args()
    pages = sorted(args.site.glob("**/index.html"))
    if not pages:
        print(f"{args.site}: no pages: build the site first (bash scripts/docs.sh)",
              file=sys.stderr)
        return 2
    problems = 0
    for page in pages:
        for width in WIDTHS:
            for line in overflowing(args.chromium, page, width):
                problems += 1
                print(f"{page.relative_to(args.site)} at {width} px: {line}")
    print(f"{len(pages)} pages at {', '.join(map(str, WIDTHS))} px: "
          f"{problems or 'no'} overflowing block(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
