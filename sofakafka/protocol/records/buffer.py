"""The buffer types record code reads from: anything ``struct.unpack_from`` and slicing accept.

Storage hands in memory-mapped segments as ``memoryview``; the produce path hands in ``bytearray`` so
offsets can be rewritten in place.
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview
