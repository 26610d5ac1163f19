"""The LDC model: an instance, its cells and their zones and cities, and the names and headers they imply.

Terms (SOFAStack's LDC, as the product brief restates it):

* **instance** (``$NS``): one tenant's namespace on the shared physical cluster, e.g. ``ANT``.
* **cell** (a "unit"): where applications run. Every cell is of one **zone** type:

  - **RZone** (regional zone): holds user-sharded data; each RZone owns a set of **uids**, the user shards
    0-99 (by SOFA's convention the last two digits of a user id), and no two RZones own the same uid;
  - **GZone** (global zone): data that cannot be sharded; an instance has at most one;
  - **CZone** (city zone): data shared within a city; at most one per city.
* **city**: where a cell is deployed; a cell's CZone is the CZone of its city.

Names. A logical topic ``T1`` used by an application of instance ``ANT`` in cell ``CELL1`` is the physical
topic ``ANT.CELL1.T1``; a logical group ``G1`` is the physical group ``ANT.CELL1.G1``. Instance, cell, city and
logical names take ASCII letters, digits, ``_`` and ``-`` only: a dot would make the physical name ambiguous,
and anything else is not a legal Kafka topic name. Errors are :class:`LdcError`, whose ``part`` names what is
wrong ("cell", "logical topic", "cells.R1.uids", ...).

Unit headers, set by the sending client from the model (:meth:`LdcModel.unit_headers`):
``__UNIT.ORIUNIT`` = the sending cell; ``__UNIT.TARGET_G`` = the instance's GZone; ``__UNIT.TARGET_C`` = the
CZone of the sending cell's city; ``__UNIT.TARGET_R`` = the RZone that owns the record's uid, only when a uid
is given. A header whose zone does not exist in the model is left out.

Subscriptions (:class:`SubscriptionMode`), all with the physical group on the physical topic of the cell:
Local takes records whose ``__UNIT.ORIUNIT`` is the cell; RZone (only in an RZone) those whose
``__UNIT.TARGET_R`` is the cell; GZone (only in the GZone) ``__UNIT.TARGET_G``; CZone (only in a CZone)
``__UNIT.TARGET_C``. :meth:`LdcModel.subscription_filter` gives each as a :class:`RecordFilter`, which is
what the broker applies to stock consumers and what the LDC consumer applies itself.

File format (TOML, read with the standard library's ``tomllib``; the same shape as JSON is accepted and is
how the model is stored)::

    instance = "ANT"

    [cells.R1]
    zone = "RZone"          # RZone | GZone | CZone (any case)
    city = "hangzhou"
    uids = ["00-49"]        # RZone only: ranges "lo-hi" or single "07", within 00-99

    [cells.GZ00]
    zone = "GZone"
    city = "hangzhou"
"""

from __future__ import annotations

import enum
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sofakafka.ldc.filters import RecordFilter

UNIT_ORIUNIT = "__UNIT.ORIUNIT"
UNIT_TARGET_G = "__UNIT.TARGET_G"
UNIT_TARGET_C = "__UNIT.TARGET_C"
UNIT_TARGET_R = "__UNIT.TARGET_R"

UID_SHARDS = 100
"""uids are 0 .. UID_SHARDS-1."""
MAX_TOPIC_NAME_LENGTH = 249
MODEL_FORMAT_VERSION = 1

_NAME = re.compile(r"[A-Za-z0-9_-]+")


