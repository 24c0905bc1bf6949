"""Base64 dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin

_twin = load_twin("b64")

b64encode = _twin.b64encode
b64decode = _twin.b64decode
standard_b64encode = _twin.standard_b64encode
standard_b64decode = _twin.standard_b64decode
urlsafe_b64encode = _twin.urlsafe_b64encode
urlsafe_b64decode = _twin.urlsafe_b64decode
ids_to_b64 = _twin.ids_to_b64
b64_to_ids = _twin.b64_to_ids
