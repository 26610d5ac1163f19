"""Bad request frames for every API and version a broker advertises.

Three kinds, each a complete frame (size prefix included):

- **well-formed but wrong**: a request of the API at the version, encoded correctly, its fields drawn by
  hypothesis from the message declarations (``tests/unit/protocol/strategies.py``): topics that do not exist
  (and, a third of the time, ones that do: ``KNOWN_NAMES``), negative counts, empty and absurd strings, random
  record bytes, groups in no state, ids of nobody. Fields that
  make a broker wait on purpose (``*timeout*``, ``max_wait_ms``) are clamped to a second, so that a request still
  unanswered after the driver's bound means a hang, not a long poll the client asked for.
- **mutated**: a well-formed frame damaged the way hostile peers and corruption look: bits flipped, torn at a
  random byte, bytes appended or spliced out, an int16/int32 in it forged to an extreme (array and string lengths
  turned huge or negative), the header's API key, version or client id length forged.
- **random**: bytes with a size prefix and nothing else right.

A hypothesis example gives one well-formed frame; ``mutations`` derives as many damaged ones from it as asked,
with a seeded PRNG, which is how the long form reaches millions of frames at hypothesis's pace of thousands.
``fuzz_frames`` is the long form's stream: pools of well-formed examples drawn by a seeded hypothesis run, each
example followed by its derived frames, every byte of it a function of the seed.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import struct
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sofakafka.protocol.api import RequestHeader, encode_request, request_type
from sofakafka.protocol.schema import Struct, in_range
from tests.unit.protocol.strategies import message_strategy

_EXTREMES_32 = [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0, 0x00010000, 0x7FFFFFF0]
_EXTREMES_16 = [0x7FFF, 0x8000, 0xFFFF, 0, 0x0101]
WAIT_CAP_MS = 1000


def clamp_waits(message: Any) -> Any:
    """Every field whose name says it makes the broker wait is brought into [-1, WAIT_CAP_MS], recursively."""
    if isinstance(message, list):
        for item in message:
            clamp_waits(item)
        return message
    if not isinstance(message, Struct) or not is_dataclass(message):
        return message
    for f in fields(message):
        value = getattr(message, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and ("timeout" in f.name or f.name == "max_wait_ms"):
            setattr(message, f.name, max(-1, min(value, WAIT_CAP_MS)))
        elif isinstance(value, (list, Struct)):
            clamp_waits(value)
    return message


def frame(api_key: int, version: int, body: Any, correlation_id: int, client_id: str | None = "fuzz") -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                           client_id=client_id)
    payload = encode_request(header, body)
    return struct.pack(">i", len(payload)) + payload


#: Names that exist on the fuzzed broker (tests/fuzz/run.py creates the topic; "0" is its broker id) or mean
#: something to it: a random string almost never names anything, so some string fields are swapped for these
#: to reach the code behind the lookups.
KNOWN_NAMES = ["fuzz", "__consumer_offsets", "0", "fuzz-group", "", "-", "."]


def aim_names(message: Any, rng: random.Random, version: int) -> Any:
    """Replace about a third of the string fields the version carries (recursively) with ``KNOWN_NAMES``."""
    if isinstance(message, list):
        for item in message:
            aim_names(item, rng, version)
        return message
    if not isinstance(message, Struct) or not is_dataclass(message):
        return message
    specs = {spec.name: spec for spec in type(message).fields()}
    for f in fields(message):
        value = getattr(message, f.name)
        spec = specs.get(f.name)
        if isinstance(value, str) and spec is not None and in_range(version, spec.versions) and rng.random() < 0.35:
            setattr(message, f.name, rng.choice(KNOWN_NAMES))
        elif isinstance(value, (list, Struct)):
            aim_names(value, rng, version)
    return message


_STRATEGIES: dict[tuple[int, int], st.SearchStrategy[bytes]] = {}


def wellformed(api_key: int, version: int) -> st.SearchStrategy[bytes]:
    """Frames of valid encoding with hypothesis-drawn field values (correlation ids drawn too); one strategy per
    API and version, built once (building and validating them costs more than drawing from them)."""
    strategy = _STRATEGIES.get((api_key, version))
    if strategy is None:
        cls = request_type(api_key)
        strategy = _STRATEGIES[(api_key, version)] = st.builds(
            lambda body, cid, r: frame(api_key, version, clamp_waits(aim_names(body, r, version)), cid),
            message_strategy(cls, version), st.integers(0, 2**31 - 1), st.randoms(use_true_random=False))
    return strategy


def mutate(good: bytes, rng: random.Random) -> bytes:
    """One damaged copy of a well-formed frame (size prefix recomputed unless the damage is to it)."""
    body = bytearray(good[4:])
    kind = rng.randrange(9)
    if kind == 0 and body:  # bits flipped
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and body:  # torn
        del body[rng.randrange(len(body)):]
    elif kind == 2:  # bytes appended
        body += rng.randbytes(rng.randint(1, 64))
    elif kind == 3 and body:  # bytes spliced out
        i = rng.randrange(len(body))
        del body[i:i + rng.randint(1, 16)]
    elif kind == 4 and len(body) >= 4:  # an int32 forged
        i = rng.randrange(len(body) - 3)
        struct.pack_into(">I", body, i, rng.choice(_EXTREMES_32))
    elif kind == 5 and len(body) >= 2:  # an int16 forged (a string length, an error code, a key)
        i = rng.randrange(len(body) - 1)
        struct.pack_into(">H", body, i, rng.choice(_EXTREMES_16))
    elif kind == 6 and len(body) >= 4:  # the header's API key and version forged
        struct.pack_into(">hh", body, 0, rng.choice([rng.randrange(-5, 80), -1, 0x7FFF]),
                         rng.choice([rng.randrange(-2, 20), 0x7FFF, -32768]))
    elif kind == 7 and len(body) >= 10:  # the client id's length forged
        struct.pack_into(">h", body, 8, rng.choice([-2, -32768, 0x7FFF, len(body), len(body) - 9]))
    else:  # the body after the header replaced by noise
        del body[8:]
        body += rng.randbytes(rng.randint(0, 128))
    return struct.pack(">i", len(body)) + bytes(body)


def random_frame(rng: random.Random) -> bytes:
    body = rng.randbytes(rng.randint(0, 96))
    return struct.pack(">i", len(body)) + body


def mutations(good: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    """``count`` frames from one well-formed one: itself, then mostly damaged copies and some random ones."""
    yield good
    for _ in range(count - 1):
        roll = rng.random()
        if roll < 0.1:
            yield random_frame(rng)
        elif roll < 0.2:
            yield good  # the well-formed one again, as a client retrying would send it
        else:
            yield mutate(good, rng)


def derived_seed(*parts: object) -> int:
    """A 64-bit seed from the run's seed and where in the run it is used (stable across processes and runs)."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")


def draw_examples(apis: Sequence[tuple[int, int]], count: int, seed: int) -> list[bytes]:
    """About ``count`` well-formed frames of APIs and versions drawn from ``apis``, by a hypothesis run seeded with
    ``seed`` (so the same every time), generation only (nothing to shrink: no example fails)."""
    found: list[bytes] = []

    @hypothesis.seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        api_key, version = data.draw(st.sampled_from(apis), label="api")
        found.append(data.draw(wellformed(api_key, version), label="frame"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        draw()
    return found


def fuzz_frames(apis: Sequence[tuple[int, int]], per_example: int, seed: object, pool: int = 100) -> Iterator[bytes]:
    """An endless stream: pools of ``pool`` hypothesis examples (a pool's run stays small: hypothesis remembers
    every example of a run), each example followed by ``per_example - 1`` frames derived from it; pool ``k`` is
    drawn with a seed derived from ``seed`` and ``k``, its damage from a PRNG seeded the same way."""
    for k in itertools.count():
        rng = random.Random(derived_seed(seed, k, "mutations"))
        for good in draw_examples(apis, pool, derived_seed(seed, k, "examples")):
            yield from mutations(good, rng, per_example)
