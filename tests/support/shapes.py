"""Checking a command's `--json` output against the JSON Schema of its shape
(t25_tui.cli.shapes), with a validator that checks formats (`date-time`) too."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs

from t25_tui.cli.shapes import SHAPES

UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def conforms(shape: str, text: str) -> Any:
    """The output, parsed, after checking it against `shape`'s schema (raises if not)."""
    data = json.loads(text)
    schema = SHAPES[shape].model_json_schema(mode="serialization")
    jsonschema_rs.validator_for(schema, validate_formats=True).validate(data)
    return data
