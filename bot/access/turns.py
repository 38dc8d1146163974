"""A turn in flight for a chat the owner has just removed (its person, or its group) stops
before its next model call: the approval question it waited on closed, and nothing more is
spent or said for them but the one line that it stopped."""

from __future__ import annotations

from bot.access.gate import AccessList
from tools.hooks import HookRefusal, ModelRequest, TurnHooks

STOPPED = "The owner removed this chat's access, so I stopped here."


class StopRemoved(TurnHooks):
    def __init__(self, access: AccessList) -> None:
        self.access = access

    async def on_model_request(self, req: ModelRequest) -> None:
        chat = req.ctx.chat_id
        if chat is not None and chat in self.access.gone and not await self.access.serves(chat):
            raise HookRefusal(STOPPED)
