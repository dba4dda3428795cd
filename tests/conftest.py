pytest_plugins = ["tests.receivers.fixtures"]
