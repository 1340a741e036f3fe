"""The process around the handlers: ``run`` (kopf's loop, probes, clean SIGTERM), ``options``
(the flags of ``operator run``), ``leader`` (the Lease), ``health`` (probes), ``metrics``,
``watch_lag`` (what the watches delivered against the API server's lists)."""
