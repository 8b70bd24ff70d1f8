"""The per-process count of each caller's questions (issue 51): a sliding minute, so no
minute's edge lets twice the rate through, and a wait that is the real one."""

from __future__ import annotations

import threading

from grandbo.runtime.admission import SlidingMinute


def test_a_caller_is_held_to_its_rate_and_others_are_not_touched() -> None:
    window = SlidingMinute()
    assert all(window.admit("acme", "a", 5, 10.0 + i) == 0 for i in range(5))
    wait = window.admit("acme", "a", 5, 15.0)
    assert 0 < wait <= 60.0  # in the next minute, once this one's weight has faded enough
    # another caller, another organization: their own counts
    assert window.admit("acme", "b", 5, 15.0) == 0
    assert window.admit("other", "a", 5, 15.0) == 0


def test_the_edge_of_a_minute_does_not_let_twice_the_rate_through() -> None:
    window = SlidingMinute()
    # the last second of one minute, then the first seconds of the next
    admitted = sum(window.admit("acme", "a", 10, 59.5) == 0 for _ in range(10))
    admitted += sum(window.admit("acme", "a", 10, 60.5 + i / 100) == 0 for i in range(10))
    assert admitted == 10  # a fixed minute would have admitted 20
    # as the window slides past the busy second, room opens again
    assert window.admit("acme", "a", 10, 119.0) == 0


def test_the_wait_it_gives_is_when_the_question_is_admitted() -> None:
    window = SlidingMinute()
    for _ in range(10):
        window.admit("acme", "a", 10, 30.0)
    wait = window.admit("acme", "a", 10, 40.0)
    assert wait > 0
    assert window.admit("acme", "a", 10, 40.0 + wait - 0.5) > 0
    assert window.admit("acme", "a", 10, 40.0 + wait + 0.01) == 0


def test_a_crowd_of_threads_is_admitted_exactly_the_rate() -> None:
    window = SlidingMinute()
    admitted: list[bool] = []
    lock = threading.Lock()

    def ask() -> None:
        for _ in range(50):
            ok = window.admit("acme", "a", 100, 1.0) == 0
            with lock:
                admitted.append(ok)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(admitted) == 100


def test_memory_is_bounded_by_forgetting_the_idlest_callers() -> None:
    window = SlidingMinute(max_callers=3)
    for n in range(1000):  # a crowd of new callers, every one admitted
        assert window.admit("acme", f"caller-{n}", 5, 1.0) == 0
    assert len(window._windows) == 3
    # the most recent are the ones kept: the latest caller is still held to its count
    for _ in range(4):
        window.admit("acme", "caller-999", 5, 1.0)
    assert window.admit("acme", "caller-999", 5, 1.0) > 0
