"""The stream-writer wing: an API server's streamed chunks written as the exact bytes its own
serializer writes. ``_writer`` is the dispatcher (the Cython twin ``_writer_c`` or the Python
twin ``_writer_py``); a shape (``StreamShape``, compiled once per server from a probe of the
server's chunks: ``_writer_shape``) holds a template per frame of its API; the frames, slots,
sentinels and serializer styles are data (``_writer_rules``), the built-in shapes probes
(``_writer_builtin``); ``_escape.h`` is the compiled twin's string and number kernel. It writes
streams and never reads one: the relay and the event decoder are the stream wing's. The public
names are ``tokcore``'s."""
