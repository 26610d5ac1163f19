"""Our message codec against kafka-python's, an implementation written independently of ours.

kafka-python 3.0 carries two encoders: hand-written positional schemas (``kafka.protocol.old``, one class
per version, written from Kafka's protocol docs over the years) and classes driven by a newer Kafka's
message JSON (``kafka.protocol.*``, ``ApiMessage``). We check against three things: each of those two
wherever it defines a version Kafka 2.6 accepts, and kafka-python's JSON engine fed Kafka 2.6's own message
JSON (every API and version, including the inter-broker ones kafka-python lacks; that JSON comes out of the
kafka-clients 2.6 jar scripts/test.sh resolves, or from ``--kafka-reference DIR`` / $SOFAKAFKA_KAFKA_REFERENCE
when given, and these cases skip, saying so, with neither).
For each, hypothesis draws a message valid at that version and we check:

- their encoding of the same field values is byte for byte ours;
- their decoder reads our bytes back to the same values, consuming exactly all of them.

Request and response headers are compared too (header versions and their ApiVersions/ClientId quirks).

The comparison goes through a positional tree (the untagged fields of each struct, in wire order), so it
checks field order, types and version ranges without relying on the two projects naming fields alike.
kafka-python is a test-only dependency.
"""

from __future__ import annotations

import importlib
import io
import json
import pkgutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from sofakafka.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES
from sofakafka.protocol.schema import ArrayType, Message, Struct, in_range
from tests.unit.protocol.strategies import message_strategy

with warnings.catch_warnings():
    # kafka-python 3.0 calls a deprecated importlib API at import; tests run with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    import kafka.protocol.old
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.old.types import Array as OldArray
    from kafka.protocol.old.types import BitField as OldBitField
    from kafka.protocol.old.types import Schema as OldSchema
    from kafka.protocol.schemas import StructField
    from kafka.protocol.schemas.fields.codecs import BitField as JsonBitField
    from kafka.protocol.schemas.load_json import _resolve_common_structs

    for _module in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if _module.name != "kafka.protocol.generate_stubs":
            importlib.import_module(_module.name)

KINDS = {"request": REQUEST_TYPES, "response": RESPONSE_TYPES}


# --- kafka-python's classes, indexed by (api key, kind, version) -------------------------------------


def _old_classes() -> dict[tuple[int, str, int], Any]:
    """The hand-written classes. Each module exports ``FooRequest = [FooRequest_v0, ...]``; the list index
    is the version kafka-python sends, which is what its own client relies on."""
    found: dict[tuple[int, str, int], Any] = {}
    for info in pkgutil.iter_modules(kafka.protocol.old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for name, value in vars(module).items():
            if not (isinstance(value, list) and value and hasattr(value[0], "SCHEMA")):
                continue
            kind = (
                "request" if name.endswith("Request") else "response" if name.endswith("Response") else None
            )
            if kind is None:
                continue
            for version, cls in enumerate(value):
                found[(cls.API_KEY, kind, version)] = cls
    return found


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _json_classes() -> dict[tuple[int, str], Any]:
    found: dict[tuple[int, str], Any] = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None) is not None:
            found[(cls.API_KEY, cls.type)] = cls
    return found


OLD = _old_classes()
JSON = _json_classes()


