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


class Optionals(BaseModel):
    action: Literal["store", "recall"]
    note: str | None = Field(None, description="what to keep", max_length=20)
    layer: Literal["long", "short"] | None = None
    default: str = Field("x", pattern="^[a-z]+$")  # fields may be called like keywords
    pattern: int | None = None


def test_optional_fields_are_their_type_and_checks_stay_with_the_validation() -> None:
    """Small models carry every token of the tools: `anyOf [X, null]` + `default: null` is
    X left out of `required`; defaults, lengths and patterns are the validation's."""
    schema = json_schema(Optionals)
    assert schema["properties"] == {
        "action": {"enum": ["store", "recall"], "type": "string"},
        "note": {"type": "string", "description": "what to keep"},
        "layer": {"enum": ["long", "short"], "type": "string"},
        "default": {"type": "string"},
        "pattern": {"type": "integer"},
    }
    assert schema["required"] == ["action"]
    assert Optionals.model_validate({"action": "store"}).default == "x"
    assert Optionals.model_validate({"action": "store", "note": None}).note is None
