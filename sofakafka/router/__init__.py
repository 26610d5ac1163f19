"""The LDC cell router: logical <-> physical names (``$NS.$CELL.$TOPIC``, ``$NS.$CELL.$GROUP``), unit headers
(``__UNIT.ORIUNIT``, ``__UNIT.TARGET_G/C/R``), routing rules, and the worker that copies messages between cells
without loss or duplicates.

A client of the cluster like any other (pyproject.toml's contracts, docs/architecture.md): it speaks the wire
protocol through sofakafka/client/ and protocol/, and never imports a broker's layers (broker/, controller/,
security/, storage/).
"""
