"""What the LDC tests share: the product brief's bill example as a model and rules, and broker settings.

Users' bills live in the RZone owning their uid (R1: 00-49, R2: 50-99); a bill produced in the other region
is copied there by the router (``bills-r1-to-r2`` / ``bills-r2-to-r1``, by ``__UNIT.TARGET_R``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sofakafka.ldc import UNIT_ORIUNIT, UNIT_TARGET_C, UNIT_TARGET_G, UNIT_TARGET_R

BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"}
"""A single test broker for the LDC modules: groups form at once, and __consumer_offsets loads quickly."""


def bill_model(instance: str = "ANT", *, gzone: bool = True,
               czones: Sequence[tuple[str, str]] = (("CZ01", "hangzhou"),)) -> str:
    """The model as TOML: RZones R1 (hangzhou, uids 00-49) and R2 (shanghai, 50-99), the GZone GZ00 in
    hangzhou unless ``gzone`` is false, and a CZone per (name, city) of ``czones``."""
    text = (f'instance = "{instance}"\n'
            '[cells.R1]\nzone = "RZone"\ncity = "hangzhou"\nuids = ["00-49"]\n'
            '[cells.R2]\nzone = "RZone"\ncity = "shanghai"\nuids = ["50-99"]\n')
    if gzone:
        text += '[cells.GZ00]\nzone = "GZone"\ncity = "hangzhou"\n'
    for name, city in czones:
        text += f'[cells.{name}]\nzone = "CZone"\ncity = "{city}"\n'
    return text


RULE_R1_TO_R2 = """
[[rules]]
name = "bills-r1-to-r2"
from = "R1"
topic = "bills"
to = ["R2"]
[rules.match]
headers = { "__UNIT.TARGET_R" = "R2" }
"""

RULE_R2_TO_R1 = """
[[rules]]
name = "bills-r2-to-r1"
from = "R2"
topic = "bills"
to = ["R1"]
[rules.match]
headers = { "__UNIT.TARGET_R" = "R1" }
"""

BILL_RULES = RULE_R1_TO_R2 + RULE_R2_TO_R1


MIXED: list[tuple[bytes, list[tuple[str, bytes]]]] = [
    (b"none", []),
    (b"ori-R1", [(UNIT_ORIUNIT, b"R1")]),
    (b"ori-GZ", [(UNIT_ORIUNIT, b"GZ00"), (UNIT_TARGET_G, b"GZ00")]),
    (b"g-GZ", [(UNIT_ORIUNIT, b"R2"), (UNIT_TARGET_G, b"GZ00")]),
    (b"g-other", [(UNIT_TARGET_G, b"GZ01")]),
    (b"c-CZ", [(UNIT_ORIUNIT, b"R1"), (UNIT_TARGET_C, b"CZ01")]),
    (b"c-other", [(UNIT_TARGET_C, b"CZ02")]),
    (b"r-R1", [(UNIT_TARGET_R, b"R1")]),
    (b"r-R2", [(UNIT_TARGET_R, b"R2")]),
    (b"r-R1-dup", [(UNIT_TARGET_R, b"R2"), (UNIT_TARGET_R, b"R1")]),
    (b"r-R1-lower", [("__unit.target_r", b"R1")]),
]
"""(key, headers) of records a stock producer writes into a cell's physical topic; which a subscription takes
is decided by header alone (header names are case-sensitive, a repeated header matches by any value)."""
