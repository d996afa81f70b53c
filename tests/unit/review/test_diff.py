"""The diff index on real diffs, cross-checked against git's own numbering.

A temporary repository is filled with real source files of installed packages (httpx, unidiff,
requests), committed, then changed in every way the index must handle: modifications, a rename
with edits, a pure rename, a deletion, a new file, binary files, a removed trailing newline, CRLF
line endings, non-UTF-8 bytes, a quoted path (space + non-ASCII), a mode change. Each indexed line
is checked against the files themselves (line N of the new/old file), and the set of commentable
lines against ``git diff --unified=0`` hunk ranges and ``git diff --numstat`` counts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import requests
import unidiff

from relay_review.errors import UsageError
from relay_review.review.chunks import plan_chunks
from relay_review.review.diff import (
    REASON_BINARY,
    REASON_NO_CHANGES,
    REASON_NO_PATCH,
    DiffIndex,
    DiffParseError,
    unquote_git_path,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "review"
HTTPX = Path(httpx.__file__).parent
UNIDIFF = Path(unidiff.__file__).parent
REQUESTS = Path(requests.__file__).parent

QUOTED = "docs/naïve file.py"
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "LC_ALL": "C",
}


def git(repo: Path, *args: str) -> bytes:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "color.ui=never", *args],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
    ).stdout


def edit_lines(path: Path, fn) -> None:
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(fn(lines)))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    git(root, "init", "-q", ".")
    files = {
        "src/client.py": HTTPX / "_client.py",
        "src/models.py": HTTPX / "_models.py",
        "lib/patch.py": UNIDIFF / "patch.py",
        "lib/constants.py": UNIDIFF / "constants.py",
        "old/doomed.py": HTTPX / "_exceptions.py",
        "pkg/hooks.py": REQUESTS / "hooks.py",
        "pkg/status_codes.py": REQUESTS / "status_codes.py",
        "docs/structures.py": REQUESTS / "structures.py",
        QUOTED: REQUESTS / "help.py",
        "bin/tool.py": REQUESTS / "certs.py",
    }
    for dest, src in files.items():
        target = root / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    # CRLF file, binary file.
    crlf = root / "docs/structures.py"
    crlf.write_bytes(crlf.read_bytes().replace(b"\n", b"\r\n"))
    (root / "assets").mkdir()
    (root / "assets/logo.bin").write_bytes(bytes(range(256)) * 4)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")

    # Modified in several places: deletion, replacement, insertion, last line.
    def client(lines: list[bytes]) -> list[bytes]:
        lines = lines[:29] + lines[34:]
        lines[99] = b"    # replaced line: " + lines[99].strip()
        lines[200:200] = [b"# inserted one", b"# inserted two", b""]
        lines[-2] = lines[-2] + b"  # trailing edit"
        return lines

    edit_lines(root / "src/client.py", client)
    edit_lines(root / "src/models.py", lambda ls: [*ls[:10], b"import os  # new", *ls[10:]])
    # Rename with edits; pure rename; deletion; new file.
    git(root, "mv", "lib/patch.py", "lib/unidiff_patch.py")
    edit_lines(
        root / "lib/unidiff_patch.py",
        lambda ls: [*ls[:49], b"# changed after the rename", *ls[50:399], *ls[401:]],
    )
    git(root, "mv", "lib/constants.py", "lib/const.py")
    git(root, "rm", "-q", "old/doomed.py")
    (root / "new").mkdir()
    shutil.copyfile(HTTPX / "_urls.py", root / "new/feature.py")
    # Trailing newline removed (and the last line changed).
    hooks = root / "pkg/hooks.py"
    hooks.write_bytes(hooks.read_bytes().rstrip(b"\n") + b"  # end")
    # CRLF file edited, keeping CRLF.
    edit_lines(crlf, lambda ls: [*ls[:5], b"# crlf edit\r", *ls[5:20], *ls[21:]])
    # Non-UTF-8 bytes (Latin-1).
    edit_lines(root / "pkg/status_codes.py", lambda ls: [*ls[:3], b"# caf\xe9 \xff", *ls[3:]])
    # Quoted path (space + non-ASCII).
    edit_lines(root / QUOTED, lambda ls: [*ls[:7], b"# naive edit", *ls[8:]])
    # Binary changed, binary added; mode change only.
    (root / "assets/logo.bin").write_bytes(bytes(range(256))[::-1] * 4)
    (root / "assets/new.bin").write_bytes(b"\x00\x01\x02PNG")
    (root / "bin/tool.py").chmod(0o755)
    git(root, "add", "-A")
    return root


@pytest.fixture(scope="module")
def diff_bytes(repo: Path) -> bytes:
    return git(repo, "diff", "--cached", "-M", "--no-ext-diff")


@pytest.fixture(scope="module")
def index(diff_bytes: bytes) -> DiffIndex:
    return DiffIndex.from_diff(diff_bytes)


def file_lines(data: bytes) -> list[str]:
    return [line.decode("utf-8", errors="replace").removesuffix("\r") for line in data.split(b"\n")]


def new_text(repo: Path, path: str) -> list[str]:
    return file_lines((repo / path).read_bytes())


def old_text(repo: Path, path: str) -> list[str]:
    return file_lines(git(repo, "show", f"HEAD:{path}"))


def git_ranges(repo: Path, *extra: str) -> dict[str, dict[str, set[int]]]:
    """Commentable lines per new path, from ``git diff -U0`` hunk headers alone."""
    out = git(repo, "-c", "core.quotePath=false", "diff", "--cached", "-U0", *extra)
    text = out.decode("utf-8", errors="replace")
    result: dict[str, dict[str, set[int]]] = {}
    for section in re.split(r"^diff --git ", text, flags=re.MULTILINE)[1:]:
        minus = re.search(r"^--- (?:a/)?(.*?)\t?$", section, re.MULTILINE)
        plus = re.search(r"^\+\+\+ (?:b/)?(.*?)\t?$", section, re.MULTILINE)
        if not plus:
            continue
        path = plus.group(1) if plus.group(1) != "/dev/null" else minus.group(1)
        sides = result.setdefault(path, {"RIGHT": set(), "LEFT": set()})
        for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", section, re.M):
            a, b = int(m.group(1)), int(m.group(2) or 1)
            c, d = int(m.group(3)), int(m.group(4) or 1)
            sides["LEFT"].update(range(a, a + b))
            sides["RIGHT"].update(range(c, c + d))
    return result


def numstat(repo: Path, *extra: str) -> dict[str, tuple[str, str]]:
    out = git(repo, "diff", "--cached", "--numstat", "-z", *extra).decode()
    fields = out.split("\0")
    stats: dict[str, tuple[str, str]] = {}
    i = 0
    while i < len(fields) - 1:
        adds, dels, path = fields[i].split("\t")
        if path == "":  # rename: old and new names follow
            stats[fields[i + 2]] = (adds, dels)
            i += 3
        else:
            stats[path] = (adds, dels)
            i += 1
    return stats


# -- cross-checks against git -------------------------------------------------------------------


def test_every_indexed_line_is_that_line_of_the_file(repo: Path, index: DiffIndex) -> None:
    checked = 0
    for path, side, number, text in index.locations():
        f = index.file(path)
        assert f is not None
        if side == "RIGHT":
            expected = new_text(repo, path)[number - 1]
        else:
            expected = old_text(repo, f.old_path or path)[number - 1]
        assert text == expected, (path, side, number)
        checked += 1
    assert checked > 100


def test_commentable_lines_equal_git_unified0_ranges(repo: Path, index: DiffIndex) -> None:
    ranges = git_ranges(repo, "-M")
    for f in index.files:
        if f.skip_reason:
            assert not ranges.get(f.path, {}).get("RIGHT"), f.path
            continue
        assert set(index.lines(f.path, "RIGHT")) == ranges[f.path]["RIGHT"], f.path
        assert set(index.lines(f.path, "LEFT")) == ranges[f.path]["LEFT"], f.path
    assert {f.path for f in index.files if not f.skip_reason} == set(ranges)


def test_counts_match_git_numstat(repo: Path, index: DiffIndex) -> None:
    stats = numstat(repo, "-M")
    assert set(stats) == set(index.paths)
    for f in index.files:
        adds, dels = stats[f.path]
        if adds == "-":
            assert f.status == "binary" and f.skip_reason == REASON_BINARY
        else:
            assert (f.additions, f.deletions) == (int(adds), int(dels)), f.path


def test_without_rename_detection_renames_are_delete_plus_add(repo: Path) -> None:
    index = DiffIndex.from_diff(git(repo, "diff", "--cached", "--no-renames"))
    assert index.file("lib/patch.py").status == "deleted"
    assert index.file("lib/unidiff_patch.py").status == "added"
    ranges = git_ranges(repo, "--no-renames")
    for path, sides in ranges.items():
        assert set(index.lines(path, "RIGHT")) == sides["RIGHT"]
        assert set(index.lines(path, "LEFT")) == sides["LEFT"]


# -- file kinds ---------------------------------------------------------------------------------


def test_statuses_and_old_paths(index: DiffIndex) -> None:
    status = {f.path: (f.status, f.old_path, f.skip_reason) for f in index.files}
    assert status["src/client.py"] == ("modified", "src/client.py", None)
    assert status["lib/unidiff_patch.py"] == ("renamed", "lib/patch.py", None)
    assert status["lib/const.py"] == ("renamed", "lib/constants.py", REASON_NO_CHANGES)
    assert status["old/doomed.py"][0] == "deleted"
    assert status["new/feature.py"] == ("added", None, None)
    assert status["assets/logo.bin"] == ("binary", "assets/logo.bin", REASON_BINARY)
    assert status["assets/new.bin"] == ("binary", None, REASON_BINARY)
    assert status["bin/tool.py"] == ("modified", "bin/tool.py", REASON_NO_CHANGES)
    assert index.renamed_to("lib/patch.py") == "lib/unidiff_patch.py"


def test_new_file_is_all_right_lines_and_deleted_all_left(repo: Path, index: DiffIndex) -> None:
    new = new_text(repo, "new/feature.py")
    assert index.lines("new/feature.py", "RIGHT") == list(range(1, len(new)))
    assert index.lines("new/feature.py", "LEFT") == []
    old = old_text(repo, "old/doomed.py")
    assert index.lines("old/doomed.py", "LEFT") == list(range(1, len(old)))
    assert index.lines("old/doomed.py", "RIGHT") == []


def test_no_newline_at_end_of_file(repo: Path, index: DiffIndex) -> None:
    f = index.file("pkg/hooks.py")
    last = f.hunks[-1].lines[-1]
    assert last.kind == "+" and last.no_eol and last.text.endswith("  # end")
    assert index.line("pkg/hooks.py", last.new, "RIGHT") == new_text(repo, "pkg/hooks.py")[-1]


def test_crlf_texts_are_stripped_but_numbers_kept(repo: Path, index: DiffIndex) -> None:
    assert (repo / "docs/structures.py").read_bytes().count(b"\r\n") > 50
    assert index.line("docs/structures.py", 6, "RIGHT") == "# crlf edit"
    assert all("\r" not in text for _, _, _, text in index.locations())
    removed = index.lines("docs/structures.py", "LEFT")
    assert removed == [21]
    assert index.line("docs/structures.py", 21, "LEFT") == old_text(repo, "docs/structures.py")[20]


def test_crlf_whole_diff_transport(diff_bytes: bytes, index: DiffIndex) -> None:
    """A diff file whose every line ends in CRLF (e.g. saved on Windows) indexes identically."""
    crlf = DiffIndex.from_diff(diff_bytes.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    assert list(crlf.locations()) == list(index.locations())
    assert [f.status for f in crlf.files] == [f.status for f in index.files]


def test_non_utf8_bytes_are_replaced(index: DiffIndex) -> None:
    assert index.line("pkg/status_codes.py", 4, "RIGHT") == "# caf\ufffd \ufffd"


def test_quoted_path_is_unquoted(index: DiffIndex) -> None:
    assert index.file(QUOTED) is not None
    assert index.line(QUOTED, 8, "RIGHT") == "# naive edit"
    assert unquote_git_path('"a/na\\303\\257ve file.py"') == "a/naïve file.py"
    assert unquote_git_path('"tab\\there\\"q\\\\"') == 'tab\there"q\\'
    assert unquote_git_path("plain") == "plain"


def test_str_and_bytes_inputs_agree(diff_bytes: bytes, index: DiffIndex) -> None:
    text = diff_bytes.decode("utf-8", errors="replace")
    assert list(DiffIndex.from_diff(text).locations()) == list(index.locations())


# -- lookups ------------------------------------------------------------------------------------


def test_line_and_nearest(index: DiffIndex) -> None:
    right = index.lines("src/models.py", "RIGHT")
    assert right == [11]
    assert index.line("src/models.py", 11) == "import os  # new"
    assert index.line("src/models.py", 12) is None
    assert index.line("src/models.py", 11, "LEFT") is None
    assert index.line("nope.py", 1) is None
    assert index.nearest("src/models.py", 500) == [11]
    client = index.lines("src/client.py", "RIGHT")
    assert len(client) >= 5
    probe = client[2] + 1
    near = index.nearest("src/client.py", probe, "RIGHT", k=2)
    assert len(near) == 2 and client[2] in near
    assert index.nearest("src/client.py", 1, "RIGHT", k=3) == client[:3]
    assert index.nearest("old/doomed.py", 5, "RIGHT") == []


def test_nearest_prefers_lower_on_ties() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -1,0 +2,1 @@\n+two\n@@ -4,0 +6,1 @@\n+six\n"
    index = DiffIndex.from_diff(diff)
    assert index.nearest("x", 4, "RIGHT", k=1) == [2]  # 2 and 6 are both 2 away
    assert index.nearest("x", 5, "RIGHT", k=1) == [6]
    assert index.nearest("x", 4, "RIGHT", k=5) == [2, 6]
    assert index.nearest("x", 4, "LEFT") == []


# -- the GitHub files API -----------------------------------------------------------------------


def api_entries(repo: Path, diff_bytes: bytes) -> list[dict]:
    """Files-API-shaped entries: statuses from ``--name-status``, patches = the hunks only."""
    names = git(repo, "diff", "--cached", "-M", "--name-status", "-z").decode().split("\0")
    codes = {"A": "added", "M": "modified", "D": "removed", "R": "renamed"}
    entries: dict[str, dict] = {}
    i = 0
    while i < len(names) - 1:
        code = names[i]
        if code.startswith("R"):
            entry = {"filename": names[i + 2], "previous_filename": names[i + 1]}
            i += 3
        else:
            entry = {"filename": names[i + 1]}
            i += 2
        entry["status"] = codes[code[0]]
        entries[entry["filename"]] = entry
    index = DiffIndex.from_diff(diff_bytes)
    text = diff_bytes.decode("utf-8", errors="replace")
    sections = re.split(r"^(?=diff --git )", text, flags=re.MULTILINE)[1:]
    for f, section in zip(index.files, sections, strict=True):
        entry = entries[f.path]
        at = section.find("\n@@")
        if f.status != "binary" and at != -1:
            entry["patch"] = section[at + 1 :].rstrip("\n")  # the API has no final newline
        entry["additions"], entry["deletions"] = f.additions, f.deletions
        entry["changes"] = f.additions + f.deletions
    return list(entries.values())


def test_api_entries_index_like_the_diff(repo: Path, diff_bytes: bytes, index: DiffIndex) -> None:
    entries = api_entries(repo, diff_bytes)
    api = DiffIndex.from_api_files(entries)
    assert sorted(api.locations()) == sorted(index.locations())
    by_path = {f.path: f for f in api.files}
    assert by_path["lib/unidiff_patch.py"].old_path == "lib/patch.py"
    assert by_path["old/doomed.py"].status == "deleted"
    assert by_path["assets/logo.bin"].skip_reason == REASON_NO_PATCH
    assert by_path["lib/const.py"].skip_reason == REASON_NO_CHANGES
    hooks = by_path["pkg/hooks.py"].hunks[-1].lines[-1]
    assert hooks.no_eol


def test_api_entry_objects_and_bad_patches() -> None:
    class File:  # PyGithub-like attribute access
        filename = "a.py"
        status = "modified"
        previous_filename = None
        patch = "@@ -1,2 +1,2 @@\n keep\n-old\n+new"
        changes = 2

    entries = [
        File(),
        {"filename": "big.sql", "status": "added", "changes": 90000},
        {"filename": "cut.py", "status": "modified", "patch": "@@ -1,5 +1,5 @@\n a\n-b\n+c"},
        {"filename": "a.py", "status": "modified", "patch": "@@ -1 +1 @@\n-x\n+y"},
    ]
    index = DiffIndex.from_api_files(entries)
    assert index.line("a.py", 2, "RIGHT") == "new"
    assert index.line("a.py", 2, "LEFT") == "old"
    assert index.file("big.sql").skip_reason == REASON_NO_PATCH
    assert index.files[2].skip_reason.startswith("patch could not be parsed")
    assert index.files[3].skip_reason.startswith("duplicate entry")
    assert index.line("a.py", 1, "RIGHT") is None  # the duplicate did not overwrite


# -- checked-in diffs from real project histories -----------------------------------------------


def test_fixture_requests_2_31_to_2_34() -> None:
    """requests 2.31.0 (as vendored by pip 23.2.1) -> 2.34.2, five files and a new empty one."""
    index = DiffIndex.from_diff((DATA / "requests-2.31.0-to-2.34.2.diff").read_bytes())
    counts = {f.path: (f.additions, f.deletions) for f in index.files}
    assert counts == {  # git diff --numstat at generation time
        "requests/__version__.py": (3, 3),
        "requests/api.py": (32, 9),
        "requests/certs.py": (1, 7),
        "requests/hooks.py": (24, 9),
        "requests/packages.py": (14, 7),
        "requests/py.typed": (0, 0),
    }
    assert index.file("requests/py.typed").status == "added"
    assert index.file("requests/py.typed").skip_reason == REASON_NO_CHANGES
    assert index.line("requests/__version__.py", 8, "RIGHT") == '__version__ = "2.34.2"'
    assert index.line("requests/__version__.py", 8, "LEFT") == '__version__ = "2.31.0"'
    assert index.line("requests/__version__.py", 10, "RIGHT") is None  # context
    assert index.line("requests/api.py", 11, "RIGHT") == "from __future__ import annotations"


def test_fixture_relay_review_history() -> None:
    """This project's own commit f6453fd (the errors module)."""
    index = DiffIndex.from_diff((DATA / "relay-review-f6453fd.diff").read_bytes())
    assert [(f.path, f.status) for f in index.files] == [
        ("src/relay_review/cli.py", "modified"),
        ("src/relay_review/errors.py", "added"),
    ]
    assert index.file("src/relay_review/errors.py").additions == 9
    assert index.line("src/relay_review/errors.py", 8, "RIGHT").startswith("class UsageError")
    cli = index.file("src/relay_review/cli.py")
    assert (cli.additions, cli.deletions) == (1, 4)


