"""Codecs: round trips, the xerial snappy framing, lz4's magic-0 header checksum, cross-reads."""

from __future__ import annotations

import struct
import warnings
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from sofakafka.protocol.errors import DecodeError, EncodeError
from sofakafka.protocol.records.compression import (
    XERIAL_CHUNK,
    CompressionType,
    compress,
    decompress,
    xxh32,
)

with warnings.catch_warnings():
    # kafka-python 3.0 calls a deprecated importlib API at import; it is only an independent reader here.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_python_codec

payloads = st.one_of(st.binary(max_size=2048), st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8),
                                                         st.integers(1, 20_000)))


@given(payloads, st.sampled_from(list(CompressionType)), st.sampled_from([0, 1, 2]))
def test_every_codec_round_trips_for_every_magic(data: bytes, codec: CompressionType, magic: int) -> None:
    if codec == CompressionType.ZSTD and magic < 2:
        with pytest.raises(EncodeError):
            compress(codec, data, magic=magic)
        return
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0x02CC5D05),
        (b"a", 0x550D7456),
        (b"abc", 0x32D153FF),
        (b"Nobody inspects the spammish repetition", 0xE2293B2F),
    ],
)
def test_xxh32_matches_reference_vectors(data: bytes, expected: int) -> None:
    assert xxh32(data) == expected


def test_gzip_output_is_a_standard_gzip_member() -> None:
    out = compress(CompressionType.GZIP, b"hello" * 100)
    assert out[:2] == b"\x1f\x8b"
    assert kafka_python_codec.gzip_decode(out) == b"hello" * 100


def test_gzip_reads_concatenated_members() -> None:
    a = zlib.compressobj(wbits=31)
    b = zlib.compressobj(wbits=31)
    data = a.compress(b"one") + a.flush() + b.compress(b"two") + b.flush()
    assert decompress(CompressionType.GZIP, data) == b"onetwo"


def test_snappy_writes_xerial_framing_with_32k_chunks() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes -> 3 chunks
    out = compress(CompressionType.SNAPPY, data)
    assert out[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack_from(">ii", out, 8) == (1, 1)
    pos, chunks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks] == [XERIAL_CHUNK, XERIAL_CHUNK, len(data) - 2 * XERIAL_CHUNK]
    assert b"".join(chunks) == data


def test_snappy_decodes_hand_built_xerial_stream() -> None:
    parts = [b"first chunk " * 10, b"second"]
    stream = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for p in parts:
        block = bytes(cramjam.snappy.compress_raw(p))
        stream += struct.pack(">i", len(block)) + block
    assert decompress(CompressionType.SNAPPY, stream) == b"".join(parts)


def test_snappy_decodes_a_raw_block_without_framing() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"librdkafka style" * 5))
    assert decompress(CompressionType.SNAPPY, raw) == b"librdkafka style" * 5


def test_snappy_truncated_xerial_chunk_is_a_decode_error() -> None:
    out = compress(CompressionType.SNAPPY, b"x" * 1000)
    with pytest.raises(DecodeError):
        decompress(CompressionType.SNAPPY, out[:-3])


def _lz4_header(frame: bytes) -> tuple[int, int]:
    flg = frame[4]
    hc_at = 6 + (8 if flg & 0x08 else 0)
    return hc_at, frame[hc_at]


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_frame_for_magic_1_and_2_is_standard(magic: int) -> None:
    out = compress(CompressionType.LZ4, b"abc" * 1000, magic=magic)
    assert out[:4] == b"\x04\x22\x4d\x18"
    assert out[4] == 0x60  # version 01, independent blocks, no checksums, no content size
    assert out[5] == 0x40  # 64 KiB max block
    hc_at, hc = _lz4_header(out)
    assert hc == (xxh32(out[4:hc_at]) >> 8) & 0xFF
    assert lz4.frame.decompress(out) == b"abc" * 1000


def test_lz4_frame_for_magic_0_uses_the_broken_header_checksum() -> None:
    out = compress(CompressionType.LZ4, b"abc" * 1000, magic=0)
    hc_at, hc = _lz4_header(out)
    assert hc == (xxh32(out[:hc_at]) >> 8) & 0xFF
    assert hc != (xxh32(out[4:hc_at]) >> 8) & 0xFF
    assert decompress(CompressionType.LZ4, out, magic=0) == b"abc" * 1000
    # Apart from that byte it is a standard frame: fixing the byte makes the lz4 library read it.
    fixed = bytearray(out)
    fixed[hc_at] = (xxh32(out[4:hc_at]) >> 8) & 0xFF
    assert lz4.frame.decompress(bytes(fixed)) == b"abc" * 1000


def test_lz4_old_checksum_frame_with_content_size_decodes() -> None:
    frame = bytearray(lz4.frame.compress(b"payload" * 50, store_size=True))
    hc_at, _ = _lz4_header(bytes(frame))
    assert hc_at == 14
    frame[hc_at] = (xxh32(bytes(frame[:hc_at])) >> 8) & 0xFF
    for magic in (0, 1, 2):
        assert decompress(CompressionType.LZ4, bytes(frame), magic=magic) == b"payload" * 50


def test_lz4_bad_header_checksum_is_rejected() -> None:
    frame = bytearray(compress(CompressionType.LZ4, b"x" * 100))
    frame[6] ^= 0x5A
    with pytest.raises(DecodeError, match="checksum"):
        decompress(CompressionType.LZ4, bytes(frame))


def test_zstd_reads_multiple_frames_and_frames_without_content_size() -> None:
    a = zstandard.ZstdCompressor(write_content_size=False).compress(b"one" * 10)
    b = zstandard.ZstdCompressor().compress(b"two")
    assert decompress(CompressionType.ZSTD, a + b) == b"one" * 10 + b"two"


def test_zstd_is_refused_in_legacy_message_sets() -> None:
    with pytest.raises(DecodeError):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"x"), magic=1)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_a_decode_error_for_every_codec(codec: int) -> None:
    with pytest.raises(DecodeError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!!" if codec == 2
                   else b"definitely not compressed data")
