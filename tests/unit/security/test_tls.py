"""TLS contexts from Kafka's ssl.* keys: real handshakes over memory BIOs with trustme certificates."""

from __future__ import annotations

import ssl

import pytest
import trustme

from sofakafka.security import SecurityConfigError
from sofakafka.security.principal import SslPrincipalMapper, rfc2253_name
from sofakafka.security.tls import client_context, openssl_cipher_name, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="acme",
                           organization_unit_name="eng")
    paths = {"ca": d / "ca.pem", "server": d / "server.pem", "client": d / "client.pem"}
    ca.cert_pem.write_to_path(paths["ca"])
    server.private_key_and_cert_chain_pem.write_to_path(paths["server"])
    client.private_key_and_cert_chain_pem.write_to_path(paths["client"])
    other = trustme.CA().issue_cert("mallory")
    paths["other"] = d / "other.pem"
    other.private_key_and_cert_chain_pem.write_to_path(paths["other"])
    return {k: str(v) for k, v in paths.items()} | {"server_cert": server}


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str = "localhost"):
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, obj, out, peer_in in (("c", c, c_out, s_in), ("s", s, s_out, c_in)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            # TLS 1.3: the server sees a bad client certificate only when it reads the client's next bytes.
            c.write(b"x")
            s_in.write(c_out.read())
            assert s.read(1) == b"x"
            return s, c
    raise AssertionError("handshake did not finish")


def test_pem_keystore_file_and_required_client_auth(pki) -> None:
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
                             "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
                             "ssl.client.auth": "required"}.get)
    client = client_context({"ssl.truststore.location": pki["ca"], "ssl.keystore.location": pki["client"],
                             "ssl.keystore.type": "PEM"}.get)
    s, _c = handshake(server, client)
    dn = rfc2253_name(s.getpeercert()["subject"])
    assert dn.startswith("CN=alice") and "OU=eng" in dn and "O=acme" in dn
    mapper = SslPrincipalMapper.parse(r"RULE:^CN=([^,]*),.*$/$1/U")
    assert mapper.name_for(dn) == "ALICE"


def test_required_client_auth_refuses_a_client_without_a_trusted_certificate(pki) -> None:
    server = server_context({"ssl.keystore.location": pki["server"], "ssl.keystore.type": "PEM",
                             "ssl.truststore.location": pki["ca"], "ssl.client.auth": "required"}.get)
    for keystore in (None, pki["other"]):
        client = client_context({"ssl.truststore.location": pki["ca"], "ssl.keystore.location": keystore}.get)
        with pytest.raises(ssl.SSLError):
            handshake(server, client)


def test_inline_pem_keystore_and_truststore(pki) -> None:
    cert = pki["server_cert"]
    chain = "".join(b.bytes().decode() for b in cert.cert_chain_pems)
    key = cert.private_key_pem.bytes().decode()
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain,
                             "ssl.keystore.key": key}.get)
    with open(pki["ca"]) as fh:
        ca_text = fh.read()
    client = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca_text}.get)
    s, _ = handshake(server, client)
    assert s.getpeercert() is None or s.getpeercert() == {}


def test_client_verifies_the_server(pki) -> None:
    server = server_context({"ssl.keystore.location": pki["other"], "ssl.keystore.type": "PEM"}.get)
    client = client_context({"ssl.truststore.location": pki["ca"]}.get)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client)
    # Host name checked unless ssl.endpoint.identification.algorithm is empty.
    server = server_context({"ssl.keystore.location": pki["server"], "ssl.keystore.type": "PEM"}.get)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client_context({"ssl.truststore.location": pki["ca"]}.get), hostname="elsewhere")
    handshake(server, client_context({"ssl.truststore.location": pki["ca"],
                                      "ssl.endpoint.identification.algorithm": ""}.get), hostname="elsewhere")


def test_protocols_and_cipher_suites(pki) -> None:
    base = {"ssl.keystore.location": pki["server"], "ssl.keystore.type": "PEM"}
    server = server_context((base | {"ssl.enabled.protocols": "TLSv1.2",
                                     "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}).get)
    s, _ = handshake(server, client_context({"ssl.truststore.location": pki["ca"]}.get))
    assert s.version() == "TLSv1.2" and s.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_CBC_SHA") == "AES128-SHA"


@pytest.mark.parametrize(("settings", "key", "why"), [
    ({}, "ssl.keystore.location", "needs a key store"),
    ({"ssl.keystore.location": "/nonexistent.pem", "ssl.keystore.type": "PEM"}, "ssl.keystore.location", "no such file"),
    ({"ssl.keystore.location": "X", "ssl.keystore.type": "JKS"}, "ssl.keystore.type", "only PEM"),
    ({"ssl.client.auth": "maybe"}, "ssl.client.auth", "must be one of"),
    ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols", "unknown protocol"),
    ({"ssl.cipher.suites": "NOT_A_SUITE"}, "ssl.cipher.suites", "cipher suite"),
    ({"ssl.keystore.certificate.chain": "x"}, "ssl.keystore.key", "go together"),
])
def test_bad_settings_name_the_key(pki, settings, key, why) -> None:
    values = {"ssl.keystore.location": pki["server"], "ssl.keystore.type": "PEM"}
    if "ssl.keystore.certificate.chain" in settings or settings == {}:
        values = {}
    values |= settings
    with pytest.raises(SecurityConfigError) as info:
        server_context(values.get)
    assert info.value.key == key and why in info.value.reason


def test_bad_mapping_rules_name_the_key() -> None:
    with pytest.raises(SecurityConfigError) as info:
        SslPrincipalMapper.parse("RULE:^CN=(.*$/$1/")
    assert info.value.key == "ssl.principal.mapping.rules"
    with pytest.raises(SecurityConfigError):
        SslPrincipalMapper.parse("NOTARULE")
    assert SslPrincipalMapper.parse(None).name_for("CN=a,O=b") == "CN=a,O=b"
    assert rfc2253_name([(("countryName", "US"),), (("commonName", "a,b"),)]) == "CN=a\\,b,C=US"
