from __future__ import annotations

import pytest

from ..export.conftest import record_run


@pytest.fixture
def run_events() -> list[dict]:
    """A small recorded run's events (as tests/export records them)."""
    return record_run()
