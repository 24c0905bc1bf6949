"""Base64, and token ids <-> base64 text: the pure-Python reference twin.

The six ``base64`` look-alikes follow the standard library step by step (``binascii`` does
the work), so they accept, return and raise exactly what ``base64`` does. The argument
handling here (str input, ``altchars``, buffers) is shared: the Cython twin imports it for
everything off its fast path. The fused functions are the contract's definitions:
``ids_to_b64(ids) == b64encode(pack_ids(ids)).decode("ascii")`` and
``b64_to_ids(s) == unpack_ids(b64decode(s))``.
"""

from __future__ import annotations

import binascii
import re
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .._args import BytesLike, TextOrBytes
from ._pack_py import IdsArg, pack_ids, unpack_ids
from ._width import Width, check_width

#: what the stdlib raises for malformed base64 (a subclass of ValueError)
Error = binascii.Error

NOGIL_MIN_BYTES = 64 * 1024  # the Cython twin drops the GIL for inputs at least this big

# The rules of the running binascii.a2b_base64 are probed here, once, never read from the
# version: distributions backport security fixes into older point releases (Debian trixie's
# 3.13.5 carries gh-145264's). The Cython twin's exact path is told the same answers.


def _a2b_takes(**keywords: object) -> bool:
    """Whether the running ``binascii.a2b_base64`` accepts these keywords."""
    a2b: Any = binascii.a2b_base64
    try:
        a2b(b"", **keywords)
    except TypeError:
        return False
    return True


#: binascii has ``strict_mode`` (3.11 on), which base64's validate=True uses; before that,
#: validate=True was a regex check followed by a non-strict decode
STRICT_MODE = _a2b_takes(strict_mode=True)
_LEGACY_VALID = re.compile(b"[A-Za-z0-9+/]*={0,2}")


def _gh145264_rules() -> bool:
    """Whether binascii has CPython's fix for gh-145264, in both modes: the default mode no
    longer stops at the first padded quad and ignores the rest ("AQ==AQ==" decodes as
    b"\x01\x00\x10", not b"\x01"): a '=' before the end is skipped, and only those after
    the last data character pad; strict mode's errors changed with it ("A=A" is "number of
    data characters (1)", "AAA==" "Excess padding")."""
    return binascii.a2b_base64(b"AQ==AQ==") != b"\x01"


#: the Cython twin's exact path follows this running Python's binascii on these rules
GH145264_RULES = _gh145264_rules()


def _strict_refuses_pad_after_quad() -> bool:
    """Whether strict mode refuses a '=' right after a complete quad (it does from 3.13 on,
    with "Excess padding not allowed"); asked of binascii itself, not of the version."""
    if not STRICT_MODE:
        return False
    try:
        binascii.a2b_base64(b"AAAA=", strict_mode=True)
    except binascii.Error:
        return True
    return False


#: the Cython twin's exact path follows this running Python's binascii on that point
STRICT_PAD_AFTER_QUAD_ERROR = _strict_refuses_pad_after_quad()


def _strict_mode_by_truth() -> bool:
    """Whether binascii reads ``strict_mode`` as any object's truth (3.13 on) rather than as a
    C int through ``__index__`` (3.11, 3.12); asked of binascii itself, not of the version."""
    if not STRICT_MODE:
        return False
    try:
        binascii.a2b_base64(b"", strict_mode=None)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


#: how the Cython twin reads a ``validate`` that is neither True nor False
STRICT_MODE_BY_TRUTH = _strict_mode_by_truth()

#: binascii's base64 functions take ``padded=``, ``ignorechars=``, ``canonical=`` and
#: ``alphabet=`` (3.15 on). The base64 module shipped with such a binascii has 3.15's rules
#: too: the new keywords, ``urlsafe_b64decode`` not requiring padding by default, ``altchars``
#: of the wrong length a ValueError, and a warning for ``+`` or ``/`` that the alphabet in use
#: does not have. The drop-ins follow 3.15's base64 when this is true.
KEYWORDS_315 = _a2b_takes(padded=True)


class _Unset:
    """The default of a keyword the caller did not give (3.15's base64 tells "not given"
    from every value for ``validate`` and ``ignorechars``; before 3.15 the new keywords do
    not exist, so any value given is a TypeError)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not given>"


#: a keyword's default: not given
UNSET: Any = _Unset()


def _given(value: Any, default: Any) -> Any:
    return default if value is UNSET else value


_URLSAFE_ENCODE = bytes.maketrans(b"+/", b"-_")
_URLSAFE_DECODE = bytes.maketrans(b"-_", b"+/")


# --- argument handling, shared by both twins -----------------------------------------------

def decode_data(s: Any) -> bytes:
    """``s`` (ASCII str or any bytes-like object) as bytes, with the stdlib's errors."""
    if isinstance(s, str):
        try:
            return s.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("string argument should contain only ASCII characters") from None
    if isinstance(s, (bytes, bytearray)):
        return bytes(s) if type(s) is not bytes else s
    try:
        return memoryview(s).tobytes()
    except TypeError:
        raise TypeError(
            "argument should be a bytes-like object or ASCII string, "
            f"not {s.__class__.__name__!r}"
        ) from None


