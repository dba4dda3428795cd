pytest_plugins = ["tests.receivers.fixtures", "tests.skip_policy", "tests.harness_marker"]
