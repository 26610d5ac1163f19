"""Routing rules: which records the router copies from one cell's physical topic to other cells'.

A rule names a source cell and a logical topic, the target cells, and optionally a predicate (the same
:class:`~sofakafka.ldc.filters.RecordFilter` a subscription uses: key equals / key prefix / header equals).
The router consumes ``$NS.<from>.<topic>`` and writes each matching record, with its key, value, headers and
timestamp, to ``$NS.<to>.<target topic>`` for every target cell (the target topic defaults to the same
logical topic), adding the cell it came from to the ``__ROUTER.PATH`` header. A record is never copied into
a cell already on its path, so rules in both directions (R1 -> R2 and R2 -> R1) cannot loop.

File format (TOML, or the same shape as JSON, which is how rules are stored)::

    [[rules]]
    name = "bills-to-r2"           # unique; lag and status are reported per rule
    from = "R1"
    topic = "bills"
    to = ["R2"]
    # target_topic = "bills"       # default: the same logical topic
    [rules.match]                  # optional; every condition given must hold
    headers = { "__UNIT.TARGET_R" = "R2" }   # a value or a list of values
    # key = ["k1"]; key_prefix = ["B-"]

:meth:`RoutingRules.from_dict` checks the shape; :meth:`RoutingRules.check` checks the cells and names
against an :class:`~sofakafka.ldc.model.LdcModel`. Errors are :class:`~sofakafka.ldc.model.LdcError` whose
part names the rule (``rules[0] (bills-to-r2).to``).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sofakafka.ldc.filters import FilterError, RecordFilter
from sofakafka.ldc.model import LdcError, LdcModel, check_name

ROUTER_PATH_HEADER = "__ROUTER.PATH"
"""Comma-separated cells a record has been copied out of, oldest first."""
RULES_FORMAT_VERSION = 1

_RULE_KEYS = ("name", "from", "topic", "to", "target_topic", "match")
_MATCH_KEYS = ("headers", "key", "key_prefix")
_RULE_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class RoutingRule:
    name: str
    source_cell: str
    topic: str
    target_cells: tuple[str, ...]
    target_topic: str = ""
    match: RecordFilter = field(default_factory=RecordFilter)

    @property
    def effective_target_topic(self) -> str:
        return self.target_topic or self.topic

    def source_physical(self, model: LdcModel) -> str:
        return model.physical_topic(self.source_cell, self.topic)

    def target_physical(self, model: LdcModel, cell: str) -> str:
        return model.physical_topic(cell, self.effective_target_topic)

    def targets_for(self, path: Sequence[str]) -> list[str]:
        """Target cells a record whose ``__ROUTER.PATH`` is ``path`` may still be copied into."""
        seen = set(path) | {self.source_cell}
        return [c for c in self.target_cells if c not in seen]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "from": self.source_cell, "topic": self.topic,
                               "to": list(self.target_cells)}
        if self.target_topic:
            out["target_topic"] = self.target_topic
        if not self.match.is_empty:
            match: dict[str, Any] = {}
            if self.match.key_equals:
                match["key"] = [k.decode() for k in self.match.key_equals]
            if self.match.key_prefixes:
                match["key_prefix"] = [k.decode() for k in self.match.key_prefixes]
            if self.match.headers:
                match["headers"] = {n: [v.decode() for v in vs] for n, vs in self.match.headers}
            out["match"] = match
        return out


def _strings(part: str, value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and value:
        return list(value)
    raise LdcError(part, f"must be a string or a non-empty list of strings, got {value!r}")


def _parse_match(part: str, data: object) -> RecordFilter:
    if not isinstance(data, Mapping):
        raise LdcError(part, "must be a table with headers, key and/or key_prefix")
    extra = sorted(set(data) - set(_MATCH_KEYS))
    if extra:
        raise LdcError(f"{part}.{extra[0]}", f"unknown key (known: {', '.join(_MATCH_KEYS)})")
    headers: dict[str, list[str]] = {}
    raw_headers = data.get("headers", {})
    if not isinstance(raw_headers, Mapping):
        raise LdcError(f"{part}.headers", "must be a table of header name = value(s)")
    for name, values in raw_headers.items():
        headers[name] = _strings(f"{part}.headers.{name}", values)
    try:
        return RecordFilter.build(
            key_equals=_strings(f"{part}.key", data["key"]) if "key" in data else (),
            key_prefixes=_strings(f"{part}.key_prefix", data["key_prefix"]) if "key_prefix" in data else (),
            headers=headers,
        )
    except FilterError as exc:
        raise LdcError(part, str(exc)) from None


def _parse_rule(index: int, data: object) -> RoutingRule:
    label = f"rules[{index}]"
    if not isinstance(data, Mapping):
        raise LdcError(label, "must be a table")
    name = data.get("name")
    if isinstance(name, str) and name:
        label = f"rules[{index}] ({name})"
    extra = sorted(set(data) - set(_RULE_KEYS))
    if extra:
        raise LdcError(f"{label}.{extra[0]}", f"unknown key (known: {', '.join(_RULE_KEYS)})")
    for required in ("name", "from", "topic", "to"):
        if required not in data:
            raise LdcError(f"{label}.{required}", "missing")
    if not isinstance(name, str) or _RULE_NAME.fullmatch(name) is None:
        raise LdcError(f"{label}.name", f"{name!r} must be ASCII letters, digits, '.', '_' or '-'")
    source = check_name(f"{label}.from", data["from"])
    topic = check_name(f"{label}.topic", data["topic"])
    targets = [check_name(f"{label}.to", c) for c in _strings(f"{label}.to", data["to"])]
    if len(set(targets)) != len(targets):
        raise LdcError(f"{label}.to", f"names a cell twice: {targets}")
    if source in targets:
        raise LdcError(f"{label}.to", f"copies {source} into itself")
    target_topic = ""
    if "target_topic" in data:
        target_topic = check_name(f"{label}.target_topic", data["target_topic"])
    match = _parse_match(f"{label}.match", data["match"]) if "match" in data else RecordFilter()
    return RoutingRule(name=name, source_cell=source, topic=topic, target_cells=tuple(targets),
                       target_topic=target_topic, match=match)


@dataclass(frozen=True)
class RoutingRules:
    rules: tuple[RoutingRule, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for i, rule in enumerate(self.rules):
            if rule.name in seen:
                raise LdcError(f"rules[{i}] ({rule.name}).name", "another rule has the same name")
            seen.add(rule.name)

    def check(self, model: LdcModel) -> None:
        """Every cell a rule names is a cell of ``model`` and every physical name it implies is legal."""
        for i, rule in enumerate(self.rules):
            label = f"rules[{i}] ({rule.name})"
            for key, cell in [("from", rule.source_cell)] + [("to", c) for c in rule.target_cells]:
                if not model.has_cell(cell):
                    known = ", ".join(model.cell_names) or "none"
                    raise LdcError(f"{label}.{key}", f"{cell!r} is not a cell of instance {model.instance} "
                                                     f"(cells: {known})")
            try:
                rule.source_physical(model)
                for cell in rule.target_cells:
                    rule.target_physical(model, cell)
            except LdcError as exc:
                raise LdcError(f"{label}.{exc.part}", exc.reason) from None

    def cells_used(self) -> set[str]:
        return {c for r in self.rules for c in (r.source_cell, *r.target_cells)}

    def by_name(self, name: str) -> RoutingRule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise LdcError("rule", f"no rule named {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"version": RULES_FORMAT_VERSION, "rules": [r.to_dict() for r in self.rules]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object) -> RoutingRules:
        if not isinstance(data, Mapping):
            raise LdcError("rules", f"must be a table/object, got {type(data).__name__}")
        extra = sorted(set(data) - {"version", "rules"})
        if extra:
            raise LdcError(str(extra[0]), "unknown key (known: rules)")
        version = data.get("version", RULES_FORMAT_VERSION)
        if version != RULES_FORMAT_VERSION:
            raise LdcError("version", f"{version!r} is not a rules format this version reads ({RULES_FORMAT_VERSION})")
        items = data.get("rules", [])
        if not isinstance(items, list):
            raise LdcError("rules", "must be an array of tables ([[rules]])")
        return cls(tuple(_parse_rule(i, r) for i, r in enumerate(items)))

    @classmethod
    def from_text(cls, text: str, filename: str = "") -> RoutingRules:
        """JSON when the file name ends in .json or the text starts with '{', TOML otherwise."""
        if filename.endswith(".json") or text.lstrip().startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise LdcError("JSON", str(exc)) from None
        else:
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise LdcError("TOML", str(exc)) from None
        return cls.from_dict(data)


def parse_path(headers: Sequence[tuple[str, bytes | None]]) -> list[str]:
    """The cells in a record's ``__ROUTER.PATH`` header (the last one if it is repeated)."""
    value: bytes | None = None
    for name, v in headers:
        if name == ROUTER_PATH_HEADER:
            value = v
    if not value:
        return []
    return [c for c in value.decode("utf-8", "replace").split(",") if c]


def with_path(headers: Sequence[tuple[str, bytes | None]], source_cell: str) -> list[tuple[str, bytes | None]]:
    """The headers of a copy: the same ones, with ``source_cell`` appended to ``__ROUTER.PATH``."""
    path = parse_path(headers)
    path.append(source_cell)
    out = [(n, v) for n, v in headers if n != ROUTER_PATH_HEADER]
    out.append((ROUTER_PATH_HEADER, ",".join(path).encode()))
    return out