def stdlib_data(s: Any) -> bytes | bytearray:
    """``s`` as base64's ``_bytes_from_decode_data`` gives it back: a ``bytearray`` stays one
    (the messages and warnings that show ``altchars`` show it as the caller gave it)."""
    return s if isinstance(s, bytearray) else decode_data(s)


def apply_encode_altchars(encoded: bytes, altchars: Any) -> bytes:
    """The standard alphabet's ``+/`` swapped for ``altchars`` (as ``base64.b64encode``)."""
    assert len(altchars) == 2, repr(altchars)
    return encoded.translate(bytes.maketrans(b"+/", altchars))


def apply_decode_altchars(data: bytes, altchars: Any) -> bytes:
    """``altchars`` mapped back onto ``+/`` before decoding (as ``base64.b64decode``)."""
    altchars = stdlib_data(altchars)
    assert len(altchars) == 2, repr(altchars)
    return data.translate(bytes.maketrans(altchars, b"+/"))


def check_legacy_validate(data: bytes) -> None:
    """``validate=True`` before Python 3.11: only the alphabet, then at most two ``=``."""
    if not _LEGACY_VALID.fullmatch(data):
        raise Error("Non-base64 digit found")


def urlsafe_to_standard(s: Any) -> bytes:
    return decode_data(s).translate(_URLSAFE_DECODE)


def standard_to_urlsafe(encoded: bytes) -> bytes:
    return encoded.translate(_URLSAFE_ENCODE)


# --- 3.15's rules, for its signatures below -----------------------------------------------

def _altchars_warning(badchar: int, altchars: bytes | bytearray, validate: object,
                      urlsafe: bool) -> None:
    """3.15's warning for ``+`` or ``/`` in data whose alphabet does not have it, raised at
    the caller of the drop-in."""
    if urlsafe:
        warnings.warn(f"invalid character {chr(badchar)!a} in URL-safe Base64 data "
                      "will be discarded in future Python versions", FutureWarning,
                      stacklevel=3)
    elif validate:
        warnings.warn(f"invalid character {chr(badchar)!a} in Base64 data with "
                      f"altchars={altchars!r} and validate=True will be an error in future "
                      "Python versions", DeprecationWarning, stacklevel=3)
    else:
        warnings.warn(f"invalid character {chr(badchar)!a} in Base64 data with "
                      f"altchars={altchars!r} and validate=False will be discarded in future "
                      "Python versions", FutureWarning, stacklevel=3)


def _b64decode_315(data: bytes, altchars: Any, validate: Any, padded: Any, ignorechars: Any,
                   canonical: Any) -> tuple[bytes, int | None]:
    """3.15's b64decode on ``data`` (bytes), and the character to warn about, if any."""
    if validate is UNSET:
        validate = ignorechars is not UNSET
    padded, canonical = _given(padded, True), _given(canonical, False)
    a2b: Any = binascii.a2b_base64
    badchar = None
    if altchars is not None:
        altchars = stdlib_data(altchars)
        if len(altchars) != 2:
            raise ValueError(f"invalid altchars: {altchars!r}")
        if ignorechars is not UNSET:
            return a2b(data, strict_mode=validate, padded=padded, ignorechars=ignorechars,
                       canonical=canonical,
                       alphabet=binascii.BASE64_ALPHABET[:-2] + altchars), None  # type: ignore[attr-defined, unused-ignore]
        badchar = next((b for b in b"+/" if b not in altchars and b in data), None)
        data = data.translate(bytes.maketrans(altchars, b"+/"))
    result = a2b(data, strict_mode=validate, padded=padded,
                 ignorechars=_given(ignorechars, b""), canonical=canonical)
    return result, badchar


# --- the base64 module's functions ---------------------------------------------------------
# Their signatures are the running base64's: 3.15's, with padded=, wrapcol=, ignorechars= and
# canonical=, where binascii has those keywords (KEYWORDS_315, probed), else those of 3.11 to
# 3.14, where any of them is CPython's own TypeError for the call, word for word. Checkers
# see the same two by version, as typeshed's base64 stubs have them.

