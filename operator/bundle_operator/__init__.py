"""bundle-operator: install portable bundles of AI-agent configuration into an agent platform."""

__version__ = "0.1.0"
