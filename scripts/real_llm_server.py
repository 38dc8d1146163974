"""llama.cpp's HTTP server from the xllamacpp wheel, started with llama-server's own flags
(the ones `make test-real` and bench/prefix_cache.py pass). Run by the venv that
scripts/real_llm.py makes, through the `llama-server` wrapper it writes.

Why xllamacpp: it embeds llama.cpp's own server (the same HTTP API, chat templates, tool-call
parsers, prompt cache and `timings`), and its Linux CPU wheel is built for a portable x86-64
with AVX2, so it runs on any current CPU. Prebuilt llama-server binaries on PyPI are built
with -march=native for the builder's CPU (AVX-512, AMX) and die with SIGILL elsewhere.

    python real_llm_server.py -m MODEL [--host H] [--port P] [--alias NAME] [-c N] [-t N]
                              [-tb N] [-np N] [-b N] [-ub N] [--jinja] [--embeddings]
                              [--pooling mean|cls|last|none]
    python real_llm_server.py --version

It serves until it is terminated.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import xllamacpp as xlc


def params(args: argparse.Namespace) -> xlc.CommonParams:
    p = xlc.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    if args.alias:
        p.model_alias = {args.alias}
    p.n_ctx = args.ctx_size
    p.n_parallel = args.parallel
    p.n_batch = args.batch_size
    p.n_ubatch = args.ubatch_size
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads_batch or args.threads
    p.use_jinja = args.jinja
    if args.embeddings:
        p.embedding = True
        pooling = f"LLAMA_POOLING_TYPE_{args.pooling.upper()}"
        p.pooling_type = xlc.llama_pooling_type.__members__[pooling]
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="store_true")
    parser.add_argument("-m", "--model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--alias", default="")
    parser.add_argument("-c", "--ctx-size", type=int, default=4096)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("-tb", "--threads-batch", type=int, default=0)
    parser.add_argument("-np", "--parallel", type=int, default=1)
    parser.add_argument("-b", "--batch-size", type=int, default=2048)
    parser.add_argument("-ub", "--ubatch-size", type=int, default=512)
    parser.add_argument("--jinja", action="store_true")
    parser.add_argument("--embeddings", action="store_true")
    parser.add_argument("--pooling", default="mean", choices=["mean", "cls", "last", "none"])
    args = parser.parse_args()
    if args.version:
        print(f"xllamacpp {xlc.__version__}: llama.cpp server, {xlc.get_system_info().strip()}")
        return
    if not args.model:
        parser.error("-m MODEL is required")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = xlc.Server(params(args))  # listening once this returns
    print(f"listening on {server.listening_address}", file=sys.stderr, flush=True)
    stop.wait()
    os._exit(0)  # the server's native threads would hold a normal exit


if __name__ == "__main__":
    main()
