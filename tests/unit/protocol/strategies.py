"""Hypothesis strategies derived from the message declarations, for any test that needs valid messages.

``message_strategy(cls, version)`` draws instances of a message (or any ``Struct``) that are valid at
``version``: every field the version carries gets a random value (None where the version allows null),
every field it lacks keeps its default, so ``cls.decode(x.encode(version), version) == x`` holds.
``records=`` replaces the strategy for record data (random bytes by default), e.g. with one that builds
valid record batches.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st

from sofakafka.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ArrayType,
    FieldSpec,
    FieldType,
    Struct,
    in_range,
)

S = TypeVar("S", bound=Struct)

_INT_BOUNDS = {
    INT8: (-(2**7), 2**7 - 1),
    INT16: (-(2**15), 2**15 - 1),
    INT32: (-(2**31), 2**31 - 1),
    INT64: (-(2**63), 2**63 - 1),
    UINT16: (0, 2**16 - 1),
    UINT32: (0, 2**32 - 1),
}

# Surrogates cannot be encoded as UTF-8, so no valid Kafka string holds one.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
BINARY = st.binary(max_size=24)


def value_strategy(
    ftype: FieldType | type[Struct],
    version: int,
    max_list: int = 3,
    flexible: bool = False,
    records: st.SearchStrategy[Any] = BINARY,
) -> st.SearchStrategy[Any]:
    """Values of one wire type, nested structs valid at ``version``."""
    if isinstance(ftype, ArrayType):
        return st.lists(value_strategy(ftype.element, version, max_list, flexible, records), max_size=max_list)
    if isinstance(ftype, type):
        return message_strategy(ftype, version, flexible, records)
    if ftype is RECORDS:
        return records
    if ftype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[ftype]
        # Edges and small values find more bugs than uniform 64-bit noise.
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if ftype is BOOL:
        return st.booleans()
    if ftype is FLOAT64:
        return st.floats(allow_nan=False)
    if ftype is STRING:
        return TEXT
    if ftype is BYTES:
        return BINARY
    if ftype is UUID:
        return st.uuids()
    raise TypeError(f"no strategy for {ftype!r}")


def field_strategy(
    spec: FieldSpec, version: int, flexible: bool, records: st.SearchStrategy[Any] = BINARY
) -> st.SearchStrategy[Any]:
    carried = in_range(version, spec.versions) or (flexible and in_range(version, spec.tagged))
    if not carried:
        return st.builds(spec.default_value)
    values = value_strategy(spec.type, version, flexible=flexible, records=records)
    if in_range(version, spec.nullable):
        return st.one_of(st.none(), values)
    return values


def message_strategy(
    cls: type[S], version: int, flexible: bool | None = None, records: st.SearchStrategy[Any] = BINARY
) -> st.SearchStrategy[S]:
    """Instances of ``cls`` valid at ``version``; ``flexible`` defaults to the class's own rule (nested
    structs follow their message's)."""
    if flexible is None:
        flexible = cls.is_flexible(version)
    kwargs = {spec.name: field_strategy(spec, version, flexible, records) for spec in cls.fields()}
    return st.builds(cls, **kwargs)


def all_message_versions() -> list[tuple[type[Struct], int]]:
    """Every (request or response class, version) Kafka 2.6 accepts."""
    from sofakafka.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES

    out: list[tuple[type[Struct], int]] = []
    for table in (REQUEST_TYPES, RESPONSE_TYPES):
        for key in sorted(table):
            cls = table[key]
            lo, hi = cls.valid_versions()
            out += [(cls, v) for v in range(lo, hi + 1)]
    return out
