"""Fixtures every test folder may use."""

pytest_plugins = ["tests.mcpb_servers", "tests.control_plane", "tests.otlp_receiver"]
