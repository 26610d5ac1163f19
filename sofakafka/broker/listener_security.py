"""The broker's security, assembled from its configuration: TLS and SASL per listener, the authorizer, users
and ACLs from the metadata tree, and the credentials this broker presents to the others.

Per listener, Kafka's keys with Kafka's precedence: ``listener.name.<listener lower case>.<key>`` first, then
the broker-wide key (``ssl.keystore.location``, ``ssl.client.auth``, ``ssl.principal.mapping.rules``, ...). The
JAAS config of a SASL mechanism is ``listener.name.<listener>.<mechanism lower case>.sasl.jaas.config``, then
``sasl.jaas.config``.

* SSL and SASL_SSL listeners get a server :class:`ssl.SSLContext` (:mod:`sofakafka.security.tls`). A client
  certificate, when the listener asks for one, becomes the principal of an SSL listener (``User:`` + the
  name ``ssl.principal.mapping.rules`` gives its DN); without one the principal is ``User:ANONYMOUS``.
* SASL_PLAINTEXT and SASL_SSL listeners offer ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512; GSSAPI and OAUTHBEARER are refused at start-up, naming the key). PLAIN needs a JAAS config
  with ``user_<name>="<password>"`` entries; SCRAM reads ``/config/users`` through :class:`SecurityMetadata`.
* ``authorizer.class.name`` set: an :class:`AclAuthorizer` with ``super.users`` and
  ``allow.everyone.if.no.acl.found``, its ACLs followed from the metadata tree.
* ``delegation.token.master.key`` set: a :class:`DelegationTokenManager` over the tokens of the metadata tree,
  and SCRAM logins with ``tokenauth=true`` (or, with ``sofakafka.delegation.token.auth.without.extension``,
  without it) checked against its cache on this broker's wall clock.
* Inter-broker links (replica fetchers, controlled shutdown, StopReplica) connect to the inter-broker
  listener with its protocol: TLS with the same key and trust stores, SASL with
  ``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password`` of that listener's JAAS config.

Every problem is a :class:`ConfigError` naming the key, raised before the broker serves.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

from sofakafka.broker.config import CONFIG_KEYS, ConfigError, KafkaConfig, SecurityProtocol
from sofakafka.client.security import ClientSecurity
from sofakafka.controller.store import MetadataStore
from sofakafka.security import SecurityConfigError
from sofakafka.security.authorizer import AclAuthorizer, parse_super_users
from sofakafka.security.client_config import client_security
from sofakafka.security.jaas import find_login_module, jaas_config_key
from sofakafka.security.principal import (
    ANONYMOUS,
    PrincipalMappingError,
    SslPrincipalMapper,
    rfc2253_name,
    user,
)
from sofakafka.security.sasl import (
    PLAIN,
    SUPPORTED_MECHANISMS,
    PlainServer,
    SaslAuthenticator,
    SaslMechanismServer,
    ScramServer,
)
from sofakafka.security.store import SecurityMetadata
from sofakafka.security.tls import server_context
from sofakafka.security.token_manager import DelegationTokenManager
from sofakafka.security.tokens import DelegationTokenCache, TokenLogin, TokenSettings
from sofakafka.storage.segment import wall_clock_ms

_STORE_TYPE_KEYS = ("ssl.keystore.type", "ssl.truststore.type")


@dataclass
class ListenerSecurity:
    listener_name: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None
    principal_mapper: SslPrincipalMapper
    sasl_mechanisms: tuple[str, ...]
    plain_users: dict[str, str]

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class BrokerSecurity:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.authorizer: AclAuthorizer | None = None
        if config.get_str("authorizer.class.name").strip():
            self.authorizer = AclAuthorizer(parse_super_users(config.values.get("super.users")),  # type: ignore[arg-type]
                                            config.get_bool("allow.everyone.if.no.acl.found"))
        self.metadata: SecurityMetadata | None = None
        self.listeners: dict[str, ListenerSecurity] = {}
        self.inter_broker: ClientSecurity | None = None
        self.reauth_ms = config.get_int("connections.max.reauth.ms")
        self.failed_authentication_delay_s = config.get_int("connection.failed.authentication.delay.ms") / 1000.0
        self.max_receive_size = config.get_int("sasl.server.max.receive.size")
        self.authentication_timeout_s = config.get_int("sofakafka.authentication.timeout.ms") / 1000.0
        self.tokens_without_extension = config.get_bool("sofakafka.delegation.token.auth.without.extension")

    # ------------------------------------------------------------------------------------------ config

    def getter(self, listener_name: str | None) -> Callable[[str], str | None]:
        """Raw value of a key for ``listener_name``: the listener's override, else the broker's own."""
        config = self.config

        def get(key: str) -> str | None:
            if listener_name is not None:
                prefixed = f"listener.name.{listener_name.lower()}.{key}"
                if prefixed in config.listener_overrides:
                    return config.listener_overrides[prefixed]
            if key in config.originals:
                return config.originals[key]
            if key in _STORE_TYPE_KEYS or key not in CONFIG_KEYS:
                return None  # Kafka's JKS default would refuse every PEM store nobody typed as such
            return config.value_string(key)

        return get

    def configure(self) -> None:
        """Build every listener's settings and the inter-broker credentials; ConfigError on any problem."""
        try:
            for e in self.config.listeners:
                self.listeners[e.listener_name] = self._listener(e.listener_name, e.security_protocol)
            self.inter_broker = self._inter_broker()
        except SecurityConfigError as exc:
            raise ConfigError(exc.key, exc.reason) from None

    def _listener(self, name: str, protocol: SecurityProtocol) -> ListenerSecurity:
        get = self.getter(name)
        uses_ssl = protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
        ctx = server_context(get) if uses_ssl else None
        mapper = SslPrincipalMapper.parse(get("ssl.principal.mapping.rules"))
        mechanisms: tuple[str, ...] = ()
        plain_users: dict[str, str] = {}
        if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            raw = get("sasl.enabled.mechanisms") or ""
            mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
            key = f"listener.name.{name.lower()}.sasl.enabled.mechanisms" if \
                f"listener.name.{name.lower()}.sasl.enabled.mechanisms" in self.config.listener_overrides \
                else "sasl.enabled.mechanisms"
            if not mechanisms:
                raise SecurityConfigError(key, f"SASL listener {name} needs at least one mechanism")
            for m in mechanisms:
                if m not in SUPPORTED_MECHANISMS:
                    raise SecurityConfigError(key, f"mechanism {m} is not supported (listener {name}); sofakafka "
                                                   f"offers {', '.join(SUPPORTED_MECHANISMS)}")
            if PLAIN in mechanisms:
                found = find_login_module(get, name, PLAIN)
                if found is None:
                    raise SecurityConfigError(jaas_config_key(name, PLAIN),
                                              f"PLAIN on listener {name} needs a JAAS config with user_<name>=\"<password>\" "
                                              "entries (or sasl.jaas.config)")
                plain_users = found[1].plain_users
        return ListenerSecurity(name, protocol, ctx, mapper, mechanisms, plain_users)

    def _inter_broker(self) -> ClientSecurity:
        name = self.config.inter_broker_listener_name
        protocol = next((e.security_protocol for e in self.config.listeners if e.listener_name == name), None)
        if protocol is None:
            protocol = self.config.security_protocol_map.get(name, SecurityProtocol.PLAINTEXT)
        get = self.getter(name)
        mechanism = username = password = None
        if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
            mechanism = self.config.get_str("sasl.mechanism.inter.broker.protocol").strip().upper()
            if mechanism not in SUPPORTED_MECHANISMS:
                raise SecurityConfigError("sasl.mechanism.inter.broker.protocol",
                                          f"must be one of {', '.join(SUPPORTED_MECHANISMS)} for the SASL "
                                          f"inter-broker listener {name}, got {mechanism}")
            found = find_login_module(get, name, mechanism)
            if found is None or "username" not in found[1].options or "password" not in found[1].options:
                raise SecurityConfigError(jaas_config_key(name, mechanism),
                                          f"the inter-broker listener {name} uses SASL {mechanism}: its JAAS config "
                                          "needs username=\"...\" password=\"...\" (this broker's own login)")
            username, password = found[1].options["username"], found[1].options["password"]
        return client_security(protocol.value, get, mechanism=mechanism, username=username, password=password)

    # ----------------------------------------------------------------------------------------- runtime

    def start(self, store: MetadataStore) -> None:
        """Load users, ACLs and tokens and follow their changes (blocking: run off the loop)."""
        tokens = None
        master_key = self.config.delegation_token_master_key
        if master_key is not None:
            settings = TokenSettings(self.config.get_int("delegation.token.max.lifetime.ms"),
                                     self.config.get_int("delegation.token.expiry.time.ms"))
            tokens = DelegationTokenManager(store, DelegationTokenCache(master_key), settings, clock_ms=wall_clock_ms)
        self.metadata = SecurityMetadata(store, self.authorizer, tokens=tokens)
        self.metadata.start()

    @property
    def tokens(self) -> DelegationTokenManager | None:
        """Delegation tokens (None: no master key, or the store is not open yet)."""
        return self.metadata.tokens if self.metadata is not None else None

    def close(self) -> None:
        if self.metadata is not None:
            self.metadata.close()

    def new_authenticator(self, listener: ListenerSecurity) -> SaslAuthenticator:
        def factory(mechanism: str) -> SaslMechanismServer:
            if mechanism == PLAIN:
                return PlainServer(listener.plain_users)
            metadata = self.metadata
            tokens = self.tokens

            def token_login(m: str, token_id: str) -> TokenLogin | str:
                assert tokens is not None
                return tokens.cache.login(m, token_id, wall_clock_ms())

            return ScramServer(mechanism, lambda m, u: metadata.credential(m, u) if metadata is not None else None,
                               token_login if tokens is not None else None,
                               tokens_without_extension=self.tokens_without_extension)

        return SaslAuthenticator(listener.sasl_mechanisms, factory, self.reauth_ms)

    @staticmethod
    def certificate_principal(listener: ListenerSecurity, ssl_object: ssl.SSLObject | None) -> str:
        """The principal of a TLS connection: the mapped DN of the client's certificate, or ANONYMOUS.
        Raises PrincipalMappingError when no mapping rule applies (the connection must close)."""
        if ssl_object is None:
            return ANONYMOUS
        cert = ssl_object.getpeercert()
        if not cert or "subject" not in cert:
            return ANONYMOUS
        dn = rfc2253_name(cert["subject"])  # type: ignore[arg-type]
        return user(listener.principal_mapper.name_for(dn))


__all__ = ["BrokerSecurity", "ListenerSecurity", "PrincipalMappingError"]
