"""The code tool's settings (CODE_*); bot/config.py reads them from the environment."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

# An OpenCode job's budgets: its whole run, and the resident memory of its sandbox. Not
# settings (CODE_GENERATE_TIMEOUT_S, CODE_GENERATE_MEMORY_MB were): a quarter of an hour
# and 2 GiB carry the jobs OpenCode does, and a job past them is one the model should
# split, not one an operator should have to allow.
GENERATE_TIMEOUT_S = 900
GENERATE_MEMORY_MB = 2048


class CodeSettings(BaseModel):
    # What the code's network reaches: off; on (public addresses only, web_fetch's rule);
    # all (loopback, private and link-local addresses too; CODE_PRIVATE_NETWORKS=on was).
    code_network: Literal["off", "on", "all"] = "on"
    code_sandbox: Literal["on", "off", "unsafe-basic"] = "on"
    # Who writes code for `generate`: OpenCode (a coding agent, run in the sandbox; the
    # default when `make install-opencode` installed it and bubblewrap works) or one model
    # call returning one program. None: OpenCode where it can run, else the model.
    code_generator: Literal["opencode", "model"] | None = None
