import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon import Daemon, FreshDatabase, pg_url  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request):
    """The store URL for a daemon: None (SQLite in its data dir) or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    admin = pg_url()
    if admin is None:
        pytest.skip("set CLUTCH_TEST_PG_URL to run the PostgreSQL tests")
    db = FreshDatabase(admin)
    try:
        yield db.url
    finally:
        db.drop()


@pytest.fixture
def daemon(backend):
    d = Daemon(db=backend).start()
    try:
        yield d
    finally:
        d.stop()
