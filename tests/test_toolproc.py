"""netstack.toolproc: the one runner of helper tools (ready line, last JSON line, kill on exit),
on small Python children."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from netstack import toolproc


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


READY_ERR = "import sys, time; print('ready', file=sys.stderr, flush=True); "
READY_OUT = "import sys, time; print('ready', flush=True); "


@pytest.mark.parametrize("on, code", [("stderr", READY_ERR), ("stdout", READY_OUT)])
def test_ready_on_either_stream_then_the_last_json_line(on, code):
    proc = toolproc.start(_py(code + "print('progress'); print('{\"a\": 1}'); print('{\"b\": 2}'); print('done')"),
                          "child", ready_on=on, timeout=10)
    assert toolproc.result(proc, "child", 10) == {"b": 2}


def test_anything_but_ready_kills_the_tool_and_says_its_stderr():
    with pytest.raises(toolproc.ToolError, match=r"child did not start \(got 'nope'\): it broke"):
        # (its stderr first: it is killed as soon as the wrong line comes)
        toolproc.start(_py("import sys; print('it broke', file=sys.stderr, flush=True); print('nope', flush=True); "
                           "import time; time.sleep(30)"), "child", timeout=10)


def test_a_silent_tool_times_out_and_is_reaped():
    proc = toolproc.popen(_py("import time; time.sleep(30)"))
    t0 = time.monotonic()
    with pytest.raises(toolproc.ToolError, match="did not start"):
        toolproc.wait_ready(proc, "child", timeout=0.3)
    assert time.monotonic() - t0 < 10 and proc.returncode is not None


def test_the_caller_chooses_the_exception():
    class Mine(RuntimeError):
        pass

    with pytest.raises(Mine):
        toolproc.start(_py("pass"), "child", error=Mine)


def test_a_failure_or_no_json_raises_with_the_end_of_stderr():
    with pytest.raises(toolproc.ToolError, match=r"failed \(exit 3\): bad thing"):
        toolproc.run(_py("import sys; print('{}'); print('bad thing', file=sys.stderr); sys.exit(3)"), "child", 10)
    with pytest.raises(toolproc.ToolError, match=r"failed \(exit 0\): no JSON result"):
        toolproc.run(_py("print('plain')"), "child", 10)


def test_a_tool_that_takes_too_long_is_killed():
    proc = toolproc.popen(_py("import time; time.sleep(30)"))
    with pytest.raises(toolproc.ToolError, match="did not finish within 0 s"):
        toolproc.result(proc, "child", 0.3)
    assert proc.returncode == -signal.SIGKILL


def test_sigterm_counts_when_the_caller_says_so():
    # the result before the ready line (on the other stream), so that it is there when SIGTERM comes
    code = ("import sys, time; print('{\"stopped\": true}', flush=True); "
            "print('ready', file=sys.stderr, flush=True); time.sleep(30)")
    proc = toolproc.start(_py(code), "child", ready_on="stderr", timeout=10)
    proc.terminate()
    assert toolproc.result(proc, "child", 10, ok=(0, -signal.SIGTERM)) == {"stopped": True}
    proc = toolproc.start(_py(code), "child", ready_on="stderr", timeout=10)
    proc.terminate()
    with pytest.raises(toolproc.ToolError, match=r"exit -15"):
        toolproc.result(proc, "child", 10)


def test_finish_reports_what_it_got_even_after_a_timeout():
    done = toolproc.finish(toolproc.popen(_py("print('{\"x\": 1}', flush=True); import time; time.sleep(30)")), 1.0)
    assert done.timed_out and done.returncode == -signal.SIGKILL and done.json() == {"x": 1}


def test_spawned_kills_and_reaps_on_the_way_out():
    with pytest.raises(KeyError), toolproc.spawned(_py("import time; time.sleep(30)")) as proc:
        raise KeyError
    assert proc.returncode == -signal.SIGKILL


def test_last_json_takes_the_last_object_line():
    assert toolproc.last_json('{"a": 1}\nnoise\n{"b": 2}\ntrailer\n') == {"b": 2}
    assert toolproc.last_json("") is None
    assert toolproc.last_json("{broken") is None
    assert toolproc.last_json("[1, 2]") is None


def test_progress_passes_stderr_through(capfd):
    doc = toolproc.run(_py("import sys; print('step 1', file=sys.stderr, flush=True); print('{\"ok\": 1}')"),
                       "child", 10, progress=True)
    assert doc == {"ok": 1} and "step 1" in capfd.readouterr().err
