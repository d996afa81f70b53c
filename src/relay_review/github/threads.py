"""Inline threads that live once: which findings to post, which of our threads to close, and
which a maintainer dismissed.

Each line comment relay-review posts ends with a hidden marker naming the finding's fingerprint,
its cited lines' hash and the commit it was first seen at (:func:`marker`). On a later push the
pull request's review threads are read (GraphQL ``pullRequest.reviewThreads``) and a thread is
*ours* only when its first comment carries the marker **and** is by our bot: REST names it
``name[bot]``, GraphQL ``name`` with ``__typename: Bot`` (:func:`same_actor`). A marker alone
proves nothing: anyone can paste it. Threads we did not start are never replied to or resolved.

:func:`plan` is pure: from the current findings, our threads and what memory holds it decides

* a finding with an open thread of ours is **not posted again** (``open``);
* our thread whose cited lines are gone from the diff gets a reply (``fixed in `<sha12>```, or
  ``code changed`` when a new finding now sits on its line) and is resolved (``fixed``);
* our thread whose cited lines are still in the diff stays open, even when the model did not
  repeat the finding this time;
* "still in the diff" is looked for on the side the finding was posted on: the thread's
  ``diffSide`` as GitHub says it (memory's ``side`` for a finding without a thread). A line
  the pull request added and then removed again, or code it moved, still shows its removed
  copy on the base side: that copy never keeps an added line's finding open. A finding whose
  side is not known (a thread read without ``diffSide``, memory written before sides were
  kept) is looked for on either side, as before;
* a finding a maintainer dismissed is never posted again (``dismissed``): they resolved our
  thread themselves, replied ``/relay-review dismiss`` (the ``trigger`` input), "won't fix" or
  "false positive", or reacted 👎 on our comment, and only when their author association is one
  allowed to trigger reviews. A reaction or a resolution carries no association, so it counts
  only for someone whose association this pull request shows (a comment in its threads, or its
  author); anyone else's is ignored (fail closed);
* a finding on the cited lines of an earlier one (a thread's marker, or memory) whose
  fingerprint this run does not report is that finding rated at another severity: one such
  finding goes by the earlier fingerprint (open, never posted twice), and keeps its dismissal
  only at a severity no higher than our thread says was dismissed;
* everything else is ``new`` and posted once.

:func:`read_threads` and :func:`close` are the two GitHub calls; neither raises for GitHub's
answers beyond :class:`~relay_review.github.errors.GitHubEdgeError` from the read.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from relay_review.github.errors import GitHubEdgeError
from relay_review.github.graphql import (
    MAX_THREAD_PAGES,
    REPLY_MUTATION,
    RESOLVE_MUTATION,
    THREADS_QUERY,
    graphql,
)
from relay_review.records import Finding
from relay_review.records.finding import Side
from relay_review.review.decision import SEVERITY_RANK
from relay_review.review.diff import SIDES, DiffIndex
from relay_review.review.fingerprint import still_cited

if TYPE_CHECKING:
    from github import Github

log = logging.getLogger(__name__)

MARKER = "<!-- relay-review:finding {fp} {cited} {first} -->"
_MARKER = re.compile(
    r"<!-- relay-review:finding (f1-[0-9a-f]{20}) ([0-9a-f]{20}:\d{1,3}) ([0-9a-f]{7,40}) -->"
)
#: Words of a maintainer's reply that dismiss the finding (besides ``<trigger> dismiss``).
DISMISS_WORDS = ("won't fix", "won’t fix", "wont fix", "false positive")
#: How our replies that close a thread start (:func:`_reply`).
CLOSING_PREFIXES = ("relay-review: fixed in `", "relay-review: code changed in `")
#: Longest text kept of a GraphQL string field we read (bodies are hostile and unbounded).
MAX_BODY_CHARS = 65_536

State = Literal["new", "open", "fixed", "dismissed"]


def marker(fingerprint: str, cited: str, first: str) -> str:
    """The hidden last line of our line comment (the commit is cut to 12 hex digits)."""
    return MARKER.format(fp=fingerprint, cited=cited, first=first[:12].lower())


def parse_marker(body: str | None) -> tuple[str, str, str] | None:
    """``(fingerprint, cited, first commit)`` of the marker on ``body``'s last line, or ``None``.

    Only the last line: the lines above it may quote the author's code (a suggestion is posted
    as it applies), so a marker planted in the diff would otherwise be read as ours.
    """
    last = (body or "").rstrip().rpartition("\n")[2].strip()
    match = _MARKER.fullmatch(last)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def same_actor(author: str, typename: str | None, login: str | None) -> bool:
    """Whether a GraphQL actor (``__typename``, ``login``) is the REST author ``author``: a
    ``name[bot]`` is the ``Bot`` ``name``; anyone else is a non-bot with the same login."""
    if not login or not author:
        return False
    want, got = author.casefold(), login.casefold()
    if want.endswith("[bot]"):
        return typename == "Bot" and got in (want[: -len("[bot]")], want)
    return typename != "Bot" and got == want


# --- what GraphQL says ----------------------------------------------------------------------


class ThreadComment(BaseModel):
    """One comment of a review thread, as read (every text is hostile)."""

    model_config = ConfigDict(frozen=True)

    database_id: int | None = None
    body: str = ""
    association: str = ""
    author: str = ""
    author_type: str = ""
    #: ``(typename, login)`` of each 👎 reaction's user.
    thumbs_down: tuple[tuple[str, str], ...] = ()


class Thread(BaseModel):
    """One review thread of the pull request."""

    model_config = ConfigDict(frozen=True)

    id: str
    resolved: bool = False
    resolved_by: str | None = None
    resolved_by_type: str | None = None
    path: str = ""
    line: int | None = None
    #: The side of the diff the thread was placed on (GraphQL ``diffSide``, set when we posted
    #: it); ``None``: not said, so its cited lines are looked for on either side.
    side: Side | None = None
    comments: tuple[ThreadComment, ...] = ()

    def closed_by_us(self, bot: str) -> bool:
        """Resolved after our own "fixed in" / "code changed" reply. ``resolvedBy`` is typed
        ``User`` in GitHub's schema, so it cannot prove a bot resolved it; our reply can (a
        comment's author is an ``Actor`` with its ``__typename``)."""
        return self.resolved and self.replied_closing(bot)

    def replied_closing(self, bot: str) -> bool:
        """Our "fixed in" / "code changed" reply is in the thread (resolved since or not: a
        maintainer may have reopened it, or our resolve failed)."""
        return any(
            same_actor(bot, c.author_type, c.author) and c.body.startswith(CLOSING_PREFIXES)
            for c in self.comments[1:]
        )

    def ours(self, bot: str) -> tuple[str, str, str] | None:
        """The marker of our first comment (marker **and** our bot as its author), else None."""
        if not self.comments:
            return None
        first = self.comments[0]
        if not same_actor(bot, first.author_type, first.author):
            return None
        return parse_marker(first.body)


