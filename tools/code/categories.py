"""Naming why a run failed, from bun's real messages (bun 1.x wording)."""

from __future__ import annotations

import re
import signal

from tools.code.runner import RunResult

# Bun's parser prints `error: Unexpected ;` or `error: Expected "(" but found ...`,
# never the word SyntaxError; SyntaxError: is the runtime's (eval, new Function).
_SYNTAX = re.compile(
    r"^(?:error: (?:Unexpected\b|Expected\b|Unterminated\b|Syntax error|Invalid (?:assignment"
    r"|regular expression|character|escape|Unicode|identifier|optional chain)|Legacy octal"
    r'|Multiple exports|"await" can only|Cannot use "(?:await|yield)"|The constant)'
    r"|SyntaxError: (?!JSON Parse error))",
    re.MULTILINE,
)
_IMPORT = re.compile(
    r"Cannot find (?:package|module)|Could not resolve|ResolveMessage|"
    r"Failed to (?:load|resolve) (?:module|package)"
)
_NETWORK = re.compile(
    r"ECONNREFUSED|ConnectionRefused|Unable to connect|ENOTFOUND|getaddrinfo|EAI_AGAIN|"
    r"ETIMEDOUT|ECONNRESET|ConnectionClosed|ENETUNREACH|EHOSTUNREACH|FailedToOpenSocket|"
    r"NetworkUnreachable|DNS lookup|certificate"
)
_MEMORY = re.compile(r"Out of memory|OutOfMemory|out of memory|Allocation failed|JS heap")
_SIGNAL_BASE = 128


def classify(r: RunResult) -> str | None:
    """The error category of a run, or None when it succeeded."""
    if r.sandbox_error:
        return "sandbox"
    err = r.stderr
    if r.output_limited or r.disk_limited:
        return "output_limit"
    xcpu = _SIGNAL_BASE + int(signal.SIGXCPU)
    if r.timed_out or r.exit_code == xcpu:
        return "timeout"  # wall clock, or the CPU-seconds limit
    if r.exit_code == 0:
        return None
    if r.exit_code is None:
        return "killed"
    if re.match(r"^(?:bwrap|setpriv|unshare|sandbox): ", err):
        return "sandbox"
    if _MEMORY.search(err) or r.exit_code == _SIGNAL_BASE + int(signal.SIGSEGV):
        return "memory"
    if _IMPORT.search(err):
        return "import"
    if _SYNTAX.search(err):
        return "syntax"
    if _NETWORK.search(err):
        return "network"
    if re.search(r"^TypeError\b", err, re.MULTILINE):
        return "type"
    if re.search(r"^ReferenceError\b", err, re.MULTILINE):
        return "reference"
    if r.exit_code > _SIGNAL_BASE:
        return "killed"
    return "runtime"
