"""``python -m bundle_operator`` runs the operator, like ``bundlectl operator run``."""

import sys

from bundle_operator.k8s.process.run import main

sys.exit(main())
