"""The demo's table and bar chart, from result rows (no Spark: the rows are what the Parquet output holds)."""

from __future__ import annotations

from datetime import datetime

from sofakafka.pipelines.demo import BAR_WIDTH, render


def row(minute: int, region: str, orders: int, cents: int) -> dict[str, object]:
    return {"window_start": datetime(2026, 11, 25, 15, minute), "region": region, "orders": orders,
            "revenue_cents": cents}


def test_no_rows_says_so() -> None:
    assert render([], ["a"]) == "(no complete minute yet)"


def test_a_row_per_minute_a_column_per_region_and_bars_for_the_last_minute() -> None:
    rows = [row(31, "cn-north", 3, 30000), row(32, "cn-north", 10, 100000), row(32, "eu-west", 5, 50000)]
    text = render(rows, ["cn-north", "eu-west"])
    lines = text.splitlines()
    assert lines[0].startswith("minute (UTC) |") and "cn-north" in lines[0] and "eu-west" in lines[0]
    assert lines[2].startswith("15:31") and lines[2].rstrip().endswith("300")  # total revenue in units
    assert lines[3].startswith("15:32") and lines[3].rstrip().endswith("1500")
    assert "minute 15:32" in text
    bars = {line.split()[0]: line.count("#") for line in lines if "#" in line}
    assert bars == {"cn-north": BAR_WIDTH, "eu-west": BAR_WIDTH // 2}  # the peak is full width, half is half
    assert "(10)" in text and "(5)" in text
