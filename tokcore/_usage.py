"""Usage dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin

_twin = load_twin("usage")

find_usage = _twin.find_usage
rewrite_usage = _twin.rewrite_usage

__all__ = ["find_usage", "rewrite_usage"]
