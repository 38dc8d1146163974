"""The code tool's settings (CODE_*); bot/config.py reads them from the environment."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

OnOff = Literal["on", "off"]


class CodeSettings(BaseModel):
    code_network: OnOff = "on"
    # With the network on, code reaches public addresses only (web_fetch's rule); on: all.
    code_private_networks: OnOff = "off"
    code_sandbox: Literal["on", "off", "unsafe-basic"] = "on"
