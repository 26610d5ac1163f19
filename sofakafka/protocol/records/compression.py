"""Compression codecs for record batches and message sets (FORMATS.md §4).

Every codec is one whole-buffer call: the caller hands over the records region (v2) or the wrapper value
(v0/v1) and gets bytes back. Failures raise :class:`DecodeError`; the reader that knows the batch position
turns them into ``CorruptRecordError``.

Library choices:
- gzip: stdlib ``zlib`` (wbits=31 gives the RFC 1952 member format the Java client writes).
- snappy: ``cramjam`` raw blocks; the xerial stream framing around them is a 16-byte header plus
  length-prefixed chunks, written here because no library speaks xerial.
- lz4: ``lz4.frame`` for the frame; the magic-0 header-checksum quirk is a one-byte patch computed with a
  small xxHash32 below (no xxhash package is needed for a <=19-byte header).
- zstd: ``zstandard`` (the reference libzstd binding; reads multi-frame streams).
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from sofakafka.protocol.errors import DecodeError, EncodeError
from sofakafka.protocol.records.buffer import Buffer


class CompressionType(IntEnum):
    """Codec ids as stored in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


CODEC_MASK = 0x07

# xerial snappy-java stream header: magic, version 1, min compatible version 1.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's default uncompressed chunk size; readers accept any chunking.
XERIAL_CHUNK = 32 * 1024

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"

# Java's ZstdOutputStream uses libzstd's default level.
ZSTD_LEVEL = 3


def compress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Compress ``data`` the way a Kafka 2.6 client would for a batch of ``magic``."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        return _lz4_compress(data, broken_header_checksum=magic == 0)
    if codec == CompressionType.ZSTD:
        if magic < 2:
            raise EncodeError("zstd is only valid in record batch v2")
        return bytes(zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False).compress(data))
    raise EncodeError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer, *, magic: int = 2) -> bytes:
    """Inverse of :func:`compress`, lenient the way Kafka's readers are (see each codec)."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return _gzip_decompress(data)
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return _lz4_decompress(data)
        if codec == CompressionType.ZSTD:
            if magic < 2:
                raise DecodeError("zstd is not valid in a magic 0/1 message set")
            return bytes(zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read())
    except DecodeError:
        raise
    except (zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError, ValueError) as e:
        # lz4.frame reports bad frames as RuntimeError; zstandard as ZstdError.
        raise DecodeError(f"{CompressionType(codec).name.lower()} decompression failed: {e}") from e
    raise DecodeError(f"unknown compression codec {codec}")


# -- gzip ---------------------------------------------------------------------------------------------


def _gzip_decompress(data: Buffer) -> bytes:
    # Concatenated members are valid gzip; some writers flush one member per chunk.
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        out += d.decompress(rest)
        if not d.eof:
            raise DecodeError("truncated gzip stream")
        rest = d.unused_data
        if not rest:
            return bytes(out)


# -- snappy -------------------------------------------------------------------------------------------


def _xerial_compress(data: Buffer) -> bytes:
    mv = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(mv), XERIAL_CHUNK):
        block = bytes(cramjam.snappy.compress_raw(mv[start : start + XERIAL_CHUNK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        # Non-Java clients (librdkafka, kafka-python) may send one raw block; Java readers accept it too.
        return bytes(cramjam.snappy.decompress_raw(mv))
    if len(mv) < len(XERIAL_HEADER):
        raise DecodeError("truncated xerial snappy header")
    out = bytearray()
    pos = len(XERIAL_HEADER)
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise DecodeError("truncated xerial snappy chunk length")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > len(mv):
            raise DecodeError(f"xerial snappy chunk of {n} bytes overruns the stream")
        out += cramjam.snappy.decompress_raw(mv[pos : pos + n])
        pos += n
    return bytes(out)


# -- lz4 ----------------------------------------------------------------------------------------------


def _lz4_compress(data: Buffer, *, broken_header_checksum: bool) -> bytes:
    # KafkaLZ4BlockOutputStream: independent 64 KiB blocks, no block/content checksum, no content size.
    frame = bytearray(
        lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )
    if broken_header_checksum:
        hc_at = _lz4_header_checksum_index(frame)
        frame[hc_at] = (xxh32(bytes(frame[:hc_at])) >> 8) & 0xFF
    return bytes(frame)


def _lz4_header_checksum_index(frame: Buffer) -> int:
    if len(frame) < 7 or bytes(frame[:4]) != LZ4_FRAME_MAGIC:
        raise DecodeError("not an lz4 frame (bad magic)")
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _lz4_decompress(data: Buffer) -> bytes:
    frame = bytearray(data)
    hc_at = _lz4_header_checksum_index(frame)
    if hc_at >= len(frame):
        raise DecodeError("truncated lz4 frame header")
    stored = frame[hc_at]
    if stored != (xxh32(bytes(frame[4:hc_at])) >> 8) & 0xFF:
        # Magic-0 writers (Kafka before KAFKA-3160's fix, kafka-python, Kafka itself for v0) hash the
        # magic bytes too. Accept either form for every magic, as a tolerant reader; restore the
        # standard checksum so the library's own header check passes.
        if stored != (xxh32(bytes(frame[:hc_at])) >> 8) & 0xFF:
            raise DecodeError("lz4 frame header checksum mismatch")
        frame[hc_at] = (xxh32(bytes(frame[4:hc_at])) >> 8) & 0xFF
    return bytes(lz4.frame.decompress(bytes(frame)))


_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32; only ever used on lz4 frame headers, so clarity wins over speed."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
