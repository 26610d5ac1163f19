"""The broker: configuration, the asyncio server, request handlers and the managers they call."""
