"""Make docs/comment.png, the README's picture of the comment, from the real rendered comment.

The comment is what ``relay-review drill --format markdown`` prints (the review drill: a bundled
sample diff reviewed over a local fault fleet, so no key and no network). It is rendered as
GitHub-flavoured Markdown by cmarkgfm (GitHub's own fork of cmark), with ``<details>`` and
``<sub>`` kept as GitHub keeps them, styled like a GitHub comment, and captured with headless
Chromium. Nothing is drawn by hand: regenerate with

    pip install cmarkgfm            # a tool dependency only, not the project's
    apt-get install chromium fonts-noto-color-emoji   # Debian's packages
    python tools/render_comment_png.py [--out docs/comment.png] [--html docs/comment.html]
    python tools/render_comment_png.py --unavailable --height 650   # docs/comment-unavailable.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 1000

#: A small subset of GitHub's comment styles (Primer), enough for headings, tables and code.
CSS = """
body { margin: 0; background: #ffffff; }
.comment { box-sizing: border-box; width: %(width)dpx; padding: 16px 24px;
  border: 1px solid #d0d7de; border-radius: 6px;
  font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
  color: #1f2328; }
.head { background: #f6f8fa; margin: -16px -24px 16px; padding: 8px 24px;
  border-bottom: 1px solid #d0d7de; border-radius: 6px 6px 0 0; color: #59636e; }
h2 { font-size: 1.5em; border-bottom: 1px solid #d1d9e0b3; padding-bottom: .3em;
  margin: 8px 0 16px; }
h3 { font-size: 1.25em; margin: 24px 0 16px; }
table { border-collapse: collapse; display: block; overflow: auto; margin: 0 0 16px;
  font-size: 12px; }
th, td { border: 1px solid #d1d9e0; padding: 4px 8px; }
tr:nth-child(2n) { background: #f6f8fa; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  background: #818b981f; border-radius: 6px; padding: .2em .4em; }
details { margin: 0 0 16px; }
summary { cursor: pointer; }
sub { color: #59636e; }
"""


#: The review drill with bounds too short for any route to answer: the unavailable comment.
UNAVAILABLE_FLAGS = ("--deadline", "3", "--first-byte-timeout", "0.3", "--probe-timeout", "0.3")


def comment_markdown(*flags: str) -> str:
    """The review drill's comment, as ``relay-review drill --format markdown`` prints it."""
    done = subprocess.run(
        [sys.executable, "-m", "relay_review", "drill", "--format", "markdown", *flags],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode not in (0, 1) or not done.stdout:  # 1: no verdict, the comment says so
        raise SystemExit(f"the drill failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def comment_html(markdown: str) -> str:
    """The comment as a GitHub comment page: GFM rendered by cmarkgfm, GitHub-like styles."""
    import cmarkgfm
    from cmarkgfm.cmark import Options

    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    return (
        '<!doctype html><html><head><meta charset="utf-8"><style>'
        + CSS % {"width": WIDTH}
        + '</style></head><body><div class="comment"><div class="head">'
        + "<b>github-actions</b> bot commented</div>"
        + body
        + "</div></body></html>"
    )


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("headless Chromium not found: apt-get install chromium")


def capture(html: Path, png: Path, height: int) -> None:
    """Screenshot ``html`` at WIDTH x ``height`` with headless Chromium."""
    subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH + 2},{height}",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "comment.png")
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    parser.add_argument(
        "--height", type=int, default=480, help="capture height in pixels (the comment fits)"
    )
    parser.add_argument(
        "--unavailable",
        action="store_true",
        help="the comment of a run no route could serve (docs/comment-unavailable.png)",
    )
    args = parser.parse_args()
    if args.unavailable and args.out == ROOT / "docs" / "comment.png":
        args.out = ROOT / "docs" / "comment-unavailable.png"
    html = comment_html(comment_markdown(*(UNAVAILABLE_FLAGS if args.unavailable else ())))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "comment.html"
        page.write_text(html, encoding="utf-8")
        if args.html:
            args.html.write_text(html, encoding="utf-8")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        capture(page, args.out, args.height)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
