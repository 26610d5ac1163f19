"""One blocking TCP connection to one broker, speaking our own codec.

A ``BrokerConnection`` connects, asks the broker which versions it speaks (ApiVersions, KIP-511 style: the
newest version we know first, then the version the broker names if it refuses), and then sends typed
requests at the highest version both sides know. Requests go one at a time: the next request is written
only after the previous response was read, so correlation ids only need to detect a confused peer, not
to demultiplex. Every call has a deadline; when it passes the connection is closed, because a late
response would otherwise be read as the answer to the next request.

With a :class:`~sofakafka.client.security.ClientSecurity` the socket is wrapped in TLS first (SSL,
SASL_SSL) and, for SASL_*, the login follows ApiVersions: SaslHandshake v1 then SaslAuthenticate until the
mechanism is done. A refused login raises :class:`AuthenticationError` with the broker's message.

Not thread-safe: one thread per connection (the CLI and tests are single-threaded).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

from sofakafka.client.errors import (
    AuthenticationError,
    BrokerConnectionError,
    RequestTimeoutError,
    UnsupportedApiError,
)
from sofakafka.client.security import ClientSecurity, SaslLogin
from sofakafka.protocol.api import ApiKey, decode_response, encode_request, request_type
from sofakafka.protocol.errors import DecodeError, ErrorCode, KafkaError
from sofakafka.protocol.headers import RequestHeader
from sofakafka.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sofakafka.protocol.schema import Request, Response

_SIZE = struct.Struct(">i")
# A response bigger than this is a confused peer (or not Kafka at all), not something to allocate.
MAX_RESPONSE_BYTES = 512 * 1024 * 1024

CLIENT_SOFTWARE_NAME = "sofakafka-client"


def _software_version() -> str:
    from sofakafka import __version__

    return __version__


class BrokerConnection:
    """A connection to ``host:port``; ``connect()`` also negotiates versions.

    ``api_versions`` maps each API key the broker advertised to its (min, max) range.
    """

    def __init__(self, host: str, port: int, *, client_id: str = "sofakafka", timeout_s: float = 30.0,
                 node_id: int | None = None, security: ClientSecurity | None = None) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.node_id = node_id
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port}, node {self.node_id})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as e:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = self.security
        if security is not None and security.uses_ssl:
            assert security.ssl_context is not None
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except ssl.SSLError as e:
                sock.close()
                raise AuthenticationError(f"TLS handshake with {self.host}:{self.port} failed: {e}") from e
            except OSError as e:
                sock.close()
                raise BrokerConnectionError(f"TLS handshake with {self.host}:{self.port} failed: {e}") from e
        self._sock = sock
        try:
            self._negotiate()
            if security is not None and security.uses_sasl:
                self._authenticate(security)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> BrokerConnection:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- versions ------------------------------------------------------------------------------------

    def _negotiate(self) -> None:
        """KIP-511: try our newest ApiVersions; a broker that does not know it answers a v0 body naming
        the versions it does know (with UNSUPPORTED_VERSION), and we ask again at its newest."""
        version = ApiVersionsRequest.valid_versions()[1]
        for _ in range(2):
            request = ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                         client_software_version=_software_version())
            frame = self._round_trip(request, version, self._deadline(None))
            try:
                _, response = decode_response(frame, ApiKey.API_VERSIONS, version)
            except DecodeError:
                _, response = decode_response(frame, ApiKey.API_VERSIONS, 0)
            assert isinstance(response, ApiVersionsResponse)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and ApiKey.API_VERSIONS in ranges:
                ours = ApiVersionsRequest.valid_versions()
                theirs = ranges[ApiKey.API_VERSIONS]
                version = min(ours[1], theirs[1])
                if version < max(ours[0], theirs[0]):
                    break
                continue
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode.for_code(response.error_code), "ApiVersions failed")
            self.api_versions = ranges
            return
        raise UnsupportedApiError(ApiKey.API_VERSIONS, "no ApiVersions version in common with the broker")

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds until the mechanism has nothing more to say."""
        login = SaslLogin(security, f"{self.host}:{self.port}")
        request: Request | None = login.first_request()
        while request is not None:
            version = self.supported_version(request.API_KEY, 1 if request.API_KEY == ApiKey.SASL_HANDSHAKE else None)
            request = login.next_request(self.send(request, version))

    def supported_version(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both we and the broker speak (capped by ``max_version``)."""
        ours = request_type(api_key).valid_versions()
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedApiError(api_key)
        high = min(ours[1], theirs[1])
        if max_version is not None:
            high = min(high, max_version)
        low = max(ours[0], theirs[0])
        if high < low:
            raise UnsupportedApiError(
                api_key, f"no common version of API key {api_key}: ours {ours}, broker {theirs}"
                + (f", capped at {max_version}" if max_version is not None else ""))
        return high

    # -- requests ------------------------------------------------------------------------------------

    def send(self, request: Request, version: int | None = None, *, timeout_s: float | None = None) -> Response:
        """Send ``request`` (at ``version``, else the highest common one) and return the decoded response."""
        self.connect()
        api_key = request.API_KEY
        if version is None:
            version = self.supported_version(api_key)
        frame = self._round_trip(request, version, self._deadline(timeout_s))
        try:
            _, response = decode_response(frame, api_key, version)
        except DecodeError:
            self.close()
            raise
        return response

    def send_no_response(self, request: Request, version: int | None = None) -> None:
        """For requests the broker does not answer (Produce with acks=0)."""
        self.connect()
        if version is None:
            version = self.supported_version(request.API_KEY)
        self._write(request, version, self._deadline(None))

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)

    def _write(self, request: Request, version: int, deadline: float) -> int:
        sock = self._require_socket()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=self._correlation_id, client_id=self.client_id)
        payload = encode_request(header, request)
        try:
            sock.settimeout(self._remaining(deadline))
            sock.sendall(_SIZE.pack(len(payload)) + payload)
        except TimeoutError as e:
            self.close()
            raise RequestTimeoutError(f"timed out sending to {self.host}:{self.port}") from e
        except OSError as e:
            self.close()
            raise BrokerConnectionError(f"send to {self.host}:{self.port} failed: {e}") from e
        return self._correlation_id

    def _round_trip(self, request: Request, version: int, deadline: float) -> memoryview:
        """Writes the request and reads the frame answering it; returns the frame (size prefix removed)."""
        correlation_id = self._write(request, version, deadline)
        (size,) = _SIZE.unpack(self._read_exactly(4, deadline))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            self.close()
            raise BrokerConnectionError(f"{self.host}:{self.port} sent a response of impossible size {size}")
        frame = memoryview(self._read_exactly(size, deadline))
        (got,) = _SIZE.unpack_from(frame, 0)
        if got != correlation_id:
            self.close()
            raise BrokerConnectionError(
                f"{self.host}:{self.port} answered correlation id {got}, expected {correlation_id}")
        return frame

    def _read_exactly(self, n: int, deadline: float) -> bytearray:
        sock = self._require_socket()
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        try:
            while got < n:
                sock.settimeout(self._remaining(deadline))
                read = sock.recv_into(view[got:])
                if read == 0:
                    self.close()
                    raise BrokerConnectionError(f"{self.host}:{self.port} closed the connection")
                got += read
        except TimeoutError as e:
            self.close()
            raise RequestTimeoutError(f"no response from {self.host}:{self.port} in time") from e
        except OSError as e:
            self.close()
            raise BrokerConnectionError(f"read from {self.host}:{self.port} failed: {e}") from e
        return buf

    def _remaining(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            self.close()
            raise RequestTimeoutError(f"request to {self.host}:{self.port} timed out")
        return left

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise BrokerConnectionError(f"not connected to {self.host}:{self.port}")
        return self._sock

