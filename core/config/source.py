"""Reading t25.yaml with its positions, and turning mistakes into one-line errors.

Pydantic reports a problem as a `loc` tuple such as `("roles", "dev", 1, "modle")`;
the YAML node tree knows the line each of those keys sits on. `ConfigSource` keeps
both, so every `ConfigError` can read

    t25.yaml:14: limits.max_diff_lines: expected a whole number, got 'lots'

A typo must never be silently ignored, so an unknown key names the keys allowed at
that place (and the closest one), and a key written twice is an error rather than
"the last one wins".
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from core.errors import ConfigError

Loc = tuple[str | int, ...]

FIX_HINT = "every key is documented, with its default, in t25.yaml.example"


@dataclass(frozen=True)
class ConfigSource:
    """A parsed config file: plain data for pydantic, nodes for line numbers."""

    name: str  # the file as messages show it
    data: Any
    node: yaml.Node | None

    def line_of(self, loc: Loc) -> int:
        """The 1-based line of the deepest part of `loc` present in the file."""
        node = self.node
        if node is None:
            return 1
        mark = node.start_mark
        for part in loc:
            found = _child(node, part)
            if found is None:
                break
            mark, node = found
        return mark.line + 1

    def error(self, loc: Loc, problem: str, *, hint: str | None = FIX_HINT) -> ConfigError:
        where = f"{dotted(loc)}: " if loc else ""
        return ConfigError(f"{self.name}:{self.line_of(loc)}: {where}{problem}", hint=hint)


def _child(node: yaml.Node, part: str | int) -> tuple[yaml.Mark, yaml.Node] | None:
    """Where `part` of `node` starts (a mapping's key, a sequence's item) and its node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key.start_mark, value
    elif (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        item: yaml.Node = node.value[part]
        return item.start_mark, item
    return None


def dotted(loc: Loc) -> str:
    """`("roles", "dev", 1, "modle")` -> `roles.dev[1].modle`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


# -- parsing -----------------------------------------------------------------------------


def parse_source(text: str, name: str) -> ConfigSource:
    """Parse YAML text into data and nodes; syntax errors and duplicate keys are refused."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _refuse_duplicate_keys(node, name)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = _syntax_problem(exc)
        raise ConfigError(
            f"{name}:{line}: invalid YAML: {problem}",
            hint=f"check the indentation and quoting near line {line}",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: invalid YAML: {exc}", hint=FIX_HINT) from None
    finally:
        loader.dispose()
    return ConfigSource(name=name, data=data, node=node)


def _syntax_problem(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's wording, with the usual cause spelled out for the common cases."""
    problem = exc.problem or ""
    if exc.context and (not problem or problem.startswith("but ")):
        problem = f"{exc.context}, {problem}".rstrip(", ")
    if "'\\t'" in problem:  # PyYAML shows the tab as '\t'
        return "a tab character; indent with spaces"
    if problem.startswith("expected <block end>"):
        return f"{problem} (is this line indented like the lines above it?)"
    if problem.startswith("mapping values are not allowed"):
        return f"{problem} (quote a value that contains ': ', or check the indentation)"
    return problem or "not valid YAML"


def _refuse_duplicate_keys(root: yaml.Node, name: str) -> None:
    """YAML keeps the last of two equal keys; T25 refuses, since one of them is a mistake."""
    for path, node in walk_nodes(root):
        if not isinstance(node, yaml.MappingNode):
            continue
        first: dict[str, int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                continue
            line = key.start_mark.line + 1
            if key.value in first:
                where = dotted((*path, key.value))
                raise ConfigError(
                    f"{name}:{line}: {where}: duplicate key (first set on line "
                    f"{first[key.value]}); a key may appear once",
                    hint="delete one of the two",
                )
            first[key.value] = line


def walk_nodes(root: yaml.Node) -> Iterator[tuple[Loc, yaml.Node]]:
    """Every node with its path, parents before children; aliases are visited once."""
    seen: set[int] = set()
    stack: list[tuple[Loc, yaml.Node]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield path, node
        if isinstance(node, yaml.MappingNode):
            children = [
                ((*path, key.value if isinstance(key, yaml.ScalarNode) else "?"), value)
                for key, value in node.value
            ]
        elif isinstance(node, yaml.SequenceNode):
            children = [((*path, i), item) for i, item in enumerate(node.value)]
        else:
            children = []
        stack.extend(reversed(children))


# -- validation errors -------------------------------------------------------------------

_EXPECTED = {
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "string_type": "expected text (quote it if it looks like a number or true/false)",
    "string_too_short": "expected non-empty text",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a mapping of keys",
    "model_type": "expected a mapping of keys",
    "model_attributes_type": "expected a mapping of keys",
    "path_type": "expected a path",
    "greater_than": "expected a number greater than {gt}",
    "greater_than_equal": "expected a number of at least {ge}",
    "literal_error": "expected one of {expected}",
}


def validation_error(
    source: ConfigSource, exc: ValidationError, schema: type[BaseModel]
) -> ConfigError:
    """The first problem by line, as one line, with a count of the rest."""
    errors = sorted(exc.errors(), key=lambda e: source.line_of(_clean(e["loc"])))
    first = errors[0]
    loc = _clean(first["loc"])
    if first["type"] == "invalid_key" or first["loc"][-1:] == ("[key]",):  # e.g. `1: ...`
        loc = (*loc[:-1], str(loc[-1]))
        problem = f"expected a key made of text, got {show(first['input'])}"
    else:
        problem = _describe(first, loc, schema)
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more)"
    return source.error(loc, problem)


def _clean(loc: Sequence[str | int]) -> Loc:
    # Dict-key errors end in a synthetic "[key]" part that is not in the file.
    return tuple(part for part in loc if part != "[key]")


def _describe(error: Any, loc: Loc, schema: type[BaseModel]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return _unknown_key(str(loc[-1]), allowed_keys(schema, loc[:-1]))
    if kind == "missing":
        return "required key is missing"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind == "too_short":
        wanted = "one item" if ctx.get("min_length") == 1 else f"{ctx.get('min_length')} items"
        return f"expected at least {wanted}, got {ctx.get('actual_length', 'fewer')}"
    template = _EXPECTED.get(kind)
    if template is None:
        expected = re.sub(r"^Input should be ", "expected ", error["msg"])
    else:
        expected = template.format(**ctx)
    return f"{expected}, got {show(error['input'])}"


def _unknown_key(key: str, known: list[str]) -> str:
    if not known:
        return "unknown key (nothing is allowed here)"
    return unknown_name("key", key, known, quoted=False)


def unknown_name(noun: str, name: str, known: list[str], *, quoted: bool = True) -> str:
    """`unknown adapter 'clade' (known: …); did you mean 'claude'?`"""
    shown = f" {show(name)}" if quoted else ""
    return f"unknown {noun}{shown} (known: {', '.join(known)}){did_you_mean(name, known)}"


def did_you_mean(name: str, known: list[str]) -> str:
    """`; did you mean 'claude'?` when one of `known` is close to `name`, else ''."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def show(value: Any) -> str:
    """A value as a person would recognise it from their YAML."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return str(value)


# -- which keys a place allows -----------------------------------------------------------


def allowed_keys(schema: type[BaseModel], loc: Loc) -> list[str]:
    """The field names of the model that sits at `loc` under `schema`, in declared order."""
    model = _model_at(schema, loc)
    return list(model.model_fields) if model else []


def _model_at(tp: Any, loc: Loc) -> type[BaseModel] | None:
    for part in loc:
        tp = _unwrap(tp)
        origin = get_origin(tp)
        if _is_model(tp):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            tp = field.annotation
        elif origin in (list, tuple, set, frozenset):
            tp = get_args(tp)[0]
        elif origin is dict:
            tp = get_args(tp)[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if _is_model(tp) else None


def _unwrap(tp: Any) -> Any:
    """Strip Annotated and Optional so only the container or model remains."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(tp) if arg is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)
