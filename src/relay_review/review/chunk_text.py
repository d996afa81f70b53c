"""The chunk text format (the prompt explains it to the model)::

    ### FILE src/app.py [modified]
    @@ -10,7 +10,8 @@ def handler(request):
    C 10   unchanged context line (new-file number; not citable)
    L 11 - a removed line (old-file number; cite as side LEFT, line 11)
    R 11 + an added line (new-file number; cite as side RIGHT, line 11)
    \\ no newline at end of file

Other file headers: ``[added]``, ``[deleted]``, ``[renamed from old/path.py]``, ``[copied from
x.py]``; a file split across chunks adds ``(part 2/3)``; a hunk split across chunks continues
under ``@@ (hunk continued) @@``. Every line carries its own number, so splitting never shifts a
citation.
"""

from __future__ import annotations

from relay_review.review.diff import DiffLine, FileDiff, Hunk
from relay_review.review.paths import show_path

CONTINUED = "@@ (hunk continued) @@"


def file_header(f: FileDiff, part: tuple[int, int] | None = None) -> str:
    """``### FILE path [status]``, with ``(part i/n)`` for a file split across chunks."""
    if f.status in ("renamed", "copied") and f.old_path:
        tag = f"[{f.status} from {show_path(f.old_path)}]"
    else:
        tag = f"[{f.status}]"
    tail = f" (part {part[0]}/{part[1]})" if part else ""
    return f"### FILE {show_path(f.path)} {tag}{tail}"


def render_line(ln: DiffLine) -> list[str]:
    """The rendered form of one diff line (two lines when it lacks a final newline)."""
    if ln.kind == "+":
        out = f"R {ln.new} + {ln.text}"
    elif ln.kind == "-":
        out = f"L {ln.old} - {ln.text}"
    else:
        out = f"C {ln.new}   {ln.text}"
    return [out, "\\ no newline at end of file"] if ln.no_eol else [out]


def render_file(f: FileDiff, part: tuple[int, int] | None = None) -> str:
    """A file (or file piece) in the chunk format described in the module doc."""
    out = [file_header(f, part)]
    for hunk in f.hunks:
        out.append(_hunk_header(hunk))
        for ln in hunk.lines:
            out.extend(render_line(ln))
    return "\n".join(out)


def _hunk_header(hunk: Hunk) -> str:
    return CONTINUED if hunk.heading == CONTINUED else hunk.header
