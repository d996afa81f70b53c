"""Command line: ``relay-review <command>``.

Each command lives in its own module exposing ``add_parser(subparsers)`` and ``run(args) -> int``;
this module only wires them. Exit codes: 0 success, 1 no verdict/reply, 2 bad input or usage,
130/143 cancelled by SIGINT/SIGTERM (see :mod:`relay_review._signals`), 141 (128 + SIGPIPE,
as a shell reports it) when the reader of stdout went away (``relay-review catalog | head -1``):
the command stops quietly, without a traceback.

Only the command being run is imported: ``relay-review --help`` lists the commands from the light
table :data:`COMMANDS` (no command module, no PyGithub, no pydantic), and
``relay-review <command> ...`` builds that one command's full parser.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from relay_review import __version__, _tls
from relay_review._signals import Cancelled, cancellable
from relay_review.errors import UsageError


class Command(NamedTuple):
    """A command as ``relay-review --help`` lists it, and where it is implemented."""

    module: str
    summary: str  # the module's ``help=`` (tests/project/test_packaging.py checks they agree)
    #: It sends requests to providers: the TLS context starts loading as the program starts.
    sends: bool = True


#: command name -> its module (imported only when the command runs) and its one-line summary.
COMMANDS: dict[str, Command] = {
    "discover": Command(
        "relay_review.commands.discover",
        "list each account's chat models with price evidence (a discovery report)",
    ),
    "catalog": Command(
        "relay_review.commands.catalog",
        "select routes round-robin across accounts (free before priced, ZDR first)",
        sends=False,
    ),
    "preflight": Command(
        "relay_review.commands.preflight",
        "probe catalog routes cheaply: ready / deferred / rejected / timeout / unprobed",
    ),
    "chat": Command(
        "relay_review.commands.chat",
        "send one message through preflight + failover; prints who served and every attempt",
    ),
    "run": Command(
        "relay_review.commands.run",
        "the GitHub Action: review the pull request of GITHUB_EVENT_PATH (env INPUT_*)",
    ),
    "review": Command(
        "relay_review.commands.review",
        "review a unified diff: verified findings, computed decision, every route's fate",
    ),
    "drill": Command(
        "relay_review.commands.drill",
        "run the pipeline against a local fleet of scripted faults (default: review a bundled "
        "sample diff), or serve a fleet (--serve --config FILE)",
    ),
}


VERBOSE = "log at DEBUG (accepted before or after the command)"


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), if it is one of ours."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser: ``command``'s full sub-parser (its module imported); the others as stubs that
    only carry their summary, which is all ``relay-review --help`` prints of them."""
    parser = argparse.ArgumentParser(
        prog="relay-review",
        description="Review pull requests over free or cheap LLM routes with bounded failover.",
    )
    parser.add_argument("--version", action="version", version=f"relay-review {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, summary, _) in COMMANDS.items():
        if name == command:
            importlib.import_module(module_name).add_parser(sub)
            # -v after the command too; SUPPRESS keeps a -v given before it
            sub.choices[name].add_argument(
                "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE
            )
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relay-review`` console script (``argv`` None: the process's own
    command line; see :func:`imports_uncollected`)."""
    process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    command = chosen_command(argv)
    if process:
        # relay-review uses no pydantic plugin, and looking for them (entry points) reads the
        # metadata of every installed package at the first model built: 1 % of the start-up.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if command and COMMANDS[command].sends and not {"-h", "--help"} & set(argv):
        _tls.warm()  # on the other core, while the command's modules import
    with imports_uncollected(process):
        parser = build_parser(command)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # per-request lines add noise, not facts
    module = importlib.import_module(COMMANDS[args.command].module)
    try:
        with cancellable(args.command):
            code = int(module.run(args))
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return code
    except BrokenPipeError:
        return _reader_gone()
    except UsageError as exc:
        print(f"relay-review {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Cancelled as cancelled:  # the handler already said so, in one line
        return cancelled.code


@contextlib.contextmanager
def imports_uncollected(process: bool) -> Iterator[None]:
    """While the command's modules import, no garbage collection; after it, what they made is
    frozen out of every later collection (:func:`gc.freeze`), when ``process`` (the program's
    own start, not a caller's ``main([...])``, whose objects are not ours to freeze).

    Importing pydantic, PyGithub and the command's models makes some 10^5 long-lived objects
    and almost no garbage, yet each collection of the oldest generation walks all of them, and
    so does the interpreter's exit: 40 to 140 ms of CPU per start (``bench/startup.py``).
    Frozen objects are still freed by reference counting; only a cycle among them stays.
    """
    if not process:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


#: Exit code when stdout's reader went away (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _reader_gone() -> int:
    """stdout's reader closed the pipe: point stdout at /dev/null (so the interpreter's final
    flush cannot fail again and print a traceback) and exit quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass
    return EXIT_BROKEN_PIPE
