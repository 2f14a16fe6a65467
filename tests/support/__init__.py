"""What the tests share: helpers, fixtures (the modules `tests/conftest.py` loads as plugins)
and the small programs some tests start. A test module imports from here, never from another
test module or a conftest."""

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]  # the project's checkout, wherever a test lives