# -- bad input ----------------------------------------------------------------------------------


def test_empty_and_garbage_input() -> None:
    assert DiffIndex.from_diff(b"").files == []
    with pytest.raises(DiffParseError):
        DiffIndex.from_diff("hello, this is not a diff\n")
    assert issubclass(DiffParseError, UsageError)
    with pytest.raises(DiffParseError):
        DiffIndex.from_diff("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-only one line\n")


def test_one_broken_git_section_is_reported_not_fatal() -> None:
    diff = (
        "diff --git a/ok.py b/ok.py\n--- a/ok.py\n+++ b/ok.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/bad.py b/bad.py\n--- a/bad.py\n+++ b/bad.py\n@@ -1,9 +1,9 @@\n-a\n"
        "diff --git a/my file.py b/my file.py\n--- a/my file.py\n+++ b/my file.py\n"
        "@@ -1 +1 @@\n-c\n+d\n"
    )
    index = DiffIndex.from_diff(diff)
    assert index.paths == ["ok.py", "bad.py", "my file.py"]
    assert index.file("bad.py").skip_reason.startswith("patch could not be parsed")
    assert index.line("ok.py", 1) == "b"
    assert index.line("my file.py", 1) == "d"


def test_lone_cr_and_unicode_separators_stay_in_line() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\rb\u2028c\n+d\n"
    index = DiffIndex.from_diff(diff)
    assert index.line("x", 1) == "a\rb\u2028c"
    assert index.line("x", 2) == "d"