# Where kafka-python's hand-written schemas disagree with Kafka 2.6 itself (its message JSON in
# reference/kafka-2.6/message/, which our declarations follow). Each entry names a message that shows the
# disagreement; test_known_kafka_python_bugs_still_disagree fails once kafka-python fixes one, so the
# entry can go and the case rejoins the main check.
KNOWN_OLD_SCHEMA_BUGS: dict[tuple[int, str, int], tuple[str, Any]] = {
    (29, "request", 2): (
        "DescribeAclsRequest_v2 reuses the v1 schema, but DescribeAclsRequest.json has flexibleVersions 2+: "
        "kafka-python writes classic strings and no tagged-field sections",
        lambda: REQUEST_TYPES[29](),
    ),
    (29, "response", 2): (
        "DescribeAclsResponse_v2 reuses the v1 schema, but DescribeAclsResponse.json has flexibleVersions 2+",
        lambda: RESPONSE_TYPES[29](),
    ),
    (33, "response", 1): (
        "kafka.protocol.old.admin.AlterConfigsResponse lists AlterConfigsRequest_v1 as its v1 entry",
        lambda: RESPONSE_TYPES[33](),
    ),
    (35, "request", 0): (
        "DescribeLogDirsRequest_v0 declares 'partitions' as one int32; DescribeLogDirsRequest.json has "
        "Partitions as []int32 from v0",
        lambda: REQUEST_TYPES[35](
            topics=[REQUEST_TYPES[35].DescribableLogDirTopic(topic="t", partition_index=[1, 2])]
        ),
    ),
}


def _cases() -> tuple[list[Any], list[Any]]:
    old_cases, json_cases = [], []
    for kind, table in KINDS.items():
        for api_key, ours in sorted(table.items()):
            low, high = ours.valid_versions()
            for version in range(low, high + 1):
                if (api_key, kind, version) in OLD and (api_key, kind, version) not in KNOWN_OLD_SCHEMA_BUGS:
                    old_cases.append(pytest.param(ours, version, id=f"{ours.__name__}-v{version}"))
            kp_cls = JSON.get((api_key, kind))
            if kp_cls is not None:
                # kafka-python widens the JSON's validVersions down to 0 (its newer Kafka JSON dropped the
                # oldest versions) and sends those versions from the same classes, so they are checked too.
                for version in range(low, min(high, kp_cls.max_version) + 1):
                    json_cases.append(pytest.param(ours, version, id=f"{ours.__name__}-v{version}"))
    return old_cases, json_cases


OLD_CASES, JSON_CASES = _cases()


# --- positional trees ---------------------------------------------------------------------------------


class Tree(list[Any]):
    """The values of one struct, in wire order (a plain list stands for an array)."""


INT32_MIN = -(2**31)


