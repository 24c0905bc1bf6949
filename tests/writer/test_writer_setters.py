"""The stream writer's setters refused while a call runs (issue 42), on both twins: from
inside the call and from another thread, the call's state kept. Nothing here needs a
stack's serializer, so these run on every build, the free-threaded one too."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Any

import pytest

from tokcore import StreamShape


def writer(twin: ModuleType) -> Any:
    """A Responses writer (the shape with settable state: ``sequence_number``, ``item_id``)."""
    return twin.StreamWriter(StreamShape("responses", "openai"), id="resp_1",
                             model="m", created=1732000000, item_id="msg_1")


# --- the setters, refused while a call runs


class Marked(list):  # type: ignore[type-arg]
    """A logprob entry of a list subclass: the compiled twin hands such a call to the Python
    twin's code (its C path takes exact types only), so both twins run Python functions of
    ``_writer_py`` while the call holds the writer."""


@contextmanager
def calling_back(back: Callable[[], None], at: str = "check_entry") -> Iterator[None]:
    """``back`` run once, from inside the writer's call, when it enters ``_writer_py``'s
    function ``at`` (a profile hook of this thread: no method of a value is needed, since
    the writer runs none of a value's own code)."""
    done: list[bool] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if (event == "call" and not done and frame.f_code.co_name == at
                and frame.f_code.co_filename.endswith("_writer_py.py")):
            done.append(True)
            back()

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)
    assert done, f"the writer never called {at}: nothing was tested"


SETTERS = [("sequence_number", 7), ("item_id", "msg_2")]


@pytest.mark.parametrize(("setter", "value"), SETTERS)
def test_a_set_from_inside_a_call_is_refused(writer_twin: ModuleType, setter: str,
                                             value: object) -> None:
    """A value whose method sets the writer's state mid-call: ``RuntimeError`` (the compiled
    twin's, with the same message) rather than a set the call then loses."""
    w = writer(writer_twin)
    seen: list[BaseException] = []

    def back() -> None:
        try:
            setattr(w, setter, value)
        except RuntimeError as exc:
            seen.append(exc)
            raise

    w.text("a")
    with pytest.raises(RuntimeError, match="already in use by another call"), \
            calling_back(back):
        w.write("text", "b", logprobs=[Marked([" a", -0.5])])
    assert len(seen) == 1
    assert (w.sequence_number, w.item_id) == (1, "msg_1")  # the call's, as it was
    setattr(w, setter, value)  # after it: taken
    assert getattr(w, setter) == value


@pytest.mark.parametrize(("setter", "value"), SETTERS)
def test_a_set_from_another_thread_during_a_call_is_refused(writer_twin: ModuleType,
                                                            setter: str,
                                                            value: object) -> None:
    """Another thread sets while a call runs (the call waits for that thread to end, so the
    set is made mid-call whatever the machine's load): refused, the writer's state kept."""
    w = writer(writer_twin)
    seen: list[BaseException] = []

    def other() -> None:
        try:
            setattr(w, setter, value)
        except RuntimeError as exc:
            seen.append(exc)

    def back() -> None:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()

    before = w.write("text", "b", logprobs=[(" a", -0.5)])
    with calling_back(back):
        got = w.write("text", "b", logprobs=[Marked([" a", -0.5])])
    assert [str(e) for e in seen] == [
        "StreamWriter is already in use by another call (another thread?): give each stream "
        "its own StreamWriter"]
    assert got == before.replace(b'"sequence_number":0', b'"sequence_number":1')
    assert (w.sequence_number, w.item_id) == (2, "msg_1")
