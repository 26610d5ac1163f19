from __future__ import annotations

import pytest

from sofakafka.ldc import LdcModel
from tests.ldc_data import bill_model

BILL_MODEL_TOML = bill_model("ANT", czones=[("CZ01", "hangzhou"), ("CZ02", "shanghai")])


@pytest.fixture
def model() -> LdcModel:
    return LdcModel.from_toml(BILL_MODEL_TOML)