def _str(value: Any, limit: int = 300) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _actor(node: Any) -> tuple[str, str]:
    node = node if isinstance(node, Mapping) else {}
    return _str(node.get("__typename"), 40), _str(node.get("login"), 100)


def _nodes(node: Any, key: str) -> list[Any]:
    inner = node.get(key) if isinstance(node, Mapping) else None
    nodes = inner.get("nodes") if isinstance(inner, Mapping) else None
    return [n for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else []


def parse_threads(page: Any) -> list[Thread]:
    """The threads of one ``reviewThreads`` page; malformed nodes are skipped."""
    out = []
    for node in _nodes(page, "reviewThreads"):
        if not isinstance(node.get("id"), str):
            continue
        comments = []
        for c in _nodes(node, "comments"):
            kind, login = _actor(c.get("author"))
            downs = tuple(_actor(r.get("user")) for r in _nodes(c, "reactions"))
            db_id = c.get("databaseId")
            comments.append(
                ThreadComment(
                    database_id=db_id if isinstance(db_id, int) else None,
                    body=_str(c.get("body"), MAX_BODY_CHARS),
                    association=_str(c.get("authorAssociation"), 40),
                    author=login,
                    author_type=kind,
                    thumbs_down=downs,
                )
            )
        by_type, by = _actor(node.get("resolvedBy"))
        line = node.get("line")
        side = node.get("diffSide")
        out.append(
            Thread(
                id=node["id"][:200],
                resolved=node.get("isResolved") is True,
                resolved_by=by or None,
                resolved_by_type=by_type or None,
                path=_str(node.get("path"), 4096),
                line=line if isinstance(line, int) else None,
                side=side if isinstance(side, str) and side in SIDES else None,
                comments=tuple(comments),
            )
        )
    return out


class ThreadList(list[Thread]):
    """The review threads read; ``complete`` is False when pages were left unread (the
    :data:`MAX_THREAD_PAGES` cap), so a thread of ours may exist unseen."""

    complete: bool = True


def read_threads(gh: Github, repo_full_name: str, number: int) -> ThreadList:
    """Every review thread of PR ``number`` (at most :data:`MAX_THREAD_PAGES` pages; past them
    the list says it is not ``complete``); raises :class:`GitHubEdgeError` when GitHub does not
    answer them."""
    owner, _, name = repo_full_name.partition("/")
    threads = ThreadList()
    after: str | None = None
    for _ in range(MAX_THREAD_PAGES):
        data = graphql(
            gh,
            THREADS_QUERY,
            {"owner": owner, "name": name, "number": number, "after": after},
            f"read the review threads of {repo_full_name}#{number}",
        )
        repo = data.get("repository") if isinstance(data, Mapping) else None
        pull = repo.get("pullRequest") if isinstance(repo, Mapping) else None
        if not isinstance(pull, Mapping):
            raise GitHubEdgeError(f"{repo_full_name}#{number}: no pull request in the answer")
        threads.extend(parse_threads(pull))
        info = pull.get("reviewThreads", {}).get("pageInfo") or {}
        cursor = info.get("endCursor")
        if not (info.get("hasNextPage") is True and isinstance(cursor, str)):
            break
        after = cursor
    else:
        log.warning(
            "more than %d pages of review threads; the rest are not read, and findings memory "
            "knows as posted are not posted again",
            MAX_THREAD_PAGES,
        )
        threads.complete = False
    return threads


# --- the maintainers' signals ---------------------------------------------------------------


def associations(
    threads: Iterable[Thread], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each login's author association as this pull request shows it (its comments in the
    threads, and ``extra`` such as the pull request's author), keyed by casefolded login."""
    known = {k.casefold(): v.upper() for k, v in (extra or {}).items() if k}
    for t in threads:
        for c in t.comments:
            if c.author and c.association and c.author_type != "Bot":
                known.setdefault(c.author.casefold(), c.association.upper())
    return known


def dismissal(
    thread: Thread,
    bot: str,
    allowed: frozenset[str],
    trigger: str,
    known: Mapping[str, str],
) -> str | None:
    """How an allowed maintainer dismissed our ``thread`` (``dismissed``, ``won't fix``,
    ``false positive``, ``👎``, ``resolved``), or ``None``."""
    allowed = frozenset(a.upper() for a in allowed)
    command = f"{trigger} dismiss".casefold()
    for c in thread.comments[1:]:
        if same_actor(bot, c.author_type, c.author) or c.association.upper() not in allowed:
            continue
        text = " ".join(c.body.split()).casefold()
        if text.startswith(command) and not text[len(command) : len(command) + 1].isalnum():
            return "dismissed"  # "/relay-review dismiss", not "/relay-review dismissal ..."
        for word in DISMISS_WORDS:
            at = text.find(word)
            if at >= 0 and not _negated(text[:at]):
                return word.replace("’", "'").replace("wont", "won't")
    if thread.comments:
        for kind, login in thread.comments[0].thumbs_down:
            if kind != "Bot" and known.get(login.casefold(), "") in allowed:
                return "👎"
    by = thread.resolved_by or ""
    if not thread.resolved or not by or thread.closed_by_us(bot):
        return None
    if thread.resolved_by_type == "Bot" or by.casefold() in _bot_names(bot):
        return None
    return "resolved" if known.get(by.casefold(), "") in allowed else None


#: Words that, among the three before a dismissal phrase, turn it around ("not a false
#: positive" said the finding is right, and dismissed it).
_NEGATIONS = frozenset({"not", "no", "never", "isn't", "isnt", "isn’t", "hardly"})


def _negated(before: str) -> bool:
    """Whether the words just before a dismissal phrase negate it. A "no" that a comma or a
    stop ends is an answer, not a negation of what follows ("No, false positive.")."""
    for word in before.split()[-3:]:
        bare = word.strip(".,;:!?\"'()")
        if bare in _NEGATIONS and not (bare == "no" and word.rstrip("\"')")[-1:] in ",.;:!"):
            return True
    return False


def _bot_names(bot: str) -> set[str]:
    name = bot.casefold()
    return {name, name.removesuffix("[bot]")}


# --- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Known:
    """What memory says of a finding seen on an earlier push (``state/memory.FindingMemo``)."""

    path: str
    cited: str
    first: str
    state: str
    how: str = ""
    #: The side it was found on; ``None``: not kept (an older record): either side.
    side: Side | None = None


@dataclass
class Entry:
    """One finding's place in the pull request's story."""

    fingerprint: str
    path: str
    line: int | None
    state: State
    first: str
    how: str = ""
    cited: str = ""
    #: The side its cited lines are on (``None``: not known, either side).
    side: Side | None = None


@dataclass(frozen=True)
class Closing:
    """Our thread to reply to and resolve: its cited lines changed or left the diff."""

    thread_id: str
    fingerprint: str
    reply: str
    how: Literal["fixed", "code changed"]


@dataclass
class Plan:
    """What to do on GitHub, and the story for the sticky comment."""

    #: Indexes (into the findings given) of those to post as line comments.
    post: list[int] = field(default_factory=list)
    close: list[Closing] = field(default_factory=list)
    #: Every finding known, current or earlier, by fingerprint.
    entries: dict[str, Entry] = field(default_factory=dict)
    #: The state of each finding given (same order), and the commit it was first seen at.
    states: list[tuple[State, str]] = field(default_factory=list)
    #: Each finding's identity (same order): its fingerprint, or the earlier finding's it is
    #: (the same cited lines at another severity); None without a fingerprint.
    identities: list[str | None] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {"new": 0, "open": 0, "fixed": 0, "dismissed": 0}
        for e in self.entries.values():
            out[e.state] += 1
        return out


#: The severity our line comment starts with (``**relay-review · high**: ...``).
_SEVERITY = re.compile(rf"\*\*relay-review · ({'|'.join(SEVERITY_RANK)})\*\*")


def _reply(how: str, sha12: str) -> str:
    if how == "fixed":
        return (
            f"relay-review: fixed in `{sha12}`: the cited lines changed and the finding was not "
            "reported again. Resolving this thread."
        )
    return (
        f"relay-review: code changed in `{sha12}`: the cited lines are gone; the new code is "
        "reviewed on its own. Resolving this thread."
    )


def plan(
    findings: Sequence[Finding],
    threads: Sequence[Thread] | None,
    remembered: Mapping[str, Known],
    index: DiffIndex,
    *,
    head_sha: str,
    bot: str,
    allowed: frozenset[str],
    trigger: str,
    known: Mapping[str, str] | None = None,
    reviewed: frozenset[str] | None = None,
    listed_all: bool = True,
) -> Plan:
    """Decide what to post, what to close and each finding's state (module docs). ``threads``
    ``None``: they could not be read; then memory alone says what was seen before, and a finding
    it knows as open is not posted again (no duplicates when GitHub is not sure); likewise when
    ``threads`` is a :class:`ThreadList` that is not ``complete`` (our thread may be on a page
    not read). ``reviewed``:
    the paths a model reviewed this run (``None``: all); a thread on a file still in the diff
    but not reviewed (its chunk failed, or it is excluded now) is left open, never closed.
    ``listed_all`` False: GitHub did not list every file of the pull request (3,000 at most),
    so a file missing from ``index`` may still be in the diff: its threads are left open too
    (3,000 files added before it made every finding on it "fixed")."""
    head12 = head_sha[:12].lower()
    #: GitHub not sure: unread, or read only in part (a thread of ours may be unseen)
    unsure = threads is None or not getattr(threads, "complete", True)
    known = known if known is not None else associations(threads or ())
    out = Plan()
    ours: dict[str, list[tuple[Thread, str, str]]] = {}
    for t in threads or ():
        mark = t.ours(bot)
        if mark is not None:
            ours.setdefault(mark[0], []).append((t, mark[1], mark[2]))
    dismissed: dict[str, str] = {
        fp: k.how or "dismissed" for fp, k in remembered.items() if k.state == "dismissed"
    }
    for fp, group in ours.items():
        for t, _, _ in group:
            signal = dismissal(t, bot, allowed, trigger, known)
            if signal is not None:
                dismissed.setdefault(fp, signal)
    first_of = {fp: k.first for fp, k in remembered.items() if k.first}
    for fp, group in ours.items():
        first_of.setdefault(fp, group[0][2])

    def now_at(path: str) -> str:
        """Where ``path`` is in this diff: its new name when the pull request renamed it."""
        if index.file(path) is not None:
            return path
        return index.renamed_to(path) or path

    def not_seen(path: str) -> bool:
        """Still in the diff (or perhaps, when GitHub did not list every file), but no model
        reviewed it this run: nothing is known of it."""
        path = now_at(path)
        if index.file(path) is None:
            return not listed_all
        return reviewed is not None and path not in reviewed

    def same_head(first: str) -> bool:
        """The head is the commit the finding was first seen at: its cited lines cannot have
        changed there; only the diff did (a retargeted base), so it is not fixed."""
        return bool(first) and first[:12].lower() == head12

    def live(fp: str) -> list[tuple[Thread, str, str]]:
        """Our threads for ``fp`` still standing (not resolved by us)."""
        return [g for g in ours.get(fp, []) if not g[0].closed_by_us(bot)]

    # The same cited lines rated at another severity (the fingerprint's kind) are the finding
    # an earlier push made, not a new one: when this run does not report that earlier
    # fingerprint itself, one finding goes by it (not posted again). A dismissal carries over
    # only to a severity no higher than the one dismissed (read from our thread's comment):
    # a problem the model now rates worse is posted again, never buried under a dismissed nit.
    reported = {f.fingerprint for f in findings if f.fingerprint}
    earlier: dict[tuple[str, str], str] = {}
    rated: dict[str, int] = {}
    for fp, group in ours.items():
        for t, cited, _ in group:
            earlier.setdefault((now_at(t.path), cited[:40]), fp)  # renamed: the same lines
            said = _SEVERITY.match(t.comments[0].body or "")
            if said:
                rated.setdefault(fp, SEVERITY_RANK[said.group(1)])
    for fp, k in remembered.items():
        earlier.setdefault((now_at(k.path), k.cited[:40]), fp)
    # Threads unread, or read in part: a dismissal memory holds is rated as if at the top (not
    # sure, not posted again); read, a dismissal without our comment's rating carries over to
    # no severity.
    unrated = max(SEVERITY_RANK.values()) if unsure else 0
    taken: set[str] = set()

    def identity(f: Finding) -> str | None:
        """``f``'s fingerprint, or the earlier finding's whose cited lines it cites (above)."""
        fp = f.fingerprint
        if fp is None or fp in ours or fp in remembered or not f.cited:
            return fp
        alias = earlier.get((f.path, f.cited[:40]))
        if alias is None or alias in reported or alias in taken:
            return fp
        if alias in dismissed and SEVERITY_RANK[f.severity] > rated.get(alias, unrated):
            return fp
        taken.add(alias)
        return alias

    current: dict[str, int] = {}
    for i, f in enumerate(findings):
        fp_or_none = identity(f)
        out.identities.append(fp_or_none)
        if fp_or_none is None:
            out.post.append(i)
            out.states.append(("new", head12))
            continue
        fp = fp_or_none
        first = first_of.get(fp, head12)
        if fp in current:  # the same finding twice (two chunks): one entry, posted once
            out.states.append(out.states[current[fp]])
            continue
        current[fp] = i
        path, line, cited = f.path, f.line, f.cited or ""
        seen = fp in remembered and remembered[fp].state == "open"
        if fp in dismissed:
            state: State = "dismissed"
        elif live(fp) or (unsure and seen):
            state = "open"
        else:  # no thread of ours: new, or seen on an earlier push with none (inline comments
            # off, or held back by the inline cap or floor): still open; a candidate either way
            state, first = ("open", first) if seen else ("new", head12)
            out.post.append(i)
        out.states.append((state, first))
        how = dismissed.get(fp, "")
        out.entries[fp] = Entry(fp, path, line, state, first, how, cited, f.side)
    new_at = {(findings[i].path, findings[i].line) for i in out.post}
    for fp, group in ours.items():
        if fp in current:
            continue
        thread, cited, first = group[0]
        side = thread.side
        if fp in dismissed:
            out.entries[fp] = Entry(
                fp, thread.path, thread.line, "dismissed", first, dismissed[fp], "", side
            )
            continue
        standing = live(fp)
        if not standing:
            out.entries[fp] = Entry(
                fp, thread.path, thread.line, "fixed", first, "fixed", cited, side
            )
            continue
        at = still_there(index, now_at(thread.path), cited, side)
        if at is not None or not_seen(thread.path) or same_head(first):
            out.entries[fp] = Entry(
                fp, thread.path, at or thread.line, "open", first, "", cited, side
            )
            continue
        closing: Literal["fixed", "code changed"] = (
            "code changed" if (thread.path, thread.line) in new_at else "fixed"
        )
        for t, _, _ in standing:
            # said once: a thread reopened after our reply (a maintainer disagrees) or one our
            # resolve failed on is left as it is, never replied to again on every push
            if not t.replied_closing(bot):
                out.close.append(Closing(t.id, fp, _reply(closing, head12), closing))
        out.entries[fp] = Entry(fp, thread.path, thread.line, "fixed", first, closing, cited, side)
    for fp, k in remembered.items():  # seen before, with no thread of ours (inline comments off)
        if fp in out.entries:
            continue
        if k.state in ("dismissed", "fixed"):
            out.entries[fp] = Entry(fp, k.path, None, k.state, k.first, k.how, k.cited, k.side)  # type: ignore[arg-type]
        elif (
            (at := still_there(index, now_at(k.path), k.cited, k.side)) is not None
            or not_seen(k.path)
            or same_head(k.first)
        ):
            out.entries[fp] = Entry(fp, k.path, at, "open", k.first, "", k.cited, k.side)
        else:
            out.entries[fp] = Entry(fp, k.path, None, "fixed", k.first, "fixed", k.cited, k.side)
    return out


def still_there(index: DiffIndex, path: str, cited: str, side: Side | None = None) -> int | None:
    """Where the cited lines are now on ``side``, the side the finding was posted on: a line
    the pull request added is still there only while it still adds it, whatever copy the base
    side shows (moved code, or an added line removed again). ``None`` (a side not known: an
    older record): on either side, as before sides were kept."""
    if side is not None:
        return still_cited(index, path, cited, side)
    at = still_cited(index, path, cited)
    return at if at is not None else still_cited(index, path, cited, "LEFT")


# --- acting on it ---------------------------------------------------------------------------


@dataclass
class Closed:
    """What :func:`close` did."""

    closed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def close(gh: Github, closings: Sequence[Closing], deadline: float | None = None) -> Closed:
    """Reply in each of our threads and resolve it (each a GraphQL mutation); a failure is
    kept and the rest go on; nothing is started past ``deadline`` (monotonic)."""
    done = Closed()
    for c in closings:
        if deadline is not None and time.monotonic() >= deadline:
            done.failed.append((c.thread_id, "the run's deadline passed"))
            continue
        try:
            graphql(gh, REPLY_MUTATION, {"thread": c.thread_id, "body": c.reply}, "reply")
            graphql(gh, RESOLVE_MUTATION, {"thread": c.thread_id}, "resolve the thread")
        except GitHubEdgeError as exc:
            done.failed.append((c.thread_id, str(exc)))
        else:
            done.closed.append(c.thread_id)
    return done
