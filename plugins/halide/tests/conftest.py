pytest_plugins = ["polyduct.conformance.plugin"]
