"""The code tool's settings (CODE_*); bot/config.py reads them from the environment."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

OnOff = Literal["on", "off"]


class CodeSettings(BaseModel):
    code_network: OnOff = "on"
    # With the network on, code reaches public addresses only (web_fetch's rule); on: all.
    code_private_networks: OnOff = "off"
    code_sandbox: Literal["on", "off", "unsafe-basic"] = "on"
    # Who writes code for `generate`: OpenCode (a coding agent, run in the sandbox; the
    # default when `make install-opencode` installed it and bubblewrap works) or one model
    # call returning one program. None: OpenCode where it can run, else the model.
    code_generator: Literal["opencode", "model"] | None = None
    # An OpenCode job's budgets: its whole run, and the resident memory of its sandbox.
    code_generate_timeout_s: int = Field(default=900, ge=10)
    code_generate_memory_mb: int = Field(default=2048, ge=256)
