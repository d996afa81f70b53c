"""Whether a parsed reply is evidence of a review at all, before any finding is checked.

A model that did not read the diff still answers in the schema: a summary of digits or a loop,
notes on files it was not shown, findings that all cite invented code. Such a reply is refused
(``bad_reply`` for its route), so failover goes on and it is never approved or cached.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from relay_review.records.finding import Finding
from relay_review.review.citations import points_at_shown_code
from relay_review.review.diff import DiffIndex
from relay_review.review.echo import Echoes
from relay_review.review.rejection import Rejection, show
from relay_review.review.reply import ParsedReply

#: A word: two letters or more (any script) standing alone, not inside a run of digits and
#: letters. A summary without one is junk (``"134428"``, ``","``, a hex token like ``"d6064bf1"``).
_WORD = re.compile(r"\b[^\W\d_]{2,}\b")


def has_word(text: str) -> bool:
    """Whether ``text`` holds a word (two letters or more standing alone, any script)."""
    return bool(_WORD.search(text or ""))


#: Word shingles (runs of this many words) a looping text repeats.
_SHINGLE_WORDS = 6


def loops(text: str) -> bool:
    """Whether ``text`` is a model stuck in a loop: among its runs of six words (at least 12 of
    them), fewer than half are distinct ("The report is a file that ... The report is a file
    that ..."). A real summary of one to three sentences never repeats itself like that."""
    words = re.findall(r"\w+", text.casefold())
    runs = [tuple(words[i : i + _SHINGLE_WORDS]) for i in range(len(words) - _SHINGLE_WORDS + 1)]
    return len(runs) >= 12 and len(set(runs)) * 2 < len(runs)


def evidence_problem(parsed: ParsedReply, paths: Sequence[str]) -> str | None:
    """Why the reply is not evidence of a review of a chunk holding ``paths`` (``None``: it is).

    A summary that is empty or junk (no word, or a loop repeating itself), or file notes naming
    a file that is not in the chunk, mean the model did not read this diff. Notes are optional
    (models omit them).
    """
    reply = parsed.reply
    if not reply.summary.strip():
        return "the summary is empty"
    if not has_word(reply.summary):
        return f"the summary holds no word ({show(repr(reply.summary), 40)})"
    if loops(reply.summary):
        return f"the summary repeats itself ({show(repr(reply.summary), 60)})"
    shown = set(paths)
    for path in [*(note.path for note in reply.files), *parsed.named]:
        if path not in shown and path.removeprefix("./") not in shown:
            return f"a file note names {show(path, 120)}, which is not in this chunk"
    return None


def echo_problem(parsed: ParsedReply, echoes: Echoes) -> str | None:
    """Why the reply's words are the pull request's own (``None``: they are the model's): a
    summary or file note copied from the title, description or diff is what a model obeying
    planted text writes, and no evidence that it read the code."""
    reply = parsed.reply
    texts = [("the summary", reply.summary)]
    texts += [(f"the note on {show(note.path, 80)}", note.summary) for note in reply.files]
    for what, text in texts:
        copy = echoes.copied(text)
        if copy is not None:
            return f"{what} copies the pull request's own text ({show(repr(copy), 60)})"
    return None


def all_invented(
    parsed: ParsedReply,
    verified: Sequence[Finding],
    rejected: Sequence[Rejection],
    index: DiffIndex,
) -> bool:
    """Whether the reply had findings and every one was rejected without pointing at code the
    model was shown (invented paths, lines and quotes: a hallucinated review)."""
    if verified or not rejected:
        return False
    return not any(points_at_shown_code(r.finding, index) for r in rejected)
