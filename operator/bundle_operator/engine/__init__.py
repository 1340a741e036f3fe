"""The engine: analyze, plan, install, update, drift, uninstall, export. No kopf, no kubernetes."""
