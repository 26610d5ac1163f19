from __future__ import annotations

import pytest

from sofakafka.ldc import LdcModel

BILL_MODEL_TOML = """
instance = "ANT"

[cells.R1]
zone = "RZone"
city = "hangzhou"
uids = ["00-49"]

[cells.R2]
zone = "RZone"
city = "shanghai"
uids = ["50-99"]

[cells.GZ00]
zone = "GZone"
city = "hangzhou"

[cells.CZ01]
zone = "CZone"
city = "hangzhou"

[cells.CZ02]
zone = "czone"
city = "shanghai"
"""


@pytest.fixture
def model() -> LdcModel:
    return LdcModel.from_toml(BILL_MODEL_TOML)
