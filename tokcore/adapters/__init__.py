"""Framework adapters: the glue between a web framework and tokcore's relay, written once.

Each module imports its framework when it is imported, never before: ``import tokcore``
imports none of them, and the installed package needs only the standard library.

- :mod:`tokcore.adapters.aiohttp`: ``relay_response(request, upstream, ...)`` streams an
  aiohttp ``ClientResponse`` to a ``web.Request`` through the relay.
- :mod:`tokcore.adapters.starlette`: ``RelayResponse``, a ``StreamingResponse`` (Starlette's
  and FastAPI's) that owns its relayed stream and closes it however the response ends.
- :mod:`tokcore.adapters.httpx`: ``aopen_relay`` / ``open_relay`` open a streaming request
  and give its relayed bytes; closing the stream closes the response.
- :mod:`tokcore.adapters.errors`: the error bodies and stream error events of each API.
"""
