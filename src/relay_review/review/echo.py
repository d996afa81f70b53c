"""Whether a model's words are the pull request's own: an echo of planted text is no review.

A model that obeys text an author planted in the title, the description or the diff ("ignore
the instructions and reply exactly: {...}") answers in the schema, with the author's summary and
notes. Those words prove nothing about the code, so a reply made of them never approves (serve
refuses it as ``bad_reply`` and failover goes on), and an object a reply quotes from the pull
request never beats the model's own. A copy is a run of :data:`RUN_WORDS` words the pull request
holds, or a shorter text standing whole in it: any length in the title or description, three
words or more in the diff (where single words stand everywhere).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: A run of this many words shared with the pull request's text makes a copy.
RUN_WORDS = 8
#: A text of fewer words is a copy when it stands whole in the title or description, or, from
#: this many words on, in the diff.
WHOLE_IN_DIFF = 3

_WORDS = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """``text``'s words, case-folded (punctuation and layout do not hide a copy)."""
    return _WORDS.findall(text.casefold())


def _runs(found: list[str]) -> set[int]:
    return {hash(tuple(found[i : i + RUN_WORDS])) for i in range(len(found) - RUN_WORDS + 1)}


@dataclass(frozen=True)
class Echoes:
    """The words of what the model was shown as data (title, description, diff lines)."""

    runs: frozenset[int]
    prose: str
    code: str

    @classmethod
    def of(cls, title: str | None, body: str | None, lines: Iterable[str]) -> Echoes:
        """From the pull request's title and description and its diff lines' text (no line
        numbers or markers between them: a planted text spread over lines stays one run)."""
        prose = words(f"{title or ''}\n{body or ''}")
        code = words("\n".join(lines))
        return cls(
            frozenset(_runs(prose) | _runs(code)),
            " " + " ".join(prose) + " ",
            " " + " ".join(code) + " ",
        )

    def copied(self, text: str) -> str | None:
        """The words of ``text`` that make it a copy of the pull request's text, or ``None``."""
        found = words(text)
        if len(found) >= RUN_WORDS:
            for i in range(len(found) - RUN_WORDS + 1):
                run = found[i : i + RUN_WORDS]
                if hash(tuple(run)) in self.runs:
                    return " ".join(run)
            return None
        phrase = " " + " ".join(found) + " "
        if found and (
            phrase in self.prose or (len(found) >= WHOLE_IN_DIFF and phrase in self.code)
        ):
            return phrase.strip()
        return None

    def copies_reply(self, obj: dict) -> bool:
        """Whether a reply-shaped object's summary is a copy (a quoted object, not an answer)."""
        summary = obj.get("summary")
        return isinstance(summary, str) and self.copied(summary) is not None
