"""Regenerate the notebook and report screenshots under docs/img/ with headless Chromium.

    .venv/bin/python scripts/screenshots.py [--out docs/img]

- ``notebook_lmm.png``: every result object of an LMM on sleepstudy, as a notebook shows
  them (``_repr_html_``), at 1280 px.
- ``notebook_glmm.png``: the same for a binomial GLMM on cbpp.
- ``report_glmm.png``: the top of the HTML report of
  ``crossed report item_level_binary "correct ~ system + (1 | dataset/item)" --family
  binomial``.

The pages are built by ``scripts/notebook_page.py``; ``tests/display/
test_notebook_browser.py`` checks the same pages' structure in CI.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notebook_page as nb  # noqa: E402

REPORT_ARGS = ["report", "item_level_binary", "correct ~ system + (1 | dataset/item)",
               "--family", "binomial"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs/img"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        pages = {"notebook_lmm.png": nb.notebook_html(f"LMM: {nb.LMM} (sleepstudy)",
                                                      nb.lmm_objects()),
                 "notebook_glmm.png": nb.notebook_html(f"GLMM: {nb.GLMM} (cbpp, binomial)",
                                                       nb.glmm_objects())}
        from crossed.cli import main as cli

        report = d / "report.html"
        if cli([*REPORT_ARGS, "-o", str(report)]) != 0:
            raise SystemExit("crossed report failed")
        pages["report_glmm.png"] = report.read_text(encoding="utf-8")
        for name, page in pages.items():
            shrink(nb.screenshot(page, out / name, d))
            print(out / name)
    return 0


def shrink(path: Path) -> None:
    """The PNG with a 256-colour palette (a third of the size; text and lines unchanged to
    the eye), so that the committed images stay small."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


if __name__ == "__main__":
    raise SystemExit(main())