def _plain(value: Any) -> Any:
    """One spelling per value: lists for sequences, bytes for buffers."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _our_value(value: Any, ftype: Any, version: int, flexible: bool) -> Any:
    if value is None:
        return None
    if isinstance(ftype, ArrayType):
        return [_our_value(v, ftype.element, version, flexible) for v in value]
    if isinstance(ftype, type) and issubclass(ftype, Struct):
        return our_tree(value, version, flexible)
    return _plain(value)


def our_tree(obj: Struct, version: int, flexible: bool) -> Tree:
    """Untagged fields carried at ``version`` in wire order; a flexible struct ends with a dict of its
    tagged fields that differ from their defaults (tag -> value), omitted when empty."""
    values = Tree()
    tags: dict[int, Any] = {}
    for spec in type(obj).fields():
        value = getattr(obj, spec.name)
        if flexible and in_range(version, spec.tagged):
            if value != spec.default_value():
                assert spec.tag is not None
                tags[spec.tag] = _our_value(value, spec.type, version, flexible)
        elif in_range(version, spec.versions):
            values.append(_our_value(value, spec.type, version, flexible))
    assert not obj._unknown_tagged_fields, "strategies draw only declared fields"
    if tags:
        values.append(tags)
    return values


# kafka-python reads the int32 "authorized operations" fields as a set of bit numbers, with INT32_MIN
# (Kafka's "not requested") as None.


def _to_bits(value: int) -> set[int] | None:
    return None if value == INT32_MIN else {b for b in range(32) if (value >> b) & 1}


def _from_bits(bits: set[int] | None) -> int:
    unsigned = sum(1 << b for b in ({31} if bits is None else bits))
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


# - hand-written schemas (kafka.protocol.old) -


def _old_input(value: Any, old_type: Any) -> Any:
    """Our value in the shape of a hand-written schema type. Those spell some structs differently with
    the same wire bytes: a struct of one field as the bare field (MetadataRequest v0's topics are an array
    of strings, Kafka's JSON an array of structs with a name), and a run of fields as a nested struct
    (CreatePartitionsRequest's count and assignments); both are reconciled here, nothing else."""
    if value is None:
        return None
    if isinstance(value, Tree) and len(value) == 1 and not isinstance(old_type, OldSchema):
        value = value[0]
    if isinstance(old_type, OldSchema):
        assert isinstance(value, Tree), f"kafka-python has a struct where we have {value!r}"
        assert not (value and isinstance(value[-1], dict)), "hand-written schemas carry no tagged fields"
        it = iter(value)
        out = _old_fill(it, old_type)
        leftover = list(it)
        assert not leftover, f"we carry {len(leftover)} more fields than kafka-python's {old_type.names}"
        return out
    if isinstance(old_type, OldArray):
        assert isinstance(value, list) and not isinstance(value, Tree), (
            f"kafka-python has an array, we {value!r}"
        )
        return [_old_input(v, old_type.array_of) for v in value]
    if old_type is OldBitField:
        return _to_bits(value)
    return value


def _old_fill(it: Any, schema: Any) -> tuple[Any, ...]:
    fields = schema.fields[:-1] if schema.has_tagged_fields() else schema.fields
    out = []
    for name, old_type in zip(schema.names, fields, strict=False):
        if isinstance(old_type, OldSchema):
            out.append(_old_fill(it, old_type))
            continue
        try:
            value = next(it)
        except StopIteration:
            raise AssertionError(f"kafka-python's schema has field {name!r} past the last of ours") from None
        out.append(_old_input(value, old_type))
    return tuple(out)


# - JSON-driven classes (kafka.protocol.*) -


def _is_bitfield(kp_field: Any) -> bool:
    return getattr(kp_field, "_type", None) is JsonBitField


def _kp_value(value: Any, kp_field: Any, version: int) -> Any:
    if kp_field.is_struct():
        return None if value is None else kp_tree(value, kp_field, version)
    if kp_field.is_struct_array():
        return None if value is None else [kp_tree(v, kp_field.array_of, version) for v in value]
    if _is_bitfield(kp_field):
        return _from_bits(value)
    return _plain(value)


def kp_tree(obj: Any, kp_struct: Any, version: int) -> Tree:
    """The same tree read from a decoded kafka-python ``DataContainer``."""
    values = Tree(_kp_value(getattr(obj, f.name), f, version) for f in kp_struct.untagged_fields(version))
    tags = {}
    for f in kp_struct.tagged_fields(version)._fields:
        value = getattr(obj, f.name)
        if value != f.default:
            tags[f.tag] = _kp_value(value, f, version)
    if tags:
        values.append(tags)
    return values


def _kp_input(tree: Tree, kp_struct: Any, version: int) -> tuple[Any, ...]:
    """Our tree as the nested tuples kafka-python's JSON structs encode positionally; the trailing tag
    dict is keyed by their field names."""
    fields = kp_struct.untagged_fields(version)
    has_tags = bool(tree) and isinstance(tree[-1], dict)
    plain = tree[:-1] if has_tags else tree
    assert len(plain) == len(fields), (
        f"{kp_struct.name} v{version}: we carry {len(plain)} untagged fields, kafka-python {len(fields)}"
    )
    out: list[Any] = []
    for value, f in zip(plain, fields, strict=True):
        if value is not None and f.is_struct():
            value = _kp_input(value, f, version)
        elif value is not None and f.is_struct_array():
            value = [_kp_input(v, f.array_of, version) for v in value]
        elif _is_bitfield(f):
            value = _to_bits(value)
        out.append(value)
    if has_tags:
        by_tag = kp_struct.tagged_fields(version)._tags
        out.append({by_tag[tag].name: value for tag, value in tree[-1].items()})
    return tuple(out)


# --- the checks ---------------------------------------------------------------------------------------


def check_against_old(message: Message, version: int) -> None:
    flexible = message.is_flexible(version)
    our_bytes = message.encode(version)
    schema = OLD[(message.API_KEY, message.KIND, version)].SCHEMA
    theirs = _old_input(our_tree(message, version, flexible), schema)

    assert schema.encode(theirs) == our_bytes

    stream = io.BytesIO(our_bytes)
    assert _plain(schema.decode(stream)) == _plain(theirs)
    assert stream.tell() == len(our_bytes)


def check_against_json(message: Message, version: int) -> None:
    ours = type(message)
    flexible = ours.is_flexible(version)
    our_bytes = message.encode(version)
    tree = our_tree(message, version, flexible)
    kp_cls = JSON[(ours.API_KEY, ours.KIND)]
    assert kp_cls.flexible_version_q(version) == flexible
    struct = kp_cls._struct

    theirs = _kp_input(tree, struct, version)
    assert struct.encode(theirs, version=version, compact=flexible, tagged=flexible) == our_bytes

    decode = struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=kp_cls[None])
    decoded, end = decode(memoryview(our_bytes), 0)
    assert end == len(our_bytes)
    assert kp_tree(decoded, struct, version) == tree
    # Our decoder reads what kafka-python writes from its own decoded object back to the same message.
    rewritten = struct.encode(decoded, version=version, compact=flexible, tagged=flexible)
    assert ours.decode(rewritten, version) == message


# A quarter of the active profile's examples per case (conftest: dev 50, ci 150), at most 20: there are
# hundreds of cases.
CROSSCHECK = settings(
    max_examples=min(20, max(2, settings.default.max_examples // 4)),
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize(("ours", "version"), OLD_CASES)
@CROSSCHECK
@given(data=st.data())
def test_kafka_python_hand_written_schemas_agree(
    ours: type[Message], version: int, data: st.DataObject
) -> None:
    check_against_old(data.draw(message_strategy(ours, version)), version)


@pytest.mark.parametrize(("ours", "version"), JSON_CASES)
@CROSSCHECK
@given(data=st.data())
def test_kafka_python_json_driven_classes_agree(
    ours: type[Message], version: int, data: st.DataObject
) -> None:
    check_against_json(data.draw(message_strategy(ours, version)), version)


@pytest.mark.parametrize("case", sorted(KNOWN_OLD_SCHEMA_BUGS), ids=str)
def test_known_kafka_python_bugs_still_disagree(case: tuple[int, str, int]) -> None:
    _reason, example = KNOWN_OLD_SCHEMA_BUGS[case]
    message = example()
    _, _, version = case
    message.encode(version)  # ours is fine with it
    with pytest.raises((AssertionError, ValueError, TypeError)):
        check_against_old(message, version)


def test_crosscheck_covers_most_of_what_kafka_2_6_accepts() -> None:
    # Guards against the class discovery above silently finding nothing after a kafka-python upgrade.
    covered = {(p.values[0].API_KEY, p.values[0].KIND, p.values[1]) for p in OLD_CASES + JSON_CASES}
    total = sum(
        cls.valid_versions()[1] - cls.valid_versions()[0] + 1
        for table in KINDS.values()
        for cls in table.values()
    )
    assert len(covered) >= total * 3 // 4, (len(covered), total)
    assert len(ALL_CASES) == total


# --- kafka-python's schema engine reading Kafka 2.6's own JSON --------------------------------------
# kafka-python has no classes for the inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown) nor for delegation tokens, and its bundled JSON is a newer Kafka's. Its JSON engine
# is independent of our generator and compiler, so feeding it the 2.6 files of the Kafka reference checks
# every (API, version, kind) 2.6 accepts against the exact schema we declare from. Kafka's files are not in the
# repository: they come out of Kafka's own kafka-clients jar (the kafka_message_json fixture).


def _reference_struct(ours: type[Message], reference: Path) -> Any:
    name = ours.__name__
    path = reference / "message" / f"{name}.json"
    text = "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("//")
    )
    spec = json.loads(text)
    assert (spec["apiKey"], spec["type"]) == (ours.API_KEY, ours.KIND)
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    if common:
        _resolve_common_structs(spec["fields"], common)
    struct = StructField(spec)
    data_class = type(name, (DataContainer,), {"_struct": struct})
    struct.set_data_class(data_class)
    return struct


REFERENCE_STRUCTS: dict[type[Message], Any] = {}


def reference_struct(ours: type[Message], reference: Path) -> Any:
    if ours not in REFERENCE_STRUCTS:
        REFERENCE_STRUCTS[ours] = _reference_struct(ours, reference)
    return REFERENCE_STRUCTS[ours]


ALL_CASES = [
    pytest.param(ours, version, id=f"{ours.__name__}-v{version}")
    for table in KINDS.values()
    for _, ours in sorted(table.items())
    for version in range(ours.valid_versions()[0], ours.valid_versions()[1] + 1)
]


def check_against_reference_json(message: Message, version: int, reference: Path) -> None:
    ours = type(message)
    flexible = ours.is_flexible(version)
    struct = reference_struct(ours, reference)
    our_bytes = message.encode(version)
    tree = our_tree(message, version, flexible)

    assert (
        struct.encode(_kp_input(tree, struct, version), version=version, compact=flexible, tagged=flexible)
        == our_bytes
    )
    decode = struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=struct.data_class
    )
    decoded, end = decode(memoryview(our_bytes), 0)
    assert end == len(our_bytes)
    assert kp_tree(decoded, struct, version) == tree


@pytest.mark.parametrize(("ours", "version"), ALL_CASES)
# Fewer examples than the other checks: most of these cases are also covered by kafka-python's own classes.
@settings(CROSSCHECK, max_examples=max(2, CROSSCHECK.max_examples // 2))
@given(data=st.data())
def test_kafka_python_engine_on_kafka_2_6_json_agrees(
    ours: type[Message], version: int, data: st.DataObject, kafka_message_json: Path
) -> None:
    check_against_reference_json(data.draw(message_strategy(ours, version)), version, kafka_message_json)


# --- headers ------------------------------------------------------------------------------------------

HEADER_CASES = [
    pytest.param(kp_cls, version, id=f"{kp_cls.__name__}-v{version}")
    for (api_key, kind), kp_cls in sorted(JSON.items(), key=lambda item: item[0])
    if api_key in KINDS[kind]
    for version in range(
        KINDS[kind][api_key].valid_versions()[0],
        min(KINDS[kind][api_key].valid_versions()[1], kp_cls.max_version) + 1,
    )
]


@pytest.mark.parametrize(("kp_cls", "version"), HEADER_CASES)
@settings(max_examples=5)
@given(
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)),
)
def test_headers_agree_with_kafka_python(
    kp_cls: Any, version: int, correlation_id: int, client_id: str | None
) -> None:
    # Header versions follow each API's flexible versions with quirks (ApiVersions responses always use
    # header v0; the request header's client id never goes compact): kafka-python implements the same rules
    # independently.
    instance = kp_cls(version=version)
    instance.with_header(correlation_id=correlation_id, client_id=client_id)
    theirs = instance.encode_header(flexible=kp_cls.flexible_version_q(version))
    if kp_cls.is_request():
        ours = encode_request_header(
            RequestHeader(
                request_api_key=kp_cls.API_KEY,
                request_api_version=version,
                correlation_id=correlation_id,
                client_id=client_id,
            )
        )
        header, end = decode_request_header(theirs)
        assert (header.correlation_id, header.client_id, end) == (correlation_id, client_id, len(theirs))
    else:
        ours = encode_response_header(ResponseHeader(correlation_id=correlation_id), kp_cls.API_KEY, version)
        header, end = decode_response_header(theirs, kp_cls.API_KEY, version)
        assert (header.correlation_id, end) == (correlation_id, len(theirs))
    assert bytes(ours) == theirs
