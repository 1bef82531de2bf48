"""How a parameter-server task tells that its chief has gone, on real sockets: a refused connection
ends it at once; connections that time out (a loaded machine, or a dead node) end it only once
they have lasted."""

import socket
import time

import pytest

from tfdist.distribute.tf_strategies import ChiefTimeout, _ChiefWatch

pytestmark = pytest.mark.default_stack  # tfdist's own logic


def listener(backlog=8):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(backlog)
    return server, "127.0.0.1:%d" % server.getsockname()[1]


def test_the_chief_seen_then_refusing_has_finished():
    server, address = listener()
    watch = _ChiefWatch(address, timeout=600)
    assert not watch.finished()  # serving
    server.close()
    assert watch.finished()  # refused: its process has exited


def test_a_chief_that_times_out_has_not_finished_until_it_lasts():
    server, address = listener(backlog=0)
    watch = _ChiefWatch(address, timeout=600, unreachable_for=3)
    try:
        assert not watch.finished()  # seen; its connection, never accepted, fills the queue
        # Linux drops SYNs to a full accept queue: each connect now times out (after 2 s). The
        # watch says "finished" only once its own unreachable_for has passed in real timeouts:
        # the 2nd call (first timeout) and the 3rd (~2 s of them) not, the 4th (~4 s) does.
        answers = []
        while not (answers and answers[-1]) and len(answers) < 10:
            answers.append(watch.finished())
            if answers[-1] is False:
                assert watch.unreachable_since is not None
        lasted = time.monotonic() - watch.unreachable_since
        assert answers[-1] and not any(answers[:-1]), answers
        assert len(answers) >= 3, answers  # not at the first timeouts
        assert 3 <= lasted < 3 + 3 * 2, (answers, lasted)  # unreachable_for, less than 3 more
    finally:
        server.close()


def test_a_chief_that_never_came_up_is_a_timeout():
    server, address = listener()
    server.close()
    watch = _ChiefWatch(address, timeout=0)
    with pytest.raises(ChiefTimeout, match=f"The chief at {address} did not come up within 0 s"):
        watch.finished()
