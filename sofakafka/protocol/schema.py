"""The message DSL: a message is declared once, as data; encode, decode and size are derived from it.

A declaration is a class whose annotated attributes are :func:`field` specs::

    class ProduceRequest(Request):
        API_KEY = 0
        VALID_VERSIONS = "0-8"
        FLEXIBLE_VERSIONS = "none"

        class TopicProduceData(Struct):
            name: str = field(STRING, "0+", default="")
            ...

        transactional_id: str | None = field(STRING, "3+", nullable="0+", default=None)
        acks: int = field(INT16, "0+", default=0)
        topics: list[TopicProduceData] = field(array(TopicProduceData), "0+", default_factory=list)

Every :class:`Struct` subclass becomes a keyword-only dataclass (equality by value, defaults for fields
not given). Version strings follow Kafka's JSON: ``"3+"``, ``"0-2"``, ``"5"``, ``"none"``; nested field
versions are versions of the enclosing message.

Speed: the broker decodes Produce and Fetch on its hot path, so the declaration is not interpreted per
call. The first use of a (struct, version) compiles Python source specialised to that version -- fixed
width fields merged into one ``struct`` call, absent fields reduced to constant assignments -- and
caches the resulting functions on the class.

Kafka's rules kept here:

- encoding a field that the version cannot carry raises :class:`EncodeError` when its value differs
  from the default, unless the field is ``ignorable`` (then it is silently dropped);
- flexible versions use compact strings/bytes/arrays and end every struct with a tagged-field section;
  tagged fields are written only when they differ from their default; unknown tags met while decoding
  are kept (``_unknown_tagged_fields``) and written back, so re-encoding is byte-identical;
- ``RECORDS`` data is never decoded here: it stays a zero-copy ``memoryview`` of the input buffer (the
  record-format code lives in :mod:`sofakafka.protocol.records`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar, dataclass_transform

from sofakafka.protocol import primitives as P
from sofakafka.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError

MAX_VERSION = 0x7FFF

VersionRange = tuple[int, int] | None
"""Inclusive (low, high) range of versions, or None for "none"."""

S = TypeVar("S", bound="Struct")


def parse_versions(spec: str) -> VersionRange:
    """Kafka's version-range syntax: "none", "3", "3+", "0-2"."""
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    v = int(spec)
    return v, v


def in_range(version: int, versions: VersionRange) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


# --- types ------------------------------------------------------------------------------------------


class FieldType:
    """A wire type. ``fmt`` is the struct format char of fixed-width types, else empty."""

    def __init__(self, name: str, fmt: str = "", width: int = 0) -> None:
        self.name = name
        self.fmt = fmt
        self.width = width

    def __repr__(self) -> str:
        return self.name


INT8 = FieldType("int8", "b", 1)
INT16 = FieldType("int16", "h", 2)
INT32 = FieldType("int32", "i", 4)
INT64 = FieldType("int64", "q", 8)
UINT16 = FieldType("uint16", "H", 2)
UINT32 = FieldType("uint32", "I", 4)
FLOAT64 = FieldType("float64", "d", 8)
BOOL = FieldType("bool", "?", 1)
STRING = FieldType("string")
BYTES = FieldType("bytes")
RECORDS = FieldType("records")
UUID = FieldType("uuid")


class ArrayType(FieldType):
    def __init__(self, element: FieldType | type[Struct]) -> None:
        super().__init__(f"[]{getattr(element, '__name__', None) or element!r}")
        self.element = element


def array(element: FieldType | type[Struct]) -> ArrayType:
    return ArrayType(element)


def implicit_default(ftype: FieldType | type[Struct]) -> Any:
    """Kafka's default for a field declared without one."""
    if isinstance(ftype, ArrayType):
        return []
    if isinstance(ftype, type):
        return ftype()
    if ftype is BOOL:
        return False
    if ftype is FLOAT64:
        return 0.0
    if ftype is STRING:
        return ""
    if ftype in (BYTES, RECORDS):
        return b""
    if ftype is UUID:
        return P.ZERO_UUID
    return 0


