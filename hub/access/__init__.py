"""Access: who a client is and what it may do, decided from credentials only.

- ``principal``: ``Principal`` (who, with which role ceiling and scope) and ``Refusal``;
- ``keys``: the hub's signing key (environment, ``secret_file``, or generated);
- ``issuers``: external token issuers configured by name;
- ``tokens``: ``TokenAuthority``, minting and verifying JWTs;
- ``carriers``: where a request carries its token (header, subprotocol, query);
- ``hosts``: the ``Host`` and ``Origin`` checks;
- ``links``: share links and their revocation, behind ``LinkStore``;
- ``audit``: the append-only audit trail, behind ``AuditSink``;
- ``gate``: ``Gate``, the one decision a connection attempt gets.

Tokens are kept out of log lines by ``hub.server.logs.redact``. ``docs/security.md`` tells
the same from the user's side.
"""
