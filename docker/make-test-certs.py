"""Test certificates for the SASL_SSL compose cluster (docker-compose.sasl-ssl.yml): NOT for production.

    .venv/bin/python docker/make-test-certs.py            # writes docker/sasl-ssl/certs/

A throwaway CA (trustme, a test dependency) signs one certificate per broker, valid for its compose name
(broker-N), localhost and 127.0.0.1, so containers and the host can both check the broker's name. Writes:

    certs/ca.pem           the CA certificate: the trust store of brokers and clients
    certs/broker-N.pem     broker N's private key and certificate chain (ssl.keystore.location)
    certs/client.properties  --command-config for `sofakafka` on the host: SASL_SSL as the admin

The CA's private key is not kept: run the script again for new certificates (then restart the brokers).
"""

from __future__ import annotations

import sys
from pathlib import Path

import trustme

BROKERS = 3


def main(argv: list[str]) -> int:
    target = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent / "sasl-ssl" / "certs"
    target.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="sofakafka test CA")
    ca.cert_pem.write_to_path(str(target / "ca.pem"))
    for n in range(1, BROKERS + 1):
        cert = ca.issue_cert(f"broker-{n}", "localhost", "127.0.0.1", common_name=f"broker-{n}")
        cert.private_key_and_cert_chain_pem.write_to_path(str(target / f"broker-{n}.pem"))
    (target / "client.properties").write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret";\n'
        f"ssl.truststore.location={target / 'ca.pem'}\n")
    for p in target.iterdir():
        p.chmod(0o644)  # the broker runs as an unprivileged user in its container
    print(f"wrote {', '.join(sorted(p.name for p in target.iterdir()))} to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
