import pytest

# samples.py holds shared assert helpers; rewrite them so failures show values.
pytest.register_assert_rewrite("tests.unit.receivers.samples")