class LdcError(ValueError):
    """A name, model or header that LDC refuses; ``part`` says which part is wrong."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(f"{part}: {reason}")
        self.part = part
        self.reason = reason


class Zone(enum.Enum):
    RZONE = "RZone"
    GZONE = "GZone"
    CZONE = "CZone"

    @classmethod
    def parse(cls, text: object, part: str) -> Zone:
        if isinstance(text, str):
            for zone in cls:
                if zone.value.lower() == text.strip().lower():
                    return zone
        raise LdcError(part, f"{text!r} is not a zone (RZone, GZone or CZone)")


class SubscriptionMode(enum.Enum):
    LOCAL = "Local"
    RZONE = "RZone"
    GZONE = "GZone"
    CZONE = "CZone"

    @classmethod
    def parse(cls, text: str) -> SubscriptionMode:
        for mode in cls:
            if mode.value.lower() == text.strip().lower():
                return mode
        raise LdcError("subscription mode", f"{text!r} is not one of Local, RZone, GZone, CZone")

    @property
    def header(self) -> str:
        return _MODE_HEADERS[self]


_MODE_HEADERS = {
    SubscriptionMode.LOCAL: UNIT_ORIUNIT,
    SubscriptionMode.RZONE: UNIT_TARGET_R,
    SubscriptionMode.GZONE: UNIT_TARGET_G,
    SubscriptionMode.CZONE: UNIT_TARGET_C,
}
_MODE_ZONE = {SubscriptionMode.RZONE: Zone.RZONE, SubscriptionMode.GZONE: Zone.GZONE,
              SubscriptionMode.CZONE: Zone.CZONE}


def check_name(part: str, name: object) -> str:
    """An instance, cell, city or logical name: non-empty, ASCII letters, digits, '_' and '-' only."""
    if not isinstance(name, str):
        raise LdcError(part, f"must be a string, got {name!r}")
    if name == "":
        raise LdcError(part, "must not be empty")
    if _NAME.fullmatch(name) is None:
        if "." in name:
            raise LdcError(part, f"{name!r} contains a dot; the dot separates instance, cell and name in a physical "
                                 "name, so it is not allowed inside one")
        bad = sorted({c for c in name if _NAME.fullmatch(c) is None})
        raise LdcError(part, f"{name!r} contains {''.join(bad)!r}; only ASCII letters, digits, '_' and '-' are "
                             "allowed")
    return name


def parse_uid(uid: int | str) -> int:
    """A uid shard: an int 0-99, or a user id string of digits whose last two digits are the shard."""
    if isinstance(uid, bool):
        raise LdcError("uid", f"{uid!r} is not a uid")
    if isinstance(uid, int):
        if 0 <= uid < UID_SHARDS:
            return uid
        raise LdcError("uid", f"{uid} is outside 0-{UID_SHARDS - 1}")
    if isinstance(uid, str) and uid.isascii() and uid.isdigit():
        return int(uid[-2:])
    raise LdcError("uid", f"{uid!r} is neither a shard 0-{UID_SHARDS - 1} nor a user id of digits")


def parse_uid_ranges(part: str, value: object) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LdcError(part, f"must be a list of strings like \"00-49\", got {value!r}")
    ranges: list[tuple[int, int]] = []
    for item in value:
        text = item.strip()
        lo_text, sep, hi_text = text.partition("-")
        if not sep:
            hi_text = lo_text
        if not (lo_text.isascii() and lo_text.isdigit() and hi_text.isascii() and hi_text.isdigit()):
            raise LdcError(part, f"{item!r} is not a uid range \"lo-hi\" or a single uid")
        lo, hi = int(lo_text), int(hi_text)
        if not 0 <= lo <= hi < UID_SHARDS:
            raise LdcError(part, f"{item!r} must lie within 00-{UID_SHARDS - 1} with lo <= hi")
        ranges.append((lo, hi))
    return tuple(sorted(ranges))


def _format_range(lo: int, hi: int) -> str:
    return f"{lo:02d}" if lo == hi else f"{lo:02d}-{hi:02d}"


@dataclass(frozen=True, order=True)
class PhysicalName:
    """``instance.cell.logical``: a physical topic or group name taken apart."""

    instance: str
    cell: str
    logical: str

    def __str__(self) -> str:
        return f"{self.instance}.{self.cell}.{self.logical}"


@dataclass(frozen=True)
class Cell:
    name: str
    zone: Zone
    city: str
    uids: tuple[tuple[int, int], ...] = ()
    """RZone only: inclusive uid ranges."""

    def owns(self, uid: int) -> bool:
        return any(lo <= uid <= hi for lo, hi in self.uids)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"zone": self.zone.value, "city": self.city}
        if self.uids:
            out["uids"] = [_format_range(lo, hi) for lo, hi in self.uids]
        return out


_CELL_KEYS = ("zone", "city", "uids")


@dataclass(frozen=True)
class LdcModel:
    """An instance and its cells. Construct with :meth:`from_dict`, :meth:`from_toml` or :meth:`from_json`
    (or directly: ``__post_init__`` checks the same rules)."""

    instance: str
    cells: tuple[Cell, ...] = ()
    _by_name: dict[str, Cell] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        check_name("instance", self.instance)
        by_name: dict[str, Cell] = {}
        gzone: Cell | None = None
        czones: dict[str, Cell] = {}
        uid_owner: dict[int, str] = {}
        for cell in self.cells:
            part = f"cells.{cell.name}"
            check_name("cell", cell.name)
            if cell.name in by_name:
                raise LdcError(part, "the cell is declared twice")
            check_name(f"{part}.city", cell.city)
            if cell.zone is not Zone.RZONE and cell.uids:
                raise LdcError(f"{part}.uids", f"only an RZone owns uids; {cell.name} is a {cell.zone.value}")
            if cell.zone is Zone.GZONE:
                if gzone is not None:
                    raise LdcError(f"{part}.zone", f"a second GZone ({gzone.name} is one); an instance has one GZone")
                gzone = cell
            if cell.zone is Zone.CZONE:
                other = czones.get(cell.city)
                if other is not None:
                    raise LdcError(f"{part}.zone", f"a second CZone in city {cell.city} ({other.name} is one); a "
                                                   "city has one CZone")
                czones[cell.city] = cell
            for lo, hi in cell.uids:
                for uid in range(lo, hi + 1):
                    owner = uid_owner.get(uid)
                    if owner is not None and owner != cell.name:
                        raise LdcError(f"{part}.uids", f"uid {uid:02d} is already owned by {owner}")
                    uid_owner[uid] = cell.name
            by_name[cell.name] = cell
        object.__setattr__(self, "cells", tuple(sorted(self.cells, key=lambda c: c.name)))
        object.__setattr__(self, "_by_name", by_name)

    # -- lookups ------------------------------------------------------------------------------------------------------
    @property
    def cell_names(self) -> list[str]:
        return [c.name for c in self.cells]

    @property
    def cities(self) -> list[str]:
        return sorted({c.city for c in self.cells})

    def cell(self, name: str) -> Cell:
        check_name("cell", name)
        found = self._by_name.get(name)
        if found is None:
            known = ", ".join(self.cell_names) or "none"
            raise LdcError("cell", f"{name!r} is not a cell of instance {self.instance} (cells: {known})")
        return found

    def has_cell(self, name: str) -> bool:
        return name in self._by_name

    def gzone(self) -> Cell | None:
        return next((c for c in self.cells if c.zone is Zone.GZONE), None)

    def czone_of(self, city: str) -> Cell | None:
        return next((c for c in self.cells if c.zone is Zone.CZONE and c.city == city), None)

    def rzone_for_uid(self, uid: int | str) -> Cell:
        shard = parse_uid(uid)
        for cell in self.cells:
            if cell.zone is Zone.RZONE and cell.owns(shard):
                return cell
        raise LdcError("uid", f"uid {shard:02d} is owned by no RZone of instance {self.instance}")

    # -- names --------------------------------------------------------------------------------------------------------
    def _physical(self, cell: str, logical: str, what: str) -> str:
        self.cell(cell)
        check_name(f"logical {what}", logical)
        name = f"{self.instance}.{cell}.{logical}"
        if what == "topic" and len(name) > MAX_TOPIC_NAME_LENGTH:
            raise LdcError("logical topic", f"the physical topic {name!r} would be {len(name)} characters long, "
                                            f"more than Kafka's {MAX_TOPIC_NAME_LENGTH}")
        return name

    def physical_topic(self, cell: str, topic: str) -> str:
        return self._physical(cell, topic, "topic")

    def physical_group(self, cell: str, group: str) -> str:
        return self._physical(cell, group, "group")

    def parse_physical(self, name: str, what: str = "topic") -> PhysicalName:
        """``ANT.CELL1.T1`` -> PhysicalName(ANT, CELL1, T1), checked against this model."""
        parts = name.split(".")
        if len(parts) != 3:
            raise LdcError(f"physical {what}", f"{name!r} has {len(parts) - 1} dots; a physical name is "
                                               "instance.cell.name with exactly two")
        instance, cell, logical = parts
        check_name("instance", instance)
        if instance != self.instance:
            raise LdcError("instance", f"{instance!r} in {name!r} is not this model's instance {self.instance}")
        self.cell(cell)
        check_name(f"logical {what}", logical)
        return PhysicalName(instance, cell, logical)

    # -- headers and subscriptions ------------------------------------------------------------------------------------
    def unit_headers(self, cell: str, uid: int | str | None = None) -> list[tuple[str, bytes]]:
        """The unit headers a client in ``cell`` sets on a record (with ``uid``: for that user's shard)."""
        origin = self.cell(cell)
        headers = [(UNIT_ORIUNIT, origin.name.encode())]
        gzone = self.gzone()
        if gzone is not None:
            headers.append((UNIT_TARGET_G, gzone.name.encode()))
        czone = self.czone_of(origin.city)
        if czone is not None:
            headers.append((UNIT_TARGET_C, czone.name.encode()))
        if uid is not None:
            headers.append((UNIT_TARGET_R, self.rzone_for_uid(uid).name.encode()))
        return headers

    def check_mode(self, cell: str, mode: SubscriptionMode) -> Cell:
        """RZone, GZone and CZone subscriptions start only in a cell of that zone; Local anywhere."""
        found = self.cell(cell)
        zone = _MODE_ZONE.get(mode)
        if zone is not None and found.zone is not zone:
            raise LdcError("subscription mode", f"a {mode.value} subscription starts only in a {zone.value}; cell "
                                                f"{cell} is a {found.zone.value}")
        return found

    def subscription_filter(self, cell: str, mode: SubscriptionMode) -> RecordFilter:
        self.check_mode(cell, mode)
        return RecordFilter.build(headers=[(mode.header, cell)])

    # -- stored and file forms ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"version": MODEL_FORMAT_VERSION, "instance": self.instance,
                "cells": {c.name: c.to_dict() for c in self.cells}}

    def to_json(self) -> str:
        """The canonical stored form: compact, keys sorted, so equal models store equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def to_toml(self) -> str:
        lines = [f"instance = {json.dumps(self.instance)}"]
        for c in self.cells:
            lines += ["", f"[cells.{c.name}]", f"zone = {json.dumps(c.zone.value)}", f"city = {json.dumps(c.city)}"]
            if c.uids:
                lines.append("uids = [" + ", ".join(json.dumps(_format_range(lo, hi)) for lo, hi in c.uids) + "]")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_dict(cls, data: object) -> LdcModel:
        if not isinstance(data, Mapping):
            raise LdcError("model", f"must be a table/object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"version", "instance", "cells"})
        if unknown:
            raise LdcError(str(unknown[0]), "unknown key (known: instance, cells)")
        version = data.get("version", MODEL_FORMAT_VERSION)
        if version != MODEL_FORMAT_VERSION:
            raise LdcError("version", f"{version!r} is not a model format this version reads ({MODEL_FORMAT_VERSION})")
        if "instance" not in data:
            raise LdcError("instance", "missing")
        cells_data = data.get("cells", {})
        if not isinstance(cells_data, Mapping):
            raise LdcError("cells", "must be a table of cells")
        cells: list[Cell] = []
        for name, spec in cells_data.items():
            part = f"cells.{name}"
            check_name("cell", name)
            if not isinstance(spec, Mapping):
                raise LdcError(part, "must be a table with zone and city")
            extra = sorted(set(spec) - set(_CELL_KEYS))
            if extra:
                raise LdcError(f"{part}.{extra[0]}", f"unknown key (known: {', '.join(_CELL_KEYS)})")
            for required in ("zone", "city"):
                if required not in spec:
                    raise LdcError(f"{part}.{required}", "missing")
            zone = Zone.parse(spec["zone"], f"{part}.zone")
            uids = parse_uid_ranges(f"{part}.uids", spec["uids"]) if "uids" in spec else ()
            cells.append(Cell(name=name, zone=zone, city=check_name(f"{part}.city", spec["city"]), uids=uids))
        return cls(instance=check_name("instance", data["instance"]), cells=tuple(cells))

    @classmethod
    def from_toml(cls, text: str) -> LdcModel:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise LdcError("TOML", str(exc)) from None
        return cls.from_dict(data)

    @classmethod
    def from_json(cls, text: str) -> LdcModel:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LdcError("JSON", str(exc)) from None
        return cls.from_dict(data)

    @classmethod
    def from_text(cls, text: str, filename: str = "") -> LdcModel:
        """JSON when the file name ends in .json or the text starts with '{', TOML otherwise."""
        if filename.endswith(".json") or text.lstrip().startswith("{"):
            return cls.from_json(text)
        return cls.from_toml(text)

    # -- edits (each returns a new, checked model) ------------------------------------------------------------------
    def with_cell(self, cell: Cell) -> LdcModel:
        return LdcModel(self.instance, (*(c for c in self.cells if c.name != cell.name), cell))

    def without_cell(self, name: str) -> LdcModel:
        self.cell(name)
        return LdcModel(self.instance, tuple(c for c in self.cells if c.name != name))

