"""The web_fetch tool's settings (FETCH_*); bot/config.py reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class FetchSettings(BaseModel):
    # on: pages on private networks (LAN, localhost) may be fetched too.
    fetch_private_networks: Literal["on", "off"] = "off"
