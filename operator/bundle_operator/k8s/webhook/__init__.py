"""The validating admission webhook: ``admission`` (the verdicts), ``server`` (HTTPS in every
replica), ``certs`` (the certificate made and renewed when cert-manager does not)."""
