# The conformance plugin (--polyduct-backend) loads through the pytest11 entry point of polyduct.
