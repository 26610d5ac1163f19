"""Principals: ``User:<name>`` for SASL users, ``User:<mapped DN>`` for TLS client certificates.

``ssl.principal.mapping.rules`` (KIP-371) maps a certificate's distinguished name, in RFC 2253 form
(``CN=alice,OU=eng,O=acme``), to a user name. The value is a comma-separated list of rules tried in order:

* ``RULE:<pattern>/<replacement>/[L|U]`` — when the Java-style regular expression matches the whole DN,
  the name is the replacement (``$1`` ... refer to groups), lower- or upper-cased with ``L``/``U``;
  ``\\/`` is a literal slash inside pattern or replacement;
* ``DEFAULT`` — the DN itself.

No rule applying is an authentication failure, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sofakafka.security import SecurityConfigError

ANONYMOUS = "User:ANONYMOUS"
USER_TYPE = "User"

_RULE_RE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/"
    r"(?P<case>[LU]?))\s*(?:,|$)"
)


class PrincipalMappingError(ValueError):
    pass


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(self.replacement)
        if self.case == "L":
            out = out.lower()
        elif self.case == "U":
            out = out.upper()
        return out


def _java_replacement(text: str) -> str:
    """Java's ``$1``/``${name}`` group references to Python's ``\\g<1>``; ``\\x`` is a literal x."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append("\\\\" if text[i + 1] == "\\" else text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        elif c == "$" and text[i + 1:i + 2] == "{":
            end = text.index("}", i)
            out.append(f"\\g<{text[i + 2:end]}>")
            i = end + 1
        else:
            out.append(c.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    KEY = "ssl.principal.mapping.rules"

    def __init__(self, rules: Sequence[_Rule]) -> None:
        self._rules = tuple(rules)

    @classmethod
    def parse(cls, text: str | None, key: str = KEY) -> SslPrincipalMapper:
        if text is None or not text.strip():
            return cls([_Rule(None)])
        rules: list[_Rule] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _RULE_RE.match(text, pos)
            if m is None or m.end() == pos:
                raise SecurityConfigError(key, f"invalid rule at {text[pos:]!r}: expected DEFAULT or "
                                               "RULE:pattern/replacement/[LU]")
            if m.group("default"):
                rules.append(_Rule(None))
            else:
                pattern = m.group("pattern").replace("\\/", "/")
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise SecurityConfigError(key, f"rule pattern {pattern!r} is not a regular expression: {exc}") from None
                rules.append(_Rule(compiled, _java_replacement(m.group("replacement")), m.group("case")))
            pos = m.end()
        return cls(rules)

    def name_for(self, dn: str) -> str:
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise PrincipalMappingError(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


# RFC 2253 short names Java's X500Principal uses; Python's ssl module reports the long names.
_SHORT_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "surname": "2.5.4.4",
         "givenName": "2.5.4.42", "title": "2.5.4.12", "pseudonym": "2.5.4.65"}


def _escape_rdn_value(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def rfc2253_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The subject of ``SSLSocket.getpeercert()`` as Java's ``X500Principal.getName()`` writes it: RDNs in
    reverse order, comma-separated, multi-valued RDNs joined with ``+``."""
    parts: list[str] = []
    for rdn in reversed(list(subject)):
        attrs = []
        for attr, value in rdn:
            name = _SHORT_NAMES.get(attr) or _OIDS.get(attr) or attr
            attrs.append(f"{name}={_escape_rdn_value(value)}")
        parts.append("+".join(attrs))
    return ",".join(parts)
