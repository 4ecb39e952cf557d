"""The Streamable HTTP profile of ``/acp`` (the ACP transport RFD): POST, GET (SSE), DELETE.

Modules: ``endpoint`` (the ASGI endpoint, ``StreamableHttp``), ``connection`` (one client,
``HttpConnection``), ``router`` (its outbox, ``StreamOutbox``: each frame to its stream),
``sse_stream`` (one SSE stream over the GETs that come and go, ``SseWriter``) and ``wire``
(headers, cookie, error answers).

Theory of operation
-------------------
An HTTP client is a ``ClientConnection`` like a WebSocket client: the same method table, roles,
limits and arbitration. Only its outbox differs. ``StreamOutbox`` (``router``)
satisfies the connection's ``ConnectionOutbox`` and routes every frame to the stream it belongs
on, each stream being an ``Outbox`` (byte-bounded, slow consumers closed) over an ``SseWriter``
(``sse_stream``):

* the connection's stream (a GET with ``Acp-Connection-Id`` alone) carries the answers to
  connection-level requests (``session/new``, ``session/load``, ``session/resume``,
  ``session/list``...) and notifications that name no session;
* a session's stream (a GET with ``Acp-Session-Id`` too) carries that session's updates, the
  hub's requests about it (permission requests, elicitations) and their withdrawals, and the
  answers to the session-scoped requests (``session/prompt``, ``session/cancel``,
  ``session/set_mode``, ``session/set_config_option``, ``session/close``).

A frame for a stream that no GET reads yet waits in that stream's outbox (a client opens a
session's stream once it learnt the session's id from the answer on the connection's stream).
The answer to ``initialize`` is the one that does not travel on a stream: it is the POST's
``200`` body, with the ``Acp-Connection-Id`` header (and an ``acp-connection`` cookie, which the
hub honours in place of the header, except on ``initialize``: one without the header always
starts a new connection, whatever cookie it carries). Every other POST is answered ``202`` once
the connection took the message; one the connection could not route (an id JSON-RPC does not
allow, a second ``initialize``, too many requests unanswered) is answered ``4xx`` at once with
a JSON-RPC error body. ``DELETE`` closes the connection; it and a ``404`` for the connection
the cookie names clear the cookie.

With several nodes on one Redis, the node that answered ``initialize`` records where the
connection lives (``hub.server.placement``), and a request for it that reaches another node is
relayed to it (``hub.server.forward``) once that node admitted the credential and found it is
the connection's principal's; ``docs/design/http-cluster.md`` has the design.

The connection's message loop (``ClientConnection.run``) runs in the hub's task group and
reads what POSTs hand it through a bounded channel, so a client that posts faster than the hub
handles waits on its POSTs. A connection with no GET open and no POST for ``IDLE_TIMEOUT``
seconds is closed (its sessions go on; it resumes them on a new connection), and so is one that
opened no stream within ``FIRST_GET_TIMEOUT`` seconds of its ``initialize``.
"""
