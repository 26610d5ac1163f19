"""TLS contexts from Kafka's ``ssl.*`` keys, with PEM key and trust stores (as Kafka 2.7 accepts them).

Key store (our certificate and private key), ``ssl.keystore.type=PEM`` and either

* ``ssl.keystore.location``: a PEM file holding the private key and the certificate chain
  (``ssl.key.password`` decrypts an encrypted key), or librdkafka's ``ssl.certificate.location`` and
  ``ssl.key.location`` (two files; clients only), or
* ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``: the PEM text itself.

Trust store (the CAs we accept from peers), ``ssl.truststore.type=PEM`` and ``ssl.truststore.location`` (a PEM
file of certificates) or ``ssl.truststore.certificates`` (the PEM text). Without a trust store the system's
default CAs are used.

``ssl.client.auth`` (server side) is ``required``, ``requested`` or ``none``; ``ssl.enabled.protocols`` picks
from TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 (the lowest and highest listed bound the handshake: OpenSSL cannot skip
a version in the middle); ``ssl.cipher.suites`` takes Kafka's (IANA) names such as
``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` or OpenSSL's such as ``ECDHE-RSA-AES128-GCM-SHA256`` (TLS 1.3 suites
cannot be restricted by OpenSSL and are accepted as they are). ``ssl.endpoint.identification.algorithm``
(client side) ``https`` checks the server's host name, empty does not.

JKS and PKCS12 stores are refused with a message naming the key: Python's ssl module reads PEM only.
A context is built from a ``get(key) -> str | None`` reader so per-listener overrides
(``listener.name.<l>.ssl.*``) are the caller's business.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable

from sofakafka.security import SecurityConfigError

Getter = Callable[[str], str | None]

PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def server_context(get: Getter) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(ctx, get, required=True)
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise SecurityConfigError("ssl.client.auth", f"must be one of required, requested, none, got {client_auth!r}")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    if client_auth != "none":
        _load_truststore(ctx, get)
    _apply_protocols_and_ciphers(ctx, get)
    return ctx


def client_context(get: Getter) -> ssl.SSLContext:
    """For our own connections to a TLS listener: inter-broker links and the command-line client."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https").strip().lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(ctx, get)
    _load_keystore(ctx, get, required=False)
    _apply_protocols_and_ciphers(ctx, get)
    return ctx


def _check_type(get: Getter, key: str) -> None:
    store_type = (get(key) or "PEM").strip().upper()
    if store_type != "PEM":
        raise SecurityConfigError(key, f"{store_type} stores are not supported, only PEM (convert with openssl: "
                                       "`openssl pkcs12 -in store.p12 -nodes`)")


