"""Subscription filters: which records a consumer group is given, decided by key and headers.

The brief's "message filtering by key/tag, done on the server side" and LDC's four zone subscriptions are
the same thing: a predicate over a record's key and headers, attached to a physical consumer group. A
:class:`RecordFilter` is that predicate, as data:

* ``key_equals`` / ``key_prefixes``: the record's key equals one of these or starts with one of those
  (a record without a key matches neither). Both empty: the key is not looked at.
* ``headers``: for every header name listed, the record carries that header with one of the listed values
  (a header repeated in the record matches when any occurrence does).

A record passes when the key condition and every header condition hold. An empty filter passes everything
and is the same as no filter.

Where it is kept: as the group's dynamic configs (DescribeConfigs/AlterConfigs on Kafka's GROUP config
resource, type 32), one key per condition, each a Kafka LIST (comma-separated, items trimmed)::

    sofakafka.filter.key.equals        = k1,k2
    sofakafka.filter.key.prefix        = user-,acct-
    sofakafka.filter.header.<NAME>     = v1,v2          e.g. sofakafka.filter.header.__UNIT.TARGET_R=R1

Values are UTF-8 text, so they cannot contain a comma (the list separator), be empty or start or end with
whitespace (Kafka trims list items); :func:`RecordFilter.from_configs` refuses such values naming the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

FILTER_CONFIG_PREFIX = "sofakafka.filter."
KEY_EQUALS_CONFIG = "sofakafka.filter.key.equals"
KEY_PREFIX_CONFIG = "sofakafka.filter.key.prefix"
HEADER_CONFIG_PREFIX = "sofakafka.filter.header."


class FilterError(ValueError):
    """A filter that cannot be stored or parsed; ``key`` is the config key (or option) it is about."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


def _check_value(key: str, value: str) -> None:
    if value == "":
        raise FilterError(key, "an empty value matches nothing useful and cannot be stored in a list config")
    if "," in value:
        raise FilterError(key, f"{value!r} contains a comma, the separator of the stored list")
    if value != value.strip():
        raise FilterError(key, f"{value!r} starts or ends with whitespace, which the stored list would trim")


def _text(key: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FilterError(key, f"{raw!r} is not UTF-8 text") from None


@dataclass(frozen=True)
class RecordFilter:
    """A predicate over a record's key and headers (see the module docstring)."""

    key_equals: tuple[bytes, ...] = ()
    key_prefixes: tuple[bytes, ...] = ()
    headers: tuple[tuple[str, tuple[bytes, ...]], ...] = ()

    @classmethod
    def build(cls, *, key_equals: Iterable[bytes | str] = (), key_prefixes: Iterable[bytes | str] = (),
              headers: Iterable[tuple[str, bytes | str]] | Mapping[str, Sequence[bytes | str]] = ()) -> RecordFilter:
        """Normalised (sorted, deduplicated) and validated as :meth:`to_configs` would need it."""

        def raw(v: bytes | str) -> bytes:
            return v.encode("utf-8") if isinstance(v, str) else bytes(v)

        by_name: dict[str, set[bytes]] = {}
        if isinstance(headers, Mapping):
            for name, values in headers.items():
                by_name.setdefault(name, set()).update(raw(v) for v in values)
        else:
            for name, value in headers:
                by_name.setdefault(name, set()).add(raw(value))
        result = cls(
            key_equals=tuple(sorted({raw(k) for k in key_equals})),
            key_prefixes=tuple(sorted({raw(p) for p in key_prefixes})),
            headers=tuple((name, tuple(sorted(values))) for name, values in sorted(by_name.items())),
        )
        result.to_configs()  # validates every value
        return result

    @property
    def is_empty(self) -> bool:
        return not (self.key_equals or self.key_prefixes or self.headers)

    def matches(self, key: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> bool:
        if self.key_equals or self.key_prefixes:
            if key is None:
                return False
            if key not in self.key_equals and not any(key.startswith(p) for p in self.key_prefixes):
                return False
        for name, values in self.headers:
            if not any(h == name and v is not None and v in values for h, v in headers):
                return False
        return True

    # -- stored form ------------------------------------------------------------------------------------------------
    def to_configs(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.key_equals:
            out[KEY_EQUALS_CONFIG] = self._join(KEY_EQUALS_CONFIG, self.key_equals)
        if self.key_prefixes:
            out[KEY_PREFIX_CONFIG] = self._join(KEY_PREFIX_CONFIG, self.key_prefixes)
        for name, values in self.headers:
            if not name or name != name.strip():
                raise FilterError(HEADER_CONFIG_PREFIX + name, f"header name {name!r} is empty or padded")
            if not values:
                raise FilterError(HEADER_CONFIG_PREFIX + name, "no value given for the header")
            out[HEADER_CONFIG_PREFIX + name] = self._join(HEADER_CONFIG_PREFIX + name, values)
        return out

    @staticmethod
    def _join(key: str, values: Sequence[bytes]) -> str:
        texts = [_text(key, v) for v in values]
        for t in texts:
            _check_value(key, t)
        return ",".join(texts)

    @classmethod
    def from_configs(cls, configs: Mapping[str, str]) -> RecordFilter:
        """The filter a group's configs describe; keys outside ``sofakafka.filter.`` are refused by name."""
        key_equals: list[str] = []
        key_prefixes: list[str] = []
        headers: dict[str, list[str]] = {}
        for key, value in configs.items():
            items = [item.strip() for item in value.split(",")] if value.strip() else []
            if not items:
                raise FilterError(key, "no value given")
            for item in items:
                _check_value(key, item)
            if key == KEY_EQUALS_CONFIG:
                key_equals += items
            elif key == KEY_PREFIX_CONFIG:
                key_prefixes += items
            elif key.startswith(HEADER_CONFIG_PREFIX) and len(key) > len(HEADER_CONFIG_PREFIX):
                headers[key[len(HEADER_CONFIG_PREFIX):]] = items
            else:
                raise FilterError(key, f"unknown group config (known: {KEY_EQUALS_CONFIG}, {KEY_PREFIX_CONFIG}, "
                                       f"{HEADER_CONFIG_PREFIX}<header name>)")
        return cls.build(key_equals=key_equals, key_prefixes=key_prefixes, headers=headers)

    def describe(self) -> str:
        """One line for people: ``key=k1|k2 key-prefix=p header:__UNIT.ORIUNIT=R1|R2``; ``(none)`` when empty."""
        parts: list[str] = []
        if self.key_equals:
            parts.append("key=" + "|".join(k.decode("utf-8", "replace") for k in self.key_equals))
        if self.key_prefixes:
            parts.append("key-prefix=" + "|".join(k.decode("utf-8", "replace") for k in self.key_prefixes))
        for name, values in self.headers:
            parts.append(f"header:{name}=" + "|".join(v.decode("utf-8", "replace") for v in values))
        return " ".join(parts) if parts else "(none)"
