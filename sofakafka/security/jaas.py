"""JAAS-style login module configuration, the value of Kafka's ``sasl.jaas.config`` keys.

One or more entries ``<LoginModuleClass> <flag> [<option>=<value> ...];`` where the flag is ``required``,
``requisite``, ``sufficient`` or ``optional`` and a value is a bare word or a double-quoted string (``\\`` escapes
the next character). Kafka's broker takes its PLAIN users from the ``user_<name>="<password>"`` options of
``PlainLoginModule`` and a broker's own client credentials (inter-broker SASL) from ``username``/``password``.

On a broker the key is looked up per listener and mechanism first, as Kafka does:
``listener.name.<listener lower case>.<mechanism lower case>.sasl.jaas.config``, then ``sasl.jaas.config``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sofakafka.security import SecurityConfigError

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """``user_<name>="<password>"`` options: the users a PLAIN server accepts."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas_config(key: str, text: str) -> list[LoginModule]:
    """Parse ``text``; a malformed value raises SecurityConfigError naming ``key`` and what is wrong."""
    tokens = _tokenize(key, text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind != "word":
            raise SecurityConfigError(key, f"expected a login module class name, got {value!r}")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word" or tokens[i + 1][1].lower() not in FLAGS:
            raise SecurityConfigError(key, f"login module {value} needs a control flag ({', '.join(FLAGS)})")
        class_name, flag = value, tokens[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("punct", ";"):
            if tokens[i][0] != "word" or i + 2 >= len(tokens) or tokens[i + 1] != ("punct", "="):
                raise SecurityConfigError(key, f"expected option=value in login module {class_name}, got {tokens[i][1]!r}")
            if tokens[i + 2][0] not in ("word", "string"):
                raise SecurityConfigError(key, f"option {tokens[i][1]} of {class_name} has no value")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise SecurityConfigError(key, f"login module {class_name} must end with ';'")
        i += 1
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise SecurityConfigError(key, "no login module configured")
    return modules


def _tokenize(key: str, text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in ";=":
            tokens.append(("punct", c))
            i += 1
        elif c == '"':
            i += 1
            out: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(text[i])
                i += 1
            if i >= n:
                raise SecurityConfigError(key, "unterminated quoted value")
            i += 1
            tokens.append(("string", "".join(out)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in ';="':
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def jaas_config_key(listener_name: str, mechanism: str) -> str:
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"


def find_login_module(get: Callable[[str], str | None], listener_name: str, mechanism: str,
                      ) -> tuple[str, LoginModule] | None:
    """The first login module configured for (listener, mechanism) and the key it came from; ``get`` reads
    a raw config value (None when unset)."""
    for key in (jaas_config_key(listener_name, mechanism), "sasl.jaas.config"):
        text = get(key)
        if text:
            return key, parse_jaas_config(key, text)[0]
    return None