def _load_keystore(ctx: ssl.SSLContext, get: Getter, *, required: bool) -> None:
    location, location_key, key_location = get("ssl.keystore.location"), "ssl.keystore.location", None
    if not location and get("ssl.certificate.location"):
        # librdkafka's client names: the certificate chain and the key in two PEM files.
        location, location_key = get("ssl.certificate.location"), "ssl.certificate.location"
        key_location = get("ssl.key.location")
        if key_location and not os.path.isfile(key_location):
            raise SecurityConfigError("ssl.key.location", f"no such file {key_location!r}")
    chain = get("ssl.keystore.certificate.chain")
    key_text = get("ssl.keystore.key")
    password = get("ssl.key.password") or None
    if not (location or chain or key_text):
        if required:
            raise SecurityConfigError("ssl.keystore.location", "an SSL listener needs a key store: set "
                                      "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
        return
    _check_type(get, "ssl.keystore.type")
    if location and (chain or key_text):
        raise SecurityConfigError(location_key, f"set either {location_key} or "
                                  "ssl.keystore.certificate.chain/ssl.keystore.key, not both")
    if location:
        if not os.path.isfile(location):
            raise SecurityConfigError(location_key, f"no such file {location!r}")
        try:
            ctx.load_cert_chain(location, key_location, password=password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise SecurityConfigError(location_key, f"cannot load a PEM key and certificate chain "
                                      f"from {location!r}: {exc}") from None
        return
    if not chain or not key_text:
        missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
        raise SecurityConfigError(missing, "ssl.keystore.certificate.chain and ssl.keystore.key go together")
    # load_cert_chain reads files only: hand it a private temporary copy, removed at once.
    with tempfile.TemporaryDirectory(prefix="sofakafka-keystore-") as tmp:
        cert_path, key_path = os.path.join(tmp, "chain.pem"), os.path.join(tmp, "key.pem")
        for path, text in ((cert_path, chain), (key_path, key_text)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text.replace("\\n", "\n"))
        try:
            ctx.load_cert_chain(cert_path, key_path, password=password)
        except (ssl.SSLError, ValueError) as exc:
            raise SecurityConfigError("ssl.keystore.certificate.chain",
                                      f"not a PEM certificate chain matching ssl.keystore.key: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, get: Getter) -> None:
    location = get("ssl.truststore.location")
    certificates = get("ssl.truststore.certificates")
    if not location and not certificates:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH if ctx.protocol == ssl.PROTOCOL_TLS_SERVER
                               else ssl.Purpose.SERVER_AUTH)
        return
    _check_type(get, "ssl.truststore.type")
    if location:
        if not os.path.isfile(location):
            raise SecurityConfigError("ssl.truststore.location", f"no such file {location!r}")
        try:
            ctx.load_verify_locations(cafile=location)
        except (ssl.SSLError, OSError) as exc:
            raise SecurityConfigError("ssl.truststore.location", f"cannot load PEM certificates from "
                                      f"{location!r}: {exc}") from None
        return
    assert certificates is not None
    try:
        ctx.load_verify_locations(cadata=certificates.replace("\\n", "\n"))
    except (ssl.SSLError, ValueError) as exc:
        raise SecurityConfigError("ssl.truststore.certificates", f"not PEM certificates: {exc}") from None


def _apply_protocols_and_ciphers(ctx: ssl.SSLContext, get: Getter) -> None:
    raw = get("ssl.enabled.protocols")
    names = _split(raw if raw is not None else DEFAULT_ENABLED_PROTOCOLS)
    if not names:
        raise SecurityConfigError("ssl.enabled.protocols", "must name at least one protocol")
    for name in names:
        if name not in PROTOCOLS:
            raise SecurityConfigError("ssl.enabled.protocols", f"unknown protocol {name!r}, expected some of "
                                      f"{', '.join(PROTOCOLS)}")
    versions = sorted(PROTOCOLS[n] for n in names)
    try:
        ctx.minimum_version = versions[0]
        ctx.maximum_version = versions[-1]
    except (ValueError, ssl.SSLError) as exc:
        raise SecurityConfigError("ssl.enabled.protocols", f"not available here: {exc}") from None
    suites = _split(get("ssl.cipher.suites"))
    tls12 = [openssl_cipher_name(s) for s in suites if s not in _TLS13_SUITES]
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise SecurityConfigError("ssl.cipher.suites", f"none of {', '.join(suites)} is a cipher suite this "
                                      "OpenSSL knows") from None
        unknown = [s for s, o in zip(suites, tls12, strict=False) if not _known_cipher(o)]
        if unknown:
            raise SecurityConfigError("ssl.cipher.suites", f"unknown cipher suite {unknown[0]!r}")


_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_IANA_RE = re.compile(r"^TLS_(?P<kx>[A-Z0-9_]+?)_WITH_(?P<cipher>[A-Z0-9_]+?)_(?P<mac>SHA|SHA256|SHA384)$")


def openssl_cipher_name(name: str) -> str:
    """An IANA (Java) TLS 1.2 suite name as OpenSSL spells it; other names are returned as they are."""
    m = _IANA_RE.match(name)
    if m is None:
        return name
    kx = {"ECDHE_RSA": "ECDHE-RSA", "ECDHE_ECDSA": "ECDHE-ECDSA", "DHE_RSA": "DHE-RSA", "RSA": ""}.get(m["kx"])
    if kx is None:
        return name
    cipher = m["cipher"]
    cipher = (cipher.replace("AES_128_GCM", "AES128-GCM").replace("AES_256_GCM", "AES256-GCM")
              .replace("AES_128_CBC", "AES128").replace("AES_256_CBC", "AES256")
              .replace("CHACHA20_POLY1305", "CHACHA20-POLY1305"))
    mac = "" if "GCM" in cipher or "POLY1305" in cipher else m["mac"]
    if "GCM" in cipher:
        mac = m["mac"]
    if "POLY1305" in cipher:
        mac = ""
    parts = [p for p in (kx, cipher, mac) if p]
    return "-".join(parts)


def _known_cipher(openssl_name: str) -> bool:
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        probe.set_ciphers(openssl_name)
    except ssl.SSLError:
        return False
    return True
