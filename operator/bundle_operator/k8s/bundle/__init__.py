"""A Bundle's reconcile: ``reconciler`` (resolve, analyze offline, report), ``sources`` (the
dispatch over the five kinds of source, reading ConfigMaps and Secrets), ``status``."""
