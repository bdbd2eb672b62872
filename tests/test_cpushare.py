"""netstack.cpushare: CPU time of the measurement's own processes, and of everything else."""

from __future__ import annotations

import subprocess
import sys
import time

from netstack.cpushare import CpuWindow, process_ticks, system_times

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"


def test_a_busy_child_of_ours_is_ours_even_after_it_ended():
    """The generator of a benchmark ends (and is reaped) inside the window: its CPU time moves to
    this process's children's times, and still counts as the measurement's own."""
    child = subprocess.Popen([sys.executable, "-c", BUSY])
    w = CpuWindow(lambda: [child.pid]).start()
    child.wait()
    share = w.stop()
    assert share["ours_share"] > 0
    assert 0 <= share["foreign_share"] <= 1
    assert abs(sum(share[k] for k in ("ours_share", "foreign_share", "softirq_share", "idle_share")) - 1) < 0.05


def test_a_busy_process_not_ours_is_foreign():
    other = subprocess.Popen([sys.executable, "-c", BUSY.replace("0.4", "5")])
    try:
        w = CpuWindow(lambda: []).start()
        time.sleep(0.3)  # (it is not reaped inside the window: a reaped child would count as ours)
        share = w.stop()
    finally:
        other.kill()
        other.wait()
    assert share["foreign_share"] > 0


def test_proc_readers():
    assert len(system_times() or []) == 8
    assert process_ticks(2**22 + 12345) == 0  # no such process
