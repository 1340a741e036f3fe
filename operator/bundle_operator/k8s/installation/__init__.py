"""A BundleInstallation's reconcile and what it keeps between runs.

``reconciler`` (the named steps), ``uninstall`` (its finalizer), ``inputs`` (its Bundle, setup
and peers), ``status``, ``gate`` (approval), ``drift_clock`` (every installation's drift checks),
``state`` (the engine's record in a Secret), ``setup`` (setup values from Secrets),
``secret_holds`` (the token Secret an uninstall needs), ``peers`` (who came first into a
workspace), ``watch_cache`` (what the watches delivered, read instead of the API server).
"""