@dataclasses.dataclass(eq=False)
class FieldSpec:
    """Everything the codec knows about one field; ``name`` is filled in from the attribute name."""

    type: FieldType | type[Struct]
    versions: VersionRange
    nullable: VersionRange = None
    tagged: VersionRange = None
    tag: int | None = None
    ignorable: bool = False
    # A field may narrow the compact encoding to some versions (RequestHeader.ClientId: to none).
    flexible_override: bool = False
    flexible: VersionRange = None
    name: str = ""
    default: Any = None
    default_factory: Callable[[], Any] | None = None

    def default_value(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default


def field(
    type_: FieldType | type[Struct],
    versions: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    nullable: str = "none",
    tagged: str = "none",
    tag: int | None = None,
    ignorable: bool = False,
    flexible: str | None = None,
) -> Any:
    """Declares a field. ``flexible="none"`` keeps the classic encoding even in flexible versions."""
    spec = FieldSpec(
        type=type_,
        versions=parse_versions(versions),
        nullable=parse_versions(nullable),
        tagged=parse_versions(tagged),
        tag=tag,
        ignorable=ignorable,
        flexible_override=flexible is not None,
        flexible=None if flexible is None else parse_versions(flexible),
    )
    if (spec.tagged is None) != (tag is None):
        raise ValueError("a tagged field needs both tag and tagged versions")
    if default_factory is not dataclasses.MISSING:
        spec.default_factory = default_factory
        return dataclasses.field(default_factory=default_factory, metadata={"kafka": spec})
    if default is dataclasses.MISSING:
        implicit = implicit_default(type_)
        if isinstance(implicit, list | Struct):
            spec.default_factory = lambda: implicit_default(type_)
            return dataclasses.field(default_factory=spec.default_factory, metadata={"kafka": spec})
        default = implicit
    spec.default = default
    return dataclasses.field(default=default, metadata={"kafka": spec})


# --- the base classes -------------------------------------------------------------------------------


@dataclass_transform(kw_only_default=True, field_specifiers=(field,))
class Struct:
    """A versioned struct; message bodies, headers and nested structs all derive from it."""

    # Flexible versions of a top-level struct (headers, internal-topic schemas); a nested struct always
    # follows the message it is encoded in.
    FLEXIBLE_VERSIONS: ClassVar[str] = "none"
    _FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    _flexible: ClassVar[VersionRange] = None
    _codecs: ClassVar[dict[tuple[int, bool], _Codec]]
    # Tagged fields this codec did not recognise when decoding; written back unchanged on encode.
    _unknown_tagged_fields: ClassVar[Sequence[tuple[int, bytes]]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(cls, kw_only=True, repr=False, eq=True)
        specs = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            spec = f.metadata.get("kafka")
            if spec is None:
                raise TypeError(f"{cls.__qualname__}.{f.name} is not declared with field()")
            spec.name = f.name
            specs.append(spec)
        cls._FIELDS = tuple(specs)
        cls._flexible = parse_versions(cls.FLEXIBLE_VERSIONS)
        cls._codecs = {}

    def __repr__(self) -> str:
        parts = []
        for spec in self._FIELDS:
            value = getattr(self, spec.name)
            if isinstance(value, memoryview | bytearray):
                value = bytes(value)
            parts.append(f"{spec.name}={value!r}")
        if self._unknown_tagged_fields:
            parts.append(f"_unknown_tagged_fields={self._unknown_tagged_fields!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    @classmethod
    def fields(cls) -> tuple[FieldSpec, ...]:
        return cls._FIELDS

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return in_range(version, cls._flexible)

    @classmethod
    def _check_version(cls, version: int) -> None:
        """Plain structs accept any version; messages restrict it."""

    @classmethod
    def _codec(cls, version: int, flexible: bool) -> _Codec:
        try:
            return cls._codecs[(version, flexible)]
        except KeyError:
            codec = _compile(cls, version, flexible)
            cls._codecs[(version, flexible)] = codec
            return codec

    def encode(self, version: int, *, flexible: bool | None = None) -> bytes:
        out = bytearray()
        self.encode_into(out, version, flexible=flexible)
        return bytes(out)

    def encode_into(self, out: bytearray, version: int, *, flexible: bool | None = None) -> None:
        """Appends the encoding to ``out`` (saves a copy when the caller builds a frame). ``flexible`` overrides
        the class's own rule: a nested struct is flexible when its message is (encoding one on its own to
        splice into a message's array)."""
        self._check_version(version)
        codec = self._codec(version, self.is_flexible(version) if flexible is None else flexible)
        try:
            codec.encode(self, out)
        except (struct.error, TypeError, AttributeError, OverflowError) as e:
            raise EncodeError(f"{type(self).__qualname__} v{version}: {e}") from e

    def size(self, version: int) -> int:
        self._check_version(version)
        codec = self._codec(version, self.is_flexible(version))
        try:
            return codec.size(self)
        except (TypeError, AttributeError) as e:
            raise EncodeError(f"{type(self).__qualname__} v{version}: {e}") from e

    @classmethod
    def decode(cls: type[S], buf: P.Buffer, version: int) -> S:
        """Decodes exactly ``buf``: trailing bytes are an error."""
        obj, end = cls.decode_from(buf, version, 0)
        if end != len(buf):
            raise DecodeError(f"{cls.__qualname__} v{version}: {len(buf) - end} trailing bytes")
        return obj

    @classmethod
    def decode_from(cls: type[S], buf: P.Buffer, version: int, pos: int = 0) -> tuple[S, int]:
        """Decodes one instance starting at ``pos``; returns it and the position just after it."""
        cls._check_version(version)
        codec = cls._codec(version, cls.is_flexible(version))
        try:
            return codec.decode(buf, pos)
        except struct.error as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: truncated ({e})") from None
        except (IndexError, UnicodeDecodeError, RecursionError, MemoryError, OverflowError) as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: {type(e).__name__} {e}") from None


class Message(Struct):
    """A request or response body of one API key, valid in a range of versions."""

    API_KEY: ClassVar[int] = -1
    VALID_VERSIONS: ClassVar[str] = "none"
    _valid: ClassVar[tuple[int, int]] = (0, -1)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        valid = parse_versions(cls.VALID_VERSIONS)
        cls._valid = valid if valid is not None else (0, -1)

    @classmethod
    def valid_versions(cls) -> tuple[int, int]:
        return cls._valid

    @classmethod
    def flexible_versions(cls) -> VersionRange:
        return cls._flexible

    @classmethod
    def _check_version(cls, version: int) -> None:
        lo, hi = cls._valid
        if not lo <= version <= hi:
            raise UnsupportedVersionError(
                cls.API_KEY, version, f"{cls.__qualname__} has no version {version} (valid {lo}-{hi})"
            )


class Request(Message):
    KIND: ClassVar[str] = "request"


class Response(Message):
    KIND: ClassVar[str] = "response"


# --- the compiler -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Codec:
    encode: Callable[[Any, bytearray], None]
    decode: Callable[[P.Buffer, int], tuple[Any, int]]
    size: Callable[[Any], int]


_STRING_IO = {
    # (type, compact, nullable) -> (writer, reader, sizer) in primitives
    (False, False): ("write_string", "read_string", "size_string"),
    (False, True): ("write_nullable_string", "read_nullable_string", "size_nullable_string"),
    (True, False): ("write_compact_string", "read_compact_string", "size_compact_string"),
    (True, True): (
        "write_compact_nullable_string",
        "read_compact_nullable_string",
        "size_compact_nullable_string",
    ),
}
_BYTES_IO = {
    (False, False): ("write_bytes", "read_bytes", "size_bytes"),
    (False, True): ("write_nullable_bytes", "read_nullable_bytes", "size_nullable_bytes"),
    (True, False): ("write_compact_bytes", "read_compact_bytes", "size_compact_bytes"),
    (True, True): ("write_compact_nullable_bytes", "read_compact_nullable_bytes", "size_compact_nullable_bytes"),
}
_RECORDS_IO = {
    (False, False): ("write_bytes", "read_records", "size_bytes"),
    (False, True): ("write_nullable_bytes", "read_nullable_records", "size_nullable_bytes"),
    (True, False): ("write_compact_bytes", "read_compact_records", "size_compact_bytes"),
    (True, True): ("write_compact_nullable_bytes", "read_compact_nullable_records", "size_compact_nullable_bytes"),
}


class _Gen:
    """Accumulates the source and the namespace of one (struct, version, flexible) codec."""

    def __init__(self, cls: type[Struct], version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.ns: dict[str, Any] = {
            "P": P,
            "_new": object.__new__,
            "_C": cls,
            "EncodeError": EncodeError,
            "DecodeError": DecodeError,
            "_pack": struct.pack,
            "_unpack_from": struct.unpack_from,
            "_uv": P.encode_unsigned_varint,
            "_uvs": P.size_unsigned_varint,
            "_ruv": P.read_unsigned_varint,
            "_alen": P.read_array_length,
            "_calen": P.read_compact_array_length,
            "_i16": P.INT16.unpack_from,
            "_i32": P.INT32.unpack_from,
            "_str": str,
            "_mv": memoryview,
        }
        for name in ("write", "read", "size"):
            for key in ("string", "nullable_string", "compact_string", "compact_nullable_string"):
                self.ns[f"{name}_{key}"] = getattr(P, f"{name}_{key}")
        for table in (_BYTES_IO, _RECORDS_IO):
            for names in table.values():
                for n in names:
                    self.ns[n] = getattr(P, n)
        self.counter = 0

    def const(self, value: Any, prefix: str = "_k") -> str:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        self.ns[name] = value
        return name

    def var(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def child(self, struct_cls: type[Struct]) -> tuple[str, str, str]:
        codec = struct_cls._codec(self.version, self.flexible)
        return self.const(codec.encode, "_ce"), self.const(codec.decode, "_cd"), self.const(codec.size, "_cs")

    def compact(self, spec: FieldSpec) -> bool:
        if not self.flexible:
            return False
        return not spec.flexible_override or in_range(self.version, spec.flexible)

    def where(self, spec: FieldSpec) -> str:
        return f"{self.cls.__qualname__}.{spec.name} v{self.version}"

    # - encode -

    def enc_value(
        self, lines: list[str], ind: str, out: str, expr: str, ftype: Any, nullable: bool, compact: bool, spec: FieldSpec
    ) -> None:
        """Lines that append the encoding of ``expr`` (a local name) to ``out``."""
        if isinstance(ftype, ArrayType):
            elem = ftype.element
            if nullable:
                lines.append(f"{ind}if {expr} is None:")
                null = self.const(b"\x00" if compact else b"\xff\xff\xff\xff")
                lines.append(f"{ind}    {out} += {null}")
                lines.append(f"{ind}else:")
            else:
                lines.append(f"{ind}if {expr} is None:")
                msg = self.const(f"{self.where(spec)} is not nullable")
                lines.append(f"{ind}    raise EncodeError({msg})")
                lines.append(f"{ind}else:")
            ind2 = ind + "    "
            if compact:
                lines.append(f"{ind2}{out} += _uv(len({expr}) + 1)")
            else:
                lines.append(f"{ind2}{out} += _pack('>i', len({expr}))")
            if isinstance(elem, FieldType) and elem.fmt:
                lines.append(f"{ind2}{out} += _pack('>%d{elem.fmt}' % len({expr}), *{expr})")
            else:
                e = self.var("_e")
                lines.append(f"{ind2}for {e} in {expr}:")
                if isinstance(elem, type):
                    enc, _, _ = self.child(elem)
                    lines.append(f"{ind2}    {enc}({e}, {out})")
                else:
                    self.enc_value(lines, ind2 + "    ", out, e, elem, False, compact, spec)
            return
        if isinstance(ftype, type):
            enc, _, _ = self.child(ftype)
            lines.append(f"{ind}{enc}({expr}, {out})")
            return
        if ftype.fmt:
            lines.append(f"{ind}{out} += _pack('>{ftype.fmt}', {expr})")
        elif ftype is STRING:
            lines.append(f"{ind}{_STRING_IO[(compact, nullable)][0]}({out}, {expr})")
        elif ftype is BYTES:
            lines.append(f"{ind}{_BYTES_IO[(compact, nullable)][0]}({out}, {expr})")
        elif ftype is RECORDS:
            lines.append(f"{ind}{_RECORDS_IO[(compact, nullable)][0]}({out}, {expr})")
        elif ftype is UUID:
            lines.append(f"{ind}P.write_uuid({out}, {expr})")
        else:  # pragma: no cover - declarations only use the types above
            raise TypeError(f"unknown field type {ftype!r}")

    # - decode -

    def dec_value(self, lines: list[str], ind: str, target: str, ftype: Any, nullable: bool, compact: bool, spec: FieldSpec) -> None:
        """Lines that read one value at ``pos`` into ``target`` and advance ``pos``."""
        if isinstance(ftype, ArrayType):
            elem = ftype.element
            n = self.var("_n")
            lines.append(f"{ind}{n}, pos = {'_calen' if compact else '_alen'}(buf, pos)")
            lines.append(f"{ind}if {n} is None:")
            if nullable:
                lines.append(f"{ind}    {target} = None")
            else:
                msg = self.const(f"null array for non-nullable {self.where(spec)}")
                lines.append(f"{ind}    raise DecodeError({msg})")
            lines.append(f"{ind}else:")
            ind2 = ind + "    "
            if isinstance(elem, FieldType) and elem.fmt:
                lines.append(f"{ind2}{target} = list(_unpack_from('>%d{elem.fmt}' % {n}, buf, pos))")
                lines.append(f"{ind2}pos += {elem.width} * {n}")
                return
            lst = self.var("_l")
            e = self.var("_v")
            lines.append(f"{ind2}{lst} = []")
            lines.append(f"{ind2}for _ in range({n}):")
            if isinstance(elem, type):
                _, dec, _ = self.child(elem)
                lines.append(f"{ind2}    {e}, pos = {dec}(buf, pos)")
            else:
                self.dec_value(lines, ind2 + "    ", e, elem, False, compact, spec)
            lines.append(f"{ind2}    {lst}.append({e})")
            lines.append(f"{ind2}{target} = {lst}")
            return
        if isinstance(ftype, type):
            _, dec, _ = self.child(ftype)
            lines.append(f"{ind}{target}, pos = {dec}(buf, pos)")
            return
        if ftype.fmt:
            lines.append(f"{ind}{target}, = _unpack_from('>{ftype.fmt}', buf, pos)")
            lines.append(f"{ind}pos += {ftype.width}")
        elif ftype in (STRING, BYTES, RECORDS):
            self.dec_length_prefixed(lines, ind, target, ftype, nullable, compact, spec)
        elif ftype is UUID:
            lines.append(f"{ind}{target}, pos = P.read_uuid(buf, pos)")
        else:  # pragma: no cover
            raise TypeError(f"unknown field type {ftype!r}")

    def dec_length_prefixed(
        self, lines: list[str], ind: str, target: str, ftype: FieldType, nullable: bool, compact: bool, spec: FieldSpec
    ) -> None:
        """Strings, bytes and records inlined: these are most of the fields on the produce/fetch paths.

        Truncation surfaces as struct.error/IndexError, which the entry points turn into DecodeError.
        """
        n = self.var("_n")
        end = self.var("_end")
        if compact:
            lines.append(f"{ind}{n} = buf[pos]")
            lines.append(f"{ind}if {n} < 0x80:")
            lines.append(f"{ind}    pos += 1")
            lines.append(f"{ind}else:")
            lines.append(f"{ind}    {n}, pos = _ruv(buf, pos)")
            lines.append(f"{ind}{n} -= 1")
        else:
            lines.append(f"{ind}{n}, = {'_i16' if ftype is STRING else '_i32'}(buf, pos)")
            lines.append(f"{ind}pos += {2 if ftype is STRING else 4}")
        lines.append(f"{ind}if {n} < 0:")
        bad = self.const(f"invalid length for {self.where(spec)}")
        if nullable:
            lines.append(f"{ind}    if {n} != -1:")
            lines.append(f"{ind}        raise DecodeError({bad})")
            lines.append(f"{ind}    {target} = None")
        else:
            lines.append(f"{ind}    raise DecodeError({bad})")
        lines.append(f"{ind}else:")
        lines.append(f"{ind}    {end} = pos + {n}")
        short = self.const(f"truncated {self.where(spec)}")
        lines.append(f"{ind}    if {end} > len(buf):")
        lines.append(f"{ind}        raise DecodeError({short})")
        if ftype is STRING:
            lines.append(f"{ind}    {target} = _str(buf[pos:{end}], 'utf-8')")
        elif ftype is BYTES:
            lines.append(f"{ind}    {target} = bytes(buf[pos:{end}])")
        else:
            lines.append(f"{ind}    {target} = _mv(buf)[pos:{end}]")
        lines.append(f"{ind}    pos = {end}")

    # - size -

    def size_value(self, lines: list[str], ind: str, acc: str, expr: str, ftype: Any, nullable: bool, compact: bool) -> None:
        """Lines that add the encoded size of ``expr`` to ``acc``."""
        if isinstance(ftype, ArrayType):
            elem = ftype.element
            lines.append(f"{ind}if {expr} is None:")
            lines.append(f"{ind}    {acc} += {1 if compact else 4}")
            lines.append(f"{ind}else:")
            ind2 = ind + "    "
            if compact:
                lines.append(f"{ind2}{acc} += _uvs(len({expr}) + 1)")
            else:
                lines.append(f"{ind2}{acc} += 4")
            if isinstance(elem, FieldType) and elem.fmt:
                lines.append(f"{ind2}{acc} += {elem.width} * len({expr})")
                return
            e = self.var("_e")
            lines.append(f"{ind2}for {e} in {expr}:")
            if isinstance(elem, type):
                _, _, sz = self.child(elem)
                lines.append(f"{ind2}    {acc} += {sz}({e})")
            else:
                self.size_value(lines, ind2 + "    ", acc, e, elem, False, compact)
            return
        if isinstance(ftype, type):
            _, _, sz = self.child(ftype)
            lines.append(f"{ind}{acc} += {sz}({expr})")
        elif ftype.fmt:
            lines.append(f"{ind}{acc} += {ftype.width}")
        elif ftype is STRING:
            lines.append(f"{ind}{acc} += {_STRING_IO[(compact, nullable)][2]}({expr})")
        elif ftype is BYTES:
            lines.append(f"{ind}{acc} += {_BYTES_IO[(compact, nullable)][2]}({expr})")
        elif ftype is RECORDS:
            lines.append(f"{ind}{acc} += {_RECORDS_IO[(compact, nullable)][2]}({expr})")
        elif ftype is UUID:
            lines.append(f"{ind}{acc} += 16")
        else:  # pragma: no cover
            raise TypeError(f"unknown field type {ftype!r}")


def _compile(cls: type[Struct], version: int, flexible: bool) -> _Codec:
    g = _Gen(cls, version, flexible)
    enc = ["def _encode(o, out):"]
    dec = ["def _decode(buf, pos):", "    o = _new(_C)"]
    siz = ["def _size(o):", "    s = 0"]  # line 1 is patched with the fixed-width total
    fixed_size = 0
    tagged: list[FieldSpec] = []
    run: list[FieldSpec] = []  # consecutive fixed-width fields, packed/unpacked with one struct call

    def flush() -> None:
        nonlocal fixed_size
        if not run:
            return
        fmt = ">" + "".join(s.type.fmt for s in run)  # type: ignore[union-attr]
        packer = g.const(struct.Struct(fmt))
        attrs = ", ".join(f"o.{s.name}" for s in run)
        enc.append(f"    out += {packer}.pack({attrs})")
        dec.append(f"    {attrs}, = {packer}.unpack_from(buf, pos)")
        width = struct.calcsize(fmt)
        dec.append(f"    pos += {width}")
        fixed_size += width
        run.clear()

    for spec in cls._FIELDS:
        if flexible and in_range(version, spec.tagged):
            tagged.append(spec)
            dec.append(f"    o.{spec.name} = {_fresh(g, spec)}")
            continue
        if not in_range(version, spec.versions):
            default = g.const(spec.default_value())
            if not spec.ignorable:
                msg = g.const(f"{g.where(spec)}: field not in this version and not at its default")
                for lines in (enc, siz):
                    lines.append(f"    if o.{spec.name} != {default}:")
                    lines.append(f"        raise EncodeError({msg})")
            dec.append(f"    o.{spec.name} = {_fresh(g, spec)}")
            continue
        ftype = spec.type
        if isinstance(ftype, FieldType) and not isinstance(ftype, ArrayType) and ftype.fmt:
            run.append(spec)
            continue
        flush()
        nullable = in_range(version, spec.nullable)
        compact = g.compact(spec)
        v = g.var("_x")
        enc.append(f"    {v} = o.{spec.name}")
        g.enc_value(enc, "    ", "out", v, ftype, nullable, compact, spec)
        g.dec_value(dec, "    ", f"o.{spec.name}", ftype, nullable, compact, spec)
        siz.append(f"    {v} = o.{spec.name}")
        g.size_value(siz, "    ", "s", v, ftype, nullable, compact)
    flush()
    siz[1] = f"    s = {fixed_size}"

    if flexible:
        _tagged_section(g, enc, dec, siz, tagged)

    enc.append("    return None")
    dec.append("    return o, pos")
    siz.append("    return s")
    source = "\n".join(enc + dec + siz) + "\n"
    code = compile(source, f"<codec {cls.__qualname__} v{version}{' flexible' if flexible else ''}>", "exec")
    exec(code, g.ns)
    return _Codec(encode=g.ns["_encode"], decode=g.ns["_decode"], size=g.ns["_size"])


def _fresh(g: _Gen, spec: FieldSpec) -> str:
    """An expression giving the default; mutable defaults are rebuilt for every decoded object."""
    if spec.default_factory is not None:
        return f"{g.const(spec.default_factory)}()"
    return g.const(spec.default)


def _tagged_section(g: _Gen, enc: list[str], dec: list[str], siz: list[str], tagged: list[FieldSpec]) -> None:
    tagged.sort(key=lambda s: s.tag or 0)
    if not tagged:
        enc.append("    _t = o._unknown_tagged_fields")
        enc.append("    if _t:")
        enc.append("        P.write_tagged_fields(out, _t)")
        enc.append("    else:")
        enc.append("        out.append(0)")
        siz.append("    _t = o._unknown_tagged_fields")
        siz.append("    s += P.size_tagged_fields(_t) if _t else 1")
    else:
        enc.append("    _t = []")
        siz.append("    _t = 0")
        siz.append("    _nt = len(o._unknown_tagged_fields)")
        for spec in tagged:
            default = g.const(spec.default_value())
            nullable = in_range(g.version, spec.nullable)
            v = g.var("_x")
            b = g.var("_b")
            enc.append(f"    {v} = o.{spec.name}")
            enc.append(f"    if {v} != {default}:")
            enc.append(f"        {b} = bytearray()")
            g.enc_value(enc, "        ", b, v, spec.type, nullable, True, spec)
            enc.append(f"        _t.append(({spec.tag}, {b}))")
            z = g.var("_z")
            siz.append(f"    {v} = o.{spec.name}")
            siz.append(f"    if {v} != {default}:")
            siz.append(f"        {z} = 0")
            g.size_value(siz, "        ", z, v, spec.type, nullable, True)
            siz.append(f"        _t += _uvs({spec.tag}) + _uvs({z}) + {z}")
            siz.append("        _nt += 1")
        enc.append("    if o._unknown_tagged_fields:")
        enc.append("        _t = sorted(_t + list(o._unknown_tagged_fields), key=lambda t: t[0])")
        enc.append("    P.write_tagged_fields(out, _t)")
        siz.append("    for _tag, _raw in o._unknown_tagged_fields:")
        siz.append("        _t += _uvs(_tag) + _uvs(len(_raw)) + len(_raw)")
        siz.append("    s += _uvs(_nt) + _t")

    # Decoding: known tags go through a per-tag value reader, the rest are kept raw.
    readers: dict[int, tuple[str, Callable[..., Any]]] = {}
    for spec in tagged:
        lines = ["def _read(buf, pos):"]
        g.dec_value(lines, "    ", "v", spec.type, in_range(g.version, spec.nullable), True, spec)
        lines.append("    return v, pos")
        ns = dict(g.ns)
        exec(compile("\n".join(lines) + "\n", f"<tag {spec.tag} of {g.cls.__qualname__}>", "exec"), ns)
        assert spec.tag is not None
        readers[spec.tag] = (spec.name, ns["_read"])
    known = g.const(readers)
    dec.append("    _nt, pos = _ruv(buf, pos)")
    dec.append("    if _nt:")
    dec.append(f"        pos = _read_tags(o, buf, pos, _nt, {known})")
    g.ns["_read_tags"] = _read_tags


def _read_tags(
    obj: Struct,
    buf: P.Buffer,
    pos: int,
    count: int,
    known: dict[int, tuple[str, Callable[[P.Buffer, int], tuple[Any, int]]]],
) -> int:
    unknown: P.TaggedFields = []
    last = -1
    for _ in range(count):
        start = pos
        tag, pos = P.read_unsigned_varint(buf, pos)
        if tag <= last:
            raise DecodeError(f"tagged field {tag} out of order at byte {start}")
        last = tag
        size, pos = P.read_unsigned_varint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} at byte {start} overruns the buffer")
        entry = known.get(tag)
        if entry is None:
            unknown.append((tag, bytes(buf[pos:end])))
        else:
            name, read = entry
            value, stop = read(memoryview(buf)[:end], pos)
            if stop != end:
                raise DecodeError(f"tagged field {tag} at byte {start}: {end - stop} bytes left over")
            setattr(obj, name, value)
        pos = end
    if unknown:
        obj._unknown_tagged_fields = unknown  # type: ignore[misc]
    return pos
