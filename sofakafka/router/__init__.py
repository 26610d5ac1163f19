"""LDC on the client side: the LDC producer and consumer, the local-first partitioner, and the message router
that copies records between cells without loss or duplicates.

A client of the cluster like any other (pyproject.toml's contracts, docs/architecture.md): it speaks the wire
protocol through sofakafka/client/ (or a stock Python client library) and never imports a broker's layers
(broker/, controller/, security/, storage/). The model it works from (cells, physical names, unit headers,
filters, rules) is :mod:`sofakafka.ldc`; docs/ldc.md explains it.
"""
