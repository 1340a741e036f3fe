"""The operator: CRD models, kopf handlers, reconcilers, state Secrets, status, events, metrics."""
