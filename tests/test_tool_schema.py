"""Tool schemas: compact, inlined, and faithful to the params model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.base import json_schema


class Inner(BaseModel):
    kind: Literal["a", "b"]


class Params(BaseModel):
    title: str = Field(description="a field that happens to be called title")
    inner: Inner | None = None
    limit: int = Field(default=5, ge=1, le=10)


def test_schema_keeps_a_field_named_title_and_inlines_refs() -> None:
    schema = json_schema(Params)
    assert set(schema["properties"]) == {"title", "inner", "limit"}
    assert schema["properties"]["title"] == {
        "description": "a field that happens to be called title",
        "type": "string",
    }
    assert "$defs" not in schema and "$ref" not in str(schema)
    assert "title" not in schema  # the model's own title is dropped
    assert schema["required"] == ["title"]
    assert schema["properties"]["limit"]["maximum"] == 10
