"""Framework adapters: the glue between a web framework and tokcore's relay, written once.

Each module imports its framework when it is imported, never before: ``import tokcore``
imports none of them, and the installed package needs only the standard library (the
extras ``tokcore[aiohttp]``, ``[starlette]``, ``[fastapi]``, ``[httpx]`` bring them).

- :mod:`tokcore.adapters.answer`: the rules of the whole answer (a stream relayed, a body
  rewritten, an error status in the API's shape, no answer as 502/504), the
  ``AsyncAnswer`` the client adapters make and the ``Completion`` the hook gets. No framework.
- :mod:`tokcore.adapters.client`: ``aopen_answer`` for either client, httpx's or aiohttp's
  (what the server adapters call), importing the one client adapter it needs.
- :mod:`tokcore.adapters.aiohttp`: ``relay_answer(request, client, method, url, ...)``
  relays an upstream's whole answer from an aiohttp handler; ``aopen_answer`` is the
  client half on aiohttp's ``ClientSession``; ``relay_response`` streams a
  ``ClientResponse`` the caller opened.
- :mod:`tokcore.adapters.starlette`: ``relay_answer(client, method, url, ...)`` returns the
  response (Starlette's and FastAPI's) for an upstream's whole answer; ``RelayResponse``, a
  ``StreamingResponse`` that owns its relayed stream and closes it however it ends.
- :mod:`tokcore.adapters.httpx`: ``aopen_answer`` / ``open_answer`` make an upstream's
  whole answer ready; ``aopen_relay`` / ``open_relay`` open a streaming request and give its
  relayed bytes; closing a stream closes the response.
- :mod:`tokcore.adapters.errors`: the error bodies and stream error events of each API, and
  an upstream's error put into them.
- :mod:`tokcore.adapters.frames`: a server's own stream, the frames a ``StreamWriter``
  wrote, as aiohttp's ``send_frames`` and Starlette's ``EventStreamResponse`` send it. No
  framework.

The adapters reach the relay through the stream wing's own names (``tokcore.stream``), never
through its modules.
"""
