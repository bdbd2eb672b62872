import random, time
import pytest
from netstack.ui import server as uiserver
from tests.ui.test_server import bed, client, test_with_the_token_changes_go_to_the_library as body  # noqa: F401

_orig = uiserver.UIServer.poll_once

def slow_poll(self):
    time.sleep(random.uniform(0, 0.03))
    return _orig(self)

@pytest.fixture(autouse=True)
def _slow(monkeypatch):
    monkeypatch.setattr(uiserver.UIServer, "poll_once", slow_poll)

@pytest.mark.asyncio
@pytest.mark.parametrize("i", range(150))
async def test_loop(client, monkeypatch, i):
    await body(client, monkeypatch)
