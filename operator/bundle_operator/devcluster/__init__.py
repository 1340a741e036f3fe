"""A local control plane (etcd, kube-apiserver, kube-controller-manager) for tests and local runs.

Binaries come from the envtest cache (`make envtest`); see `DevCluster` and `locate`.
"""

from bundle_operator.devcluster.binaries import Binaries, BinariesNotFound, locate
from bundle_operator.devcluster.cluster import ClusterStartError, DevCluster
from bundle_operator.devcluster.kubectl import Kubectl, KubectlError, WaitTimeout, wait_until

__all__ = [
    "Binaries",
    "BinariesNotFound",
    "ClusterStartError",
    "DevCluster",
    "Kubectl",
    "KubectlError",
    "WaitTimeout",
    "locate",
    "wait_until",
]
