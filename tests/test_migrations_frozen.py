"""Released migrations never change: an install that ran one will not run it again, so an edit
reaches only new databases and the two kinds drift apart (a re-chained 0008 left databases
stamped past it without its table). A new migration adds its line here when it is released;
a wrong or missing line fails.

    sha256sum migrations/versions/NNNN_name.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

VERSIONS = Path(__file__).resolve().parents[1] / "migrations" / "versions"

RELEASED = {
    "0001_core.py": "55717a7e0803ed53767f5dfaa92b48733da73e2eabcc65d0341bd351294cf308",
    "0002_code.py": "11e23f7648fa0e83d6289b92fa89dfe65982fba1509866da4692cbb86308447a",
    "0003_memory.py": "d22620239531ffe2368d96218af5e584c3b7d834c7f27a0cec37bb050955e40e",
    "0004_sessions.py": "66a8216373eee0f67f4ebc26aaa3df60657ed566c0284faf7ff69baa09ff7500",
    "0005_tool_usage.py": "8956cb9e2dc1880a180e6c4c89f8853486df7aff034fb8d0ea67929742bad380",
    "0006_merge.py": "c3860337ffc076934b2a207deec33004af2e45816e13d017c7d6cbae4dcc4876",
    "0007_schedule.py": "889ffecfebbe1539179e668023015a42ccae20c9ce810b98d9cfe8baf138fe0e",
    "0008_model_usage.py": "b098926a771c52103f05ce2e33ee3815cb3c42cca1419fd40f6627ddf26b0a22",
    "0009_message_kind.py": "6a5db8b159d9c6a4661940f20dcf05a5047da3eebb30351a296ba1bfdcb51ef0",
    "0010_workers.py": "ba77f4591e53b889ac01b3471aae29e8c63fd082c484d985e4fd0e66b5eb0609",
    "0011_compressions_memory.py": "e3e20a5d14bb1f331565928a0fcdd02a5912ecc824d8bc2c541a905f60a2b1d7",  # noqa: E501
    "0012_voice.py": "4ae12126a473b524ab2995dbe0c1393010612d032ca1e8a4eab054d56002f714",
    "0013_outbox.py": "8abc4a18237738decfcf8433e9e66652146df95dc502bfc5ff8c9cea722f5b9e",
    "0014_approvals.py": "5843bea05f6b4f719f842ba051c4c86559101060177ada5933f4ee8d1a288b96",
    "0015_onboard_access.py": "38459ead564143c641ac5b4b9a7f002e6757a741554ec6de2fad6f3a66efe75e",
    "0016_code_jobs_opencode.py": "a110fc70666c70fca35081f01bddd6d9e6dacdd7b3432dc4f15d55660ea4f0f7",  # noqa: E501
    "0017_resume_turns.py": "3f545c6d830bf5262f017b9a4c30386039d6dc1081285906c5cc0f1f09f52be1",
    "0018_trust_approval_scope.py": "3cc423cc1fac335c45ff0e2c8ddb3e083370ddc4a20990559a64ac2a391d0e93",  # noqa: E501
    "0019_outages_outbox_files.py": "a3ad663b7e39144f84a1556c0749e98e4d6b559cf56d8b4a04c1479130f5ca0a",  # noqa: E501
    "0020_sessions_summary_claims.py": "2f9365f46d13da6edcab7d7ad79769a3a651c25fd95c9d51da82944d5128a195",  # noqa: E501
    "0021_harden_repair_usage.py": "459f933fabef79c1c1f2408757c438e25fadbc776f359688c0fa8b63b82d2bfa",  # noqa: E501
    "0022_usage_written_calls.py": "2e7fbbed5108567c9d9adec06d9fd5929300d9e54837fbc406f8b82462e4e00f",  # noqa: E501
    "0023_inbox_updates.py": "b9c91b36d766a1544651af88a3d8bdf06da49d811ac5eb229559333acdc5c280",
    "0024_memories_long_rank.py": "98a7944d66f5cc9cb975693c190548e2f7ab21f728a4458e1bd12c29820dadd3",  # noqa: E501
    "0027_message_chat.py": "d06f95b72a47339568ccbb3cdd81c079e7a22b48f84a3ccce95df0a090842fec",
    "0032_checkins_skills.py": "b6ec897661cc37cc6b2e864a2c533487828e19b0b9c7157389f8ef765051b4bc",
    "0034_checkin_groups.py": "dcb2d622728f01e660550bea0f6408f3f051fbe9500d213a92cb8cf8ee02516b",
    "0037_memories_user_alive.py": "88dd8640fda8d433416bed6968d110816d5fcf8b1f88fa9e042e9f7ce10d9886",  # noqa: E501
    "0029_dashboard_tokens.py": "80af30e87a58beae8fa98966b3a401dfae28894b9374f16b3d0801844ec73cb4",
    "0028_chat_scope_superseded.py": "1a1d92f0bd799d080cd92a0cb078aae10e7f6707466fec9eb9266bbe53e474ca",  # noqa: E501
}


def test_released_migrations_are_unchanged() -> None:
    changed = [
        name
        for name, digest in RELEASED.items()
        if not (VERSIONS / name).exists()
        or hashlib.sha256((VERSIONS / name).read_bytes()).hexdigest() != digest
    ]
    assert not changed, f"released migrations changed or gone: {changed}; add a new one instead"


def test_every_migration_is_listed() -> None:
    unlisted = sorted(p.name for p in VERSIONS.glob("*.py") if p.name not in RELEASED)
    assert not unlisted, f"add {unlisted} to RELEASED with its sha256"