def test_api_lone_surrogates_become_replacement_characters() -> None:
    """The files API is JSON: ``\\udcff`` escapes arrive as lone surrogates, which no prompt,
    log or comment could encode; they become U+FFFD in file names and lines alike."""
    entry = {
        "filename": "caf\udce9.py",
        "previous_filename": "old\ud800.py",
        "status": "renamed",
        "patch": "@@ -1 +1,2 @@\n-x = '\udcff'\n+x = '\ud800\udcfe'\n+y = 1",
    }
    index = DiffIndex.from_api_files([entry])
    assert index.paths == ["caf\ufffd.py"]
    assert index.file("caf\ufffd.py").old_path == "old\ufffd.py"
    assert index.line("caf\ufffd.py", 1, "RIGHT") == "x = '\ufffd\ufffd'"
    assert index.line("caf\ufffd.py", 1, "LEFT") == "x = '\ufffd'"
    for path, _, _, text in index.locations():
        (path + text).encode("utf-8")  # never raises
    assert (
        DiffIndex.from_diff("--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+\udcff\n").line("x", 1) == "\ufffd"
    )


def test_megabyte_line_and_invalid_bytes_are_indexed_and_skipped_by_size() -> None:
    line = b"A" * (1 << 20)
    diff = b"--- a/min.js\n+++ b/min.js\n@@ -0,0 +1,2 @@\n+" + line + b"\n+caf\xe9 \xff\xfe\n"
    index = DiffIndex.from_diff(diff)
    assert len(index.line("min.js", 1)) == 1 << 20
    assert index.line("min.js", 2) == "caf\ufffd \ufffd\ufffd"
    plan = plan_chunks(index, 8000)
    assert not plan.chunks
    assert plan.files[0].status == "skipped" and "too large" in (plan.files[0].reason or "")


def test_changes_no_model_can_be_shown_are_left_out() -> None:
    """A binary, a file without a patch and a duplicate entry change content no model sees; a
    pure rename (no patch, 0 changes) changes nothing."""
    api = DiffIndex.from_api_files(
        [
            {"filename": "lib/x.so", "status": "added", "additions": 0, "deletions": 0},
            {"filename": "big.sql", "status": "modified", "additions": 9000, "deletions": 1},
            {
                "filename": "docs/new.md",
                "previous_filename": "docs/old.md",
                "status": "renamed",
                "changes": 0,
            },
            {"filename": "a.py", "status": "modified", "patch": "@@ -1 +1 @@\n-a\n+b"},
        ]
    )
    assert {f.path: f.left_out for f in api.files} == {
        "lib/x.so": True,
        "big.sql": True,
        "docs/new.md": False,
        "a.py": False,
    }
    git = DiffIndex.from_diff(
        "diff --git a/x.so b/x.so\nnew file mode 100644\nindex 0000000..1111111\n"
        "Binary files /dev/null and b/x.so differ\n"
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+evil\n"
    )
    assert [(f.path, f.left_out) for f in git.files] == [
        ("x.so", True),
        ("a.py", False),
        ("a.py", True),
    ]