if (TYPE_CHECKING and sys.version_info >= (3, 15)) or (not TYPE_CHECKING and KEYWORDS_315):
    def b64encode(s: BytesLike, altchars: BytesLike | None = None, *,
                  padded: bool = True, wrapcol: int = 0) -> bytes:
        """Encode the bytes-like object ``s`` with Base64 (as ``base64.b64encode``).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        padded, wrapcol = _given(padded, True), _given(wrapcol, 0)
        if altchars is not None:
            if len(altchars) != 2:  # type: ignore[arg-type]  # as base64: any sized object
                raise ValueError(f"invalid altchars: {altchars!r}")
            return binascii.b2a_base64(  # type: ignore[call-arg, unused-ignore]
                s, padded=padded, wrapcol=wrapcol, newline=False,
                alphabet=binascii.BASE64_ALPHABET[:-2] + altchars)  # type: ignore[attr-defined, unused-ignore]
        return binascii.b2a_base64(  # type: ignore[call-arg, unused-ignore]
            s, padded=padded, wrapcol=wrapcol, newline=False)

    def b64decode(s: TextOrBytes, altchars: TextOrBytes | None = None,
                  validate: bool = UNSET, *, padded: bool = True,
                  ignorechars: BytesLike = UNSET, canonical: bool = False) -> bytes:
        """Decode Base64 bytes or ASCII text (as ``base64.b64decode``).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        result, badchar = _b64decode_315(decode_data(s), altchars, validate, padded,
                                         ignorechars, canonical)
        if badchar is not None:
            _altchars_warning(badchar, stdlib_data(altchars), validate is not UNSET and
                              validate, False)
        return result

    def urlsafe_b64encode(s: BytesLike, *, padded: bool = True) -> bytes:
        """Encode with ``-_`` instead of ``+/`` (as ``base64.urlsafe_b64encode``).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        return standard_to_urlsafe(b64encode(s, padded=_given(padded, True)))

    def urlsafe_b64decode(s: TextOrBytes, *, padded: bool = False) -> bytes:
        """Decode ``-_`` (and ``+/``) Base64 (as ``base64.urlsafe_b64decode``; padding is not
        required unless ``padded=True``).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        data = decode_data(s)
        badchar = next((b for b in b"+/" if b in data), None)
        result = urlsafe_decode_315(data.translate(_URLSAFE_DECODE), padded)
        if badchar is not None:
            _altchars_warning(badchar, b"-_", False, True)
        return result
else:
    def b64encode(s: BytesLike, altchars: BytesLike | None = None) -> bytes:
        """Encode the bytes-like object ``s`` with Base64 (as ``base64.b64encode``; from
        Python 3.15 on, with its ``padded=`` and ``wrapcol=`` too).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        encoded = binascii.b2a_base64(s, newline=False)
        if altchars is not None:
            return apply_encode_altchars(encoded, altchars)
        return encoded

    def b64decode(s: TextOrBytes, altchars: TextOrBytes | None = None,
                  validate: bool = False) -> bytes:
        """Decode Base64 bytes or ASCII text (as ``base64.b64decode``; from Python 3.15 on,
        with its ``padded=``, ``ignorechars=`` and ``canonical=`` too).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        data = decode_data(s)
        if altchars is not None:
            data = apply_decode_altchars(data, altchars)
        if STRICT_MODE:
            return binascii.a2b_base64(data, strict_mode=validate)
        if validate:
            check_legacy_validate(data)
        return binascii.a2b_base64(data)

    def urlsafe_b64encode(s: BytesLike) -> bytes:
        """Encode with ``-_`` instead of ``+/`` (as ``base64.urlsafe_b64encode``; from
        Python 3.15 on, with its ``padded=`` too).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        return standard_to_urlsafe(b64encode(s))

    def urlsafe_b64decode(s: TextOrBytes) -> bytes:
        """Decode ``-_`` (and ``+/``) Base64 (as ``base64.urlsafe_b64decode``; from Python
        3.15 on, with its ``padded=`` too, and padding is not required unless it is True).

        Raises what the running Python's ``base64`` module raises for the same arguments
        (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
        and warnings.
        """
        return b64decode(urlsafe_to_standard(s))


def standard_b64encode(s: BytesLike) -> bytes:
    """Encode with the standard alphabet (as ``base64.standard_b64encode``).

    Raises what the running Python's ``base64`` module raises for the same arguments
    (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
    and warnings.
    """
    return b64encode(s)


def standard_b64decode(s: TextOrBytes) -> bytes:
    """Decode the standard alphabet (as ``base64.standard_b64decode``).

    Raises what the running Python's ``base64`` module raises for the same arguments
    (``binascii.Error``, a ``ValueError``, for malformed base64), with its messages
    and warnings.
    """
    return b64decode(s)


def urlsafe_decode_315(standard: bytes, padded: Any) -> bytes:
    """3.15's url-safe decode of text already in the standard alphabet."""
    a2b: Any = binascii.a2b_base64
    return a2b(standard, strict_mode=False, padded=_given(padded, False))  # type: ignore[no-any-return]


# --- fused: token ids <-> base64 text of their int32 bytes ----------------------------------

def ids_to_b64(ids: IdsArg, *, width: Width = 32) -> str:
    """Token ids -> the Base64 text of their little-endian int32 bytes (int64 with
    ``width=64``).

    Raises what ``pack_ids`` raises.
    """
    return binascii.b2a_base64(pack_ids(ids, width=width), newline=False).decode("ascii")


def b64_to_ids(s: TextOrBytes, *, validate: bool = False, width: Width = 32) -> list[int]:
    """Base64 text (str or bytes-like) of little-endian int32 bytes (int64 with
    ``width=64``) -> token ids.

    Raises ``binascii.Error`` (a ``ValueError``) for malformed base64, as ``b64decode``
    does; ``ValueError`` when the decoded bytes are not whole ids of the width;
    ``TypeError`` for an argument of the wrong type; ``TypeError`` or ``ValueError`` for a
    ``width`` other than 32 and 64 (checked first).
    """
    check_width(width)
    return unpack_ids(b64decode(s, validate=validate), width=width)
