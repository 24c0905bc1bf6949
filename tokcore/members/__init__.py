"""The JSON member wing: find, set and delete the member at a key path of a JSON object text
without parsing it (``_members``, a dispatcher with a Cython and a Python twin), and the
checks both twins and the stream wing share: the JSON value check and the object-text check
(``_json_valid.h``, ``_json_object.h`` and its NEON and memo headers)."""
