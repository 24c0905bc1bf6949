"""The token-id wing: ids <-> little-endian int32 bytes (``_pack``), base64 and the fused
ids <-> base64 (``_b64``), and the wire formats the stacks send ids in, JSON and MessagePack
arrays and their conversions (``_wire``). Each is a dispatcher with a Cython and a Python
twin; the public names are ``tokcore``'s."""
