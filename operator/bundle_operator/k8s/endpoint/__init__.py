"""An Endpoint's reconcile: ``reconciler`` (the named steps), ``target`` (the installation's
gateway it serves), ``secret`` (its own credentials Secret), ``status``."""
